"""The `zmem` command line: a thin click front end over MemoryStore (built in zmem.cli.app).
This module is what the `zmem` script imports first, so it imports nearly nothing: the version,
and the commands the warm resident process answers (recall, search, recent, get, list, add),
are served before click and the commands load; everything else runs zmem.cli.app. Names of the
app (`cli`, `StoreContext`, ...) are reachable from here as before."""

from __future__ import annotations

import os
import sys

_APP_NAMES = ("cli", "StoreContext", "ZMemGroup", "ZMemCommand", "INTERNAL_ERROR", "run")


def __getattr__(name: str):
    if name in _APP_NAMES:
        from zmem.cli import app

        return getattr(app, name)
    raise AttributeError(f"module 'zmem.cli' has no attribute {name!r}")


def main(argv: list[str] | None = None, prog_name: str | None = None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    # `python -m zmem` runs as __main__.py: its messages still say zmem.
    name = os.path.basename(sys.argv[0])
    prog = prog_name or ("zmem" if name in ("", "__main__.py") else name)
    from zmem.cli import plain

    if args == ["--version"]:
        from zmem import __version__

        plain.write(f"zmem, version {__version__}\n", "")  # click's own words for it
        sys.exit(0)
    from zmem import layout

    layout.keep_private()
    served_here: list[str] = []
    warm = _warm(args, prog, served_here)
    if warm is not None:
        code, out, err = warm
        plain.write(out, err)
        sys.exit(code)
    from zmem.cli.app import run

    run(args, prog, served_here)


def _warm(args: list[str], prog: str, served_here: list[str]) -> tuple[int, str, str] | None:
    """The command answered by the resident process of its store's data dir (resident.reads),
    or None: run it here (and start one for next time when it was one it serves)."""
    from zmem.resident import reads as warm

    command, store = warm.command_of(args)
    if command is None:
        return None
    from zmem import locations

    # Where the store is, by the rule the settings use; a setting the resident process does
    # not share (or one that is invalid) makes it refuse, and the command runs here.
    try:
        done = warm.ask(args, prog, locations.store_path(store), locations.data_dir())
    except Exception:  # a failure to forward is never the command's: it runs here instead
        done = None
    if done is None:
        served_here.append(command)
    return done
