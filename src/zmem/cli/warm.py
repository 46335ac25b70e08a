"""CLI reads served inside the resident process (resident.reads is the client side): the very
same command, run on the process's open store, in the caller's directory, with its output
captured for the reply."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

from zmem.cli import terminal
from zmem.cli.app import StoreContext, cli
from zmem.resident.reads import command_of


def serve(payload: bytes, store: Any, store_path: Path) -> tuple[str, str] | None:
    """In the resident process: run the read on `store`; (reason, reply body) or None to
    refuse (another store, a request that is not a read)."""
    try:
        req = json.loads(payload)
        argv, cwd, prog = list(map(str, req["argv"])), str(req["cwd"]), str(req["prog"])
        if Path(req["store"]) != store_path:
            return None
        tty, stdin = bool(req.get("tty")), req.get("stdin")
        if stdin is not None and not isinstance(stdin, str):
            return None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if command_of(argv)[0] is None:
        return None
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    try:
        os.chdir(cwd)  # the namespace a read means depends on where it was asked
    except OSError:
        return None
    real_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin or "")  # what the client read for '-', never this process's
    terminal.set_interactive(tty)  # the client's terminal, not this process's (none)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(
                args=argv, prog_name=prog, standalone_mode=False,
                obj=StoreContext(str(store_path), store=store),
            )  # fmt: skip
    except SystemExit as exc:  # ZMemGroup.make_context exits on a bad global option
        code = exc.code if isinstance(exc.code, int) else 1
    except terminal.NeedsPerson:
        return None  # a question for the person: the client runs it where it can ask
    finally:
        os.chdir(here)
        sys.stdin = real_stdin
        terminal.set_interactive(None)
    body = json.dumps({"code": code if isinstance(code, int) else 0,
                       "stdout": out.getvalue(), "stderr": err.getvalue()})  # fmt: skip
    return "cli", body
