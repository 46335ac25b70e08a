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

from zmem.hosts import emit, events, opsring, wire

# typing costs the hook client ~2.5 ms to import; the names are for annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

LOG_NAME = "zmem-bg.log"
SOCKET_NAME = wire.SOCKET_NAME
LOG_MAX_BYTES = 1 << 20
SPAWN_GRACE_S = 30.0
# Events that never need the store: nothing to do but log.
_NO_WORK = frozenset({"Stop", "PreCompact", "SessionEnd", "PermissionRequest"})
_PKG = Path(__file__).resolve().parents[1]


def data_dir(env: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    return Path(wire.data_dir_path(env))


def _flag(name: str, default: bool = True) -> bool:
    return wire.flag(name, default)


def _code_files(pkg: Path) -> list[tuple[str, str, int, int]]:
    """(relative path, path, mtime ns, size) of the package's code, sorted: os.scandir, because
    the resident process checks this before every answer (pathlib's rglob costs 4x)."""
    root = str(pkg)
    out = []
    stack = [root]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for e in entries:
                if e.is_dir(follow_symlinks=False):
                    if e.name != "__pycache__":
                        stack.append(e.path)
                elif e.name.endswith((".py", ".sql")):
                    st = e.stat()
                    out.append((e.path[len(root) :], e.path, st.st_mtime_ns, st.st_size))
    out.sort()
    return out


def _digest(chunks: list[bytes]) -> str:
    # A change detector, not a security check: crc32 and adler32 need only zlib.
    crc, adler, size = 0, 1, 0
    for chunk in chunks:
        crc, adler, size = zlib.crc32(chunk, crc), zlib.adler32(chunk, adler), size + len(chunk)
    return f"{crc:08x}{adler:08x}{size:x}"


def build_id(pkg: Path = _PKG) -> str:
    """The code's file stamps: the resident process compares its own with the disk before each
    answer, and hands over to a fresh process when they differ (~0.5 ms)."""
    return _digest([f"{rel}:{mtime}:{size};".encode() for rel, _, mtime, size in _code_files(pkg)])


def code_digest(pkg: Path = _PKG) -> str:
    """What the code is, wherever it lies and whenever it was copied: two installs of the same
    release (Claude Code's and Codex's plugin copies) digest alike."""
    chunks = []
    for rel, path, _, _ in _code_files(pkg):
        chunks.append(rel.encode())
        try:
            with open(path, "rb") as fh:
                chunks.append(fh.read())
        except OSError:
            chunks.append(b"?")
    return _digest(chunks)


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


def run(host: str, event_name: str, raw: str, ask_daemon: bool = True) -> tuple[str, str]:
    """(stdout, log reason). Never raises. The resident process answers when one listens and
    runs this code with these settings; otherwise the verb runs here, under the deadline."""
    t0 = time.monotonic()
    ddir = data_dir()
    try:
        state, body = _ask_resident(host, event_name, raw, ddir) if ask_daemon else (None, b"")
        if state == wire.ANSWERED:
            return body.decode("utf-8", "replace"), "daemon"  # the resident process logged it
        if state == wire.TIMED_OUT:
            out, reason, fields = "", "timeout", {"via": "daemon"}
        else:
            out, reason, fields = respond(host, event_name, raw, ddir, t0, _run_here)
    except Exception as exc:  # a hook must never fail its host
        out, reason, fields = "", "error", {"error": type(exc).__name__}
        if isinstance(exc, ImportError):
            repair_install()
    fields["ms"] = int((time.monotonic() - t0) * 1000)
    log_line(ddir, host, event_name, reason, fields)
    return out, reason


def repair_install() -> None:
    """A plugin venv without its packages (a first install that failed offline) would leave
    every hook silently off for good: the host's `|| bootstrap.py` fallback never runs again
    once the venv exists. Ask the bootstrap to install again; it acts only on the venv it made
    and at most once per 10 minutes."""
    script = _PKG.parents[1] / "hooks" / "bootstrap.py"
    if not script.is_file():
        return
    import subprocess

    try:
        subprocess.Popen(
            [sys.executable, str(script), "--repair"],  # site sets sys.prefix to the venv
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        pass


def _ask_resident(host: str, event_name: str, raw: str, ddir: Path) -> tuple[str, bytes]:
    if not _flag("ZMEM_HOOK_DAEMON"):
        return wire.REFUSED, b"disabled"
    request = wire.encode_request(host, event_name, str(_PKG), raw.encode())
    return wire.ask(str(ddir / SOCKET_NAME), request, wire.deadline(event_name))


def _run_here(ev: events.HookEvent, t0: float) -> tuple[events.Outcome | None, str]:
    if ev.name in ("SessionStart", "UserPromptSubmit"):
        spawn_daemon(data_dir())
    return _with_deadline(ev, wire.deadline(ev.name) - (time.monotonic() - t0)), "inproc"


def respond(
    host: str,
    event_name: str,
    raw: str,
    ddir: Path,
    t0: float,
    execute: Callable[[events.HookEvent, float], tuple[events.Outcome | None, str]],
) -> tuple[str, str, dict[str, Any]]:
    """One hook event from raw stdin to (stdout, reason, log fields), shared by this process
    and the resident one; `execute` runs a verb that needs the store, returning (outcome or
    None on timeout, via)."""
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
    if event_name not in emit.CONTEXT_EVENTS.get(host, ()):
        return "", "skipped", {}  # the host would drop the context: no recall for nothing
    if event_name == "PreToolUse" and (
        not query_context or ev.tool_name not in events.HAZARD_TOOLS
    ):
        return "", "skipped", {}
    if event_name == "UserPromptSubmit" and not (ev.prompt or "").strip():
        return "", "skipped", {}
    outcome, via = execute(ev, t0)
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


def main(argv: list[str] | None = None, raw: bytes | None = None, ask_daemon: bool = True) -> None:
    """Process entry (the launchers): always exit 0, never wait for a stuck verb. The launcher
    passes stdin it already read and whether the resident process was already asked."""
    event, host = wire.parse_argv(sys.argv[1:] if argv is None else argv)
    if raw is None:
        try:
            raw = sys.stdin.buffer.read()
        except (OSError, ValueError):
            raw = b""
    out, reason = run(host, event, raw.decode("utf-8", errors="replace"), ask_daemon)
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
