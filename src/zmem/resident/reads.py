"""The client side of the CLI's commands through the resident process: `zmem recall`, `search`,
`recent`, `get`, `list` and `add` hand their arguments (and what they read from stdin, and
whether a person is at the terminal) to the warm process of their data dir (model loaded,
vectors in memory) and print what it printed, so a hybrid recall or an add costs no model load
and no library import (cli.warm runs them there). When no process answers (or it serves another
store or other settings, or the command must ask the person something), the command runs
in-process and a process is started for next time, as the hooks do; ZMEM_HOOK_DAEMON=0 turns it
off."""

from __future__ import annotations

import json
import os

from zmem.resident import wire

COMMANDS = ("recall", "search", "recent", "get", "list", "add")
STDIN_CAP = 1 << 20  # what a forwarded command may read from stdin ('-'); more runs here
HOST = "cli"  # the request kind in the wire header's host field
DEADLINE_S = 10.0


def command_of(argv: list[str]) -> tuple[str | None, str | None]:
    """(the command name, the --store value) of a `zmem` argv, or (None, None) when it is not
    a read this module serves (help and version are answered by whoever runs them)."""
    store = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--store" and i + 1 < len(argv):
            store, i = argv[i + 1], i + 2
            continue
        if arg.startswith("--store="):
            store, i = arg.split("=", 1)[1], i + 1
            continue
        if arg.startswith("-"):
            return None, None  # --help, --version, an unknown global option
        rest = argv[i + 1 :]
        if arg in COMMANDS and not any(a in ("--help", "-h") for a in rest):
            return arg, store
        return None, None
    return None, None


def ask(
    argv: list[str], prog: str, store_path: str | os.PathLike, data_dir: str | os.PathLike
) -> tuple[int, str, str] | None:
    """(exit code, stdout, stderr) from the resident process, or None: then run it here."""
    if not wire.flag("ZMEM_HOOK_DAEMON"):
        return None
    import io
    import sys

    from zmem.cli import terminal

    tty = terminal.interactive()  # a person here (not an agent's PTY): the process must know
    stdin = None
    if "-" in argv or any(a.endswith("=-") for a in argv):  # a value read from stdin
        try:
            stdin = sys.stdin.read(STDIN_CAP + 1)
        except (OSError, ValueError, UnicodeDecodeError):
            return None
        # Whatever happens next, an in-process run reads the same text.
        rest = sys.stdin.read() if len(stdin) > STDIN_CAP else ""
        sys.stdin = io.StringIO(stdin + rest)
        if rest:
            return None  # too big to forward: run here
    payload = json.dumps({"argv": argv, "prog": prog, "cwd": os.getcwd(),
                          "store": str(store_path), "tty": tty, "stdin": stdin})  # fmt: skip
    # The zmem package this process runs, as resident.code names it (no pathlib here).
    package = os.path.dirname(os.path.dirname(os.path.realpath(wire.__file__)))
    request = wire.encode_request(HOST, "read", package, payload.encode("utf-8"))
    state, body = wire.ask(os.path.join(data_dir, wire.SOCKET_NAME), request, DEADLINE_S)
    if state != wire.ANSWERED:
        return None
    try:
        done = json.loads(body)
        return int(done["code"]), str(done["stdout"]), str(done["stderr"])
    except (ValueError, KeyError, TypeError):
        return None
