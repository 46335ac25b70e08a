"""The hook wire protocol between a hook process and the warm resident process, and the fast
path that speaks it. It imports only modules compiled into the interpreter (sys, os, time,
_socket, _json): a warm prompt hook then costs the interpreter start plus one socket round
trip, because the hook forwards the host's raw stdin and prints the rendered reply as is.
(zmem.layout, its one zmem import, has no imports of its own.)

Request:  b"ZMEM2 " + header JSON + b"\\n" + the host's stdin bytes
Reply:    b"ok\\t<reason>\\n" + exactly what the host's stdout gets, or b"no\\t<why>\\n"."""

import os
import time

from zmem.layout import SOCKET_NAME

MAGIC = b"ZMEM2 "
# Seconds before the hook gives up and fails open (prints nothing). Claude's own default for
# UserPromptSubmit is 30 s; a memory hook must cost far less than that.
DEADLINES = {"SessionStart": 8.0, "SubagentStart": 4.0}
DEFAULT_DEADLINE = 3.0
# Host variables a verb reads (plugin paths for the skill line, the project dir); forwarded
# because the resident process was started by another hook with another environment.
REQUEST_ENV_KEYS = ("CLAUDE_PLUGIN_ROOT", "PLUGIN_ROOT", "ZMEM_PLUGIN_ROOT", "CLAUDE_PROJECT_DIR")

ANSWERED = "answered"  # the resident process handled it: print the body, exit
REFUSED = "refused"  # it will not handle this request: the caller runs the verb itself
TIMED_OUT = "timeout"  # the deadline passed: fail open, print nothing


HELP = """usage: zmem-hook <Event> --host claude|codex|zcode   (the host's hook payload on stdin)

The hook entry point `zmem setup` wires into a host's settings: the host runs it for each hook
event and reads its stdout. Events: SessionStart, UserPromptSubmit, PreToolUse, PostToolUse,
PostToolUseFailure, PreCompact, SubagentStart, SubagentStop, Stop (as each host sends them).
It never fails its host: on any error it prints nothing and exits 0, and logs a line in
$ZMEM_DATA/zmem-bg.log. To try one by hand: `zmem hook <Event> --host claude < payload.json`
(see `zmem hook --help`). `zmem doctor` checks the wiring.
"""


def flag(name: str, default: bool = True, environ=os.environ) -> bool:
    raw = environ.get(name, "").strip().lower()
    if raw in ("0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    return default


def parse_argv(argv: list[str]) -> tuple[str, str]:
    """(event, host) from `<Event> --host NAME` (or --host=NAME), in any order."""
    event, host = "", ""
    rest = list(argv)
    while rest:
        a = rest.pop(0)
        if a == "--host" and rest:
            host = rest.pop(0)
        elif a.startswith("--host="):
            host = a.split("=", 1)[1]
        elif not event:
            event = a
    return event, host


def data_dir_path(environ=os.environ) -> str:
    return os.path.expanduser(environ.get("ZMEM_DATA", "").strip() or "~/.zmem")


def deadline(event: str, environ=os.environ) -> float:
    raw = environ.get("ZMEM_HOOK_DEADLINE_MS", "").strip()
    try:
        if raw:
            return max(0.05, float(raw) / 1000)
    except ValueError:
        pass
    return DEADLINES.get(event, DEFAULT_DEADLINE)


def settings_items(environ=os.environ) -> list[list[str]]:
    """The ZMEM_* settings a request depends on: the resident process answers only a client
    whose settings equal its own (ZMEM_HOOK* tune the client, not the answer)."""
    items = environ.items()
    return sorted([k, v] for k, v in items if k[:5] == "ZMEM_" and k[:9] != "ZMEM_HOOK")


def encode_request(host: str, event: str, pkg: str, payload: bytes, environ=os.environ) -> bytes:
    from _json import encode_basestring_ascii as q  # the C encoder json.dumps itself uses

    env = ",".join(f"[{q(k)},{q(v)}]" for k, v in settings_items(environ))
    fwd = ",".join(f"{q(k)}:{q(environ[k])}" for k in REQUEST_ENV_KEYS if k in environ)
    header = (
        f'{{"host":{q(host)},"event":{q(event)},"pkg":{q(pkg)},'
        f'"env":[{env}],"request_env":{{{fwd}}}}}'
    )
    return MAGIC + header.encode("ascii") + b"\n" + payload


def decode_request(data: bytes) -> tuple[dict, bytes] | None:
    """(header, payload) or None for anything that is not a version-2 request."""
    import json

    if not data.startswith(MAGIC):
        return None
    head, sep, payload = data[len(MAGIC) :].partition(b"\n")
    try:
        header = json.loads(head)
    except ValueError:
        return None
    if not sep or not isinstance(header, dict):
        return None
    return header, payload


def encode_reply(reason: str, body: str) -> bytes:
    return b"ok\t" + reason.encode("ascii", "replace") + b"\n" + body.encode("utf-8")


def encode_refusal(why: str) -> bytes:
    return b"no\t" + why.encode("ascii", "replace") + b"\n"


def ask(socket_path: str, request: bytes, seconds: float) -> tuple[str, bytes]:
    """Send one request; (ANSWERED, stdout bytes), (REFUSED, why) or (TIMED_OUT, b"").
    No process listening is REFUSED: the caller then does the work itself."""
    import _socket

    start = time.monotonic()
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        s.settimeout(min(seconds, 0.5))  # a live process accepts at once
        try:
            s.connect(socket_path)
        except OSError:
            return REFUSED, b"no-daemon"
        chunks = []
        try:
            s.settimeout(max(0.01, seconds - (time.monotonic() - start)))
            s.sendall(request)
            s.shutdown(_socket.SHUT_WR)
            while True:
                left = seconds - (time.monotonic() - start)
                if left <= 0:
                    return TIMED_OUT, b""
                s.settimeout(left)
                chunk = s.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        except TimeoutError:
            return TIMED_OUT, b""
        except OSError:
            # It went away mid-request (idle exit, killed): nothing was answered.
            return REFUSED, b"disconnected"
    finally:
        s.close()
    status, _, rest = b"".join(chunks).partition(b"\n")
    if status.startswith(b"ok\t"):
        return ANSWERED, rest
    return REFUSED, status.partition(b"\t")[2] or b"bad-reply"


def fast_path(host: str, event: str, payload: bytes, pkg: str) -> tuple[str, bytes]:
    """The launcher's first try: the resident process, if one listens and may be used."""
    if not flag("ZMEM_HOOK_DAEMON"):
        return REFUSED, b"disabled"
    path = os.path.join(data_dir_path(), SOCKET_NAME)
    return ask(path, encode_request(host, event, pkg, payload), deadline(event))
