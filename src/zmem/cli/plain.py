"""What the `zmem` entry prints before click loads (issue 49): the version, and another
process's output passed through as it is (the resident process's answer to a forwarded
command). Everything else prints through zmem.cli.output."""

from __future__ import annotations

import os
import sys


def write(out: str, err: str) -> None:
    """What a command printed elsewhere (the resident process), as is; a reader that went away
    (`zmem list | head`) ends it quietly."""
    try:
        sys.stdout.write(out)
        sys.stdout.flush()
    except BrokenPipeError:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass
    if err:
        sys.stderr.write(err)
        sys.stderr.flush()
