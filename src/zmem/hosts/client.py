"""The hook client: `<Event> --host claude|codex|zcode` with the host's JSON on stdin. It
decides with the standard library alone whether there is work, asks the warm resident process
when one is listening, else runs the verb in-process under a hard deadline; it always exits 0,
prints only what the host accepts, and logs one `reason=` line to <data dir>/zmem-bg.log."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import zlib
from pathlib import Path

from zmem.hosts import emit, events, opsring

# typing costs the hook client ~2.5 ms to import; the names are for annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PROTOCOL = 1
LOG_NAME = "zmem-bg.log"
SOCKET_NAME = "zmem-hookd.sock"
LOG_MAX_BYTES = 1 << 20
# Seconds before the hook gives up and fails open (prints nothing). Claude's own default for
# UserPromptSubmit is 30 s; a memory hook must cost far less than that.
DEADLINES = {"SessionStart": 8.0, "SubagentStart": 4.0}
DEFAULT_DEADLINE = 3.0
SPAWN_GRACE_S = 30.0
# Events that never need the store: nothing to do but log.
_NO_WORK = frozenset({"Stop", "PreCompact", "SessionEnd", "PermissionRequest"})
_PKG = Path(__file__).resolve().parents[1]
# Files whose change means a resident process runs stale code.
_BUILD_FILES = ("hosts", "retrieval", "store.py", "reading.py", "config.py", "models.py", "db")


def data_dir(env: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    return Path(env.get("ZMEM_DATA", "").strip() or "~/.zmem").expanduser()


def _flag(name: str, default: bool = True) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if raw in ("0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    return default


def build_id() -> str:
    """Identifies the code a process runs: the client and the resident process must agree."""
    parts = [str(_PKG)]
    for name in _BUILD_FILES:
        path = _PKG / name
        try:
            entries = sorted(path.glob("*.py")) if path.is_dir() else [path]
            for p in entries:
                st = p.stat()
                parts.append(f"{p.name}:{st.st_mtime_ns}:{st.st_size}")
        except OSError:
            parts.append(name)
    return _digest(";".join(parts))


def _digest(text: str) -> str:
    # A change detector, not a security check: crc32 needs zlib (already loaded by the
    # interpreter) where hashlib costs the hook client ~3 ms of imports on every prompt.
    data = text.encode()
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}{len(data):x}"


def env_key() -> str:
    """The ZMEM_* settings a request depends on (the resident process refuses a mismatch)."""
    items = sorted((k, v) for k, v in os.environ.items() if k.startswith("ZMEM_"))
    items = [(k, v) for k, v in items if not k.startswith("ZMEM_HOOK")]
    return _digest(json.dumps(items))


def request_env() -> dict[str, str]:
    keys = ("CLAUDE_PLUGIN_ROOT", "PLUGIN_ROOT", "ZMEM_PLUGIN_ROOT", "CLAUDE_PROJECT_DIR")
    return {k: os.environ[k] for k in keys if k in os.environ}


def log_line(ddir: Path, host: str, event: str, reason: str, fields: dict[str, Any]) -> None:
    parts = [
        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "zmem-hook",
        f"host={host}",
        f"event={event}",
        f"reason={reason}",
    ]
    for key in ("hits", "omitted", "ops", "tokens", "via", "ms", "error"):
        if key in fields:
            value = str(fields[key]).replace("\n", " ")[:200]
            parts.append(f"{key}={value}")
    try:
        ddir.mkdir(parents=True, exist_ok=True)
        path = ddir / LOG_NAME
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(" ".join(parts) + "\n")
            if fh.tell() > LOG_MAX_BYTES:
                os.replace(path, ddir / (LOG_NAME + ".1"))
    except OSError:
        pass  # logging must never fail a hook


def _deadline(event: str) -> float:
    raw = os.environ.get("ZMEM_HOOK_DEADLINE_MS", "").strip()
    try:
        if raw:
            return max(0.05, float(raw) / 1000)
    except ValueError:
        pass
    return DEADLINES.get(event, DEFAULT_DEADLINE)


def _via_daemon(
    ddir: Path, ev: events.HookEvent, payload: dict[str, Any], timeout: float
) -> events.Outcome | None:
    path = ddir / SOCKET_NAME
    if not _flag("ZMEM_HOOK_DAEMON") or not path.exists():
        return None
    req = {
        "v": PROTOCOL,
        "build": build_id(),
        "env": env_key(),
        "host": ev.host,
        "event": ev.name,
        "payload": payload,
        "request_env": request_env(),
    }
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(str(path))
            s.sendall(json.dumps(req).encode() + b"\n")
            s.shutdown(socket.SHUT_WR)
            chunks = []
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        reply = json.loads(b"".join(chunks) or b"{}")
    except (OSError, ValueError):
        return None
    if not isinstance(reply, dict) or not reply.get("ok"):
        return None
    ctx = reply.get("context")
    fields = reply.get("fields") if isinstance(reply.get("fields"), dict) else {}
    return events.Outcome(
        ctx if isinstance(ctx, str) else None, str(reply.get("reason", "error")), fields
    )


def answers(path: Path) -> bool:
    """A resident process listens on this socket. A socket file left by a killed process must
    not block a new one for good (every hook would then pay the full in-process start)."""
    if not path.exists():
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(0.2)
            s.connect(str(path))
        return True
    except OSError:
        return False


def spawn_daemon(ddir: Path) -> None:
    """Start the resident process detached, at most once per grace period."""
    if not _flag("ZMEM_HOOK_DAEMON") or answers(ddir / SOCKET_NAME):
        return
    stamp = ddir / "zmem-hookd.starting"
    try:
        if time.time() - stamp.stat().st_mtime < SPAWN_GRACE_S:
            return
    except OSError:
        pass
    import subprocess  # only when a process is started: it costs ~6 ms to import

    try:
        ddir.mkdir(parents=True, exist_ok=True)
        stamp.touch()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(_PKG.parent), *filter(None, [env.get("PYTHONPATH")])]
        )
        subprocess.Popen(
            [sys.executable, "-m", "zmem.hosts.daemon", str(ddir)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
    except OSError:
        pass


def _in_process(ev: events.HookEvent) -> events.Outcome:
    # The heavy imports happen only here, once the hook knows it has work.
    from zmem.config import load_settings
    from zmem.hosts.verbs import Hooks

    hooks = Hooks(load_settings(), hybrid=False)  # see Hooks.hybrid: lexical when cold
    try:
        return hooks.run(ev)
    finally:
        hooks.close()


def run(host: str, event_name: str, raw: str) -> tuple[str, str]:
    """(stdout, log reason). Never raises."""
    t0 = time.monotonic()
    ddir = data_dir()
    fields: dict[str, Any] = {}
    reason = "error"
    out = ""
    try:
        out, reason, fields = _run(host, event_name, raw, ddir, t0)
    except Exception as exc:  # a hook must never fail its host
        fields = {"error": type(exc).__name__}
        out, reason = "", "error"
    fields["ms"] = int((time.monotonic() - t0) * 1000)
    log_line(ddir, host, event_name, reason, fields)
    return out, reason


def _run(
    host: str, event_name: str, raw: str, ddir: Path, t0: float
) -> tuple[str, str, dict[str, Any]]:
    if host not in events.HOSTS or event_name not in events.HOST_EVENTS[host]:
        return "", "skipped", {"error": "unknown-host-or-event"}
    try:
        payload = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return "", "error", {"error": "bad-json"}
    ev = events.normalize(host, event_name, payload)
    query_context = _flag("ZMEM_QUERY_CONTEXT")
    if event_name in _NO_WORK:
        return "", "skipped", {}
    if event_name in ("PostToolUse", "PostToolUseFailure"):
        o = opsring.record_event(query_context, ddir, ev)
        return "", o.reason, o.fields
    if event_name == "PreToolUse" and (
        not query_context or ev.tool_name not in events.HAZARD_TOOLS
    ):
        return "", "skipped", {}
    if event_name == "UserPromptSubmit" and not (ev.prompt or "").strip():
        return "", "skipped", {}
    limit = _deadline(event_name)
    outcome = _via_daemon(ddir, ev, payload, limit)
    via = "daemon"
    if outcome is None:
        via = "inproc"
        if event_name in ("SessionStart", "UserPromptSubmit"):
            spawn_daemon(ddir)
        outcome = _with_deadline(ev, limit - (time.monotonic() - t0))
        if outcome is None:
            return "", "timeout", {"via": via}
    fields = dict(outcome.fields)
    fields["via"] = via
    return emit.render(host, event_name, outcome.context), outcome.reason, fields


def _with_deadline(ev: events.HookEvent, seconds: float) -> events.Outcome | None:
    """The verb on a daemon thread; None when it misses the deadline (the hook fails open)."""
    import threading

    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["outcome"] = _in_process(ev)
        except BaseException as exc:  # reported as reason=error by the caller
            box["error"] = exc

    t = threading.Thread(target=work, name="zmem-hook", daemon=True)
    t.start()
    t.join(max(0.0, seconds))
    if t.is_alive():
        return None
    if "error" in box:
        raise box["error"]
    return box["outcome"]


def parse_argv(argv: list[str]) -> tuple[str, str]:
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


def main(argv: list[str] | None = None) -> None:
    """Process entry (the launchers): always exit 0, never wait for a stuck verb."""
    event, host = parse_argv(sys.argv[1:] if argv is None else argv)
    try:
        raw = sys.stdin.buffer.read().decode("utf-8", errors="replace")
    except (OSError, ValueError):
        raw = ""
    out, reason = run(host, event, raw)
    try:
        if out:
            sys.stdout.write(out)
        sys.stdout.flush()
    except OSError:
        pass
    # os._exit: a verb thread stuck past the deadline (a locked store) must not hold the
    # process open, and interpreter teardown is time the host waits for.
    os._exit(0)


if __name__ == "__main__":
    main()
