"""The hook client: `<Event> --host claude|codex|zcode` with the host's JSON on stdin. It
decides with the standard library alone whether there is work, asks the warm resident process
when one is listening, else runs the verb in-process under a hard deadline; it always exits 0,
prints only what the host accepts, and logs one `reason=` line to <data dir>/zmem-bg.log."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from zmem.hosts import emit, events
from zmem.layout import LOG_NAME, SOCKET_NAME, SPAWN_STAMP, keep_private
from zmem.resident import code, dispatch, wire
from zmem.resident.code import PACKAGE_DIR

# typing costs the hook client ~2.5 ms to import; the names are for annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

LOG_MAX_BYTES = 1 << 20
SPAWN_GRACE_S = 30.0


def data_dir(env: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    return Path(wire.data_dir_path(env))


def log_line(ddir: Path, host: str, event: str, reason: str, fields: dict[str, Any]) -> None:
    parts = [
        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "zmem-hook",
        f"host={host}",
        f"event={event}",
        f"reason={reason}",
    ]
    for key in ("hits", "omitted", "seen", "ops", "tokens", "via", "ms", "error", "count",
                "hook_port", "why", "path"):  # fmt: skip
        if key in fields:
            value = "_".join(str(fields[key]).split())[:200]
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


_refused: set[str] = set()


def log_refused_files(ddir: Path) -> None:
    """From now on, every file zmem.untrusted refuses in this process (a FIFO or a device where
    a hook reads the checkout or a transcript) is logged once: `host=file reason=refused`."""
    from zmem import untrusted

    if any(getattr(cb, "zmem_log", False) for cb in untrusted.on_refused):
        return

    def note(path: str, why: str) -> None:
        if path in _refused or len(_refused) >= 32:
            return
        _refused.add(path)
        log_line(ddir, "file", "read", "refused", {"path": path, "why": why})

    note.zmem_log = True  # type: ignore[attr-defined]
    untrusted.on_refused.append(note)


def answers(path: Path) -> bool:
    """A resident process listens on this socket. A socket file left by a killed process must
    not block a new one for good (every hook would then pay the full in-process start)."""
    if not path.exists():
        return False
    import _socket  # the C module: `socket` would add ~6 ms (enum, selectors) to a cold hook

    try:
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    except OSError:  # no descriptors left, or a sandbox without sockets: nobody answers
        return False
    try:
        s.settimeout(0.2)
        s.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        s.close()


def spawn_daemon(ddir: Path) -> None:
    """Start the resident process detached, at most once per grace period."""
    if not wire.flag("ZMEM_HOOK_DAEMON") or answers(ddir / SOCKET_NAME):
        return
    stamp = ddir / SPAWN_STAMP
    try:
        if time.time() - stamp.stat().st_mtime < SPAWN_GRACE_S:
            return
    except OSError:
        pass
    try:
        ddir.mkdir(parents=True, exist_ok=True)
        stamp.touch()
    except OSError:
        return
    code.start_detached("zmem.resident.daemon", str(ddir))


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
            log_refused_files(ddir)
            out, reason, fields = dispatch.respond(host, event_name, raw, ddir, t0, _run_here)
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
    script = PACKAGE_DIR / "plugin" / "hooks" / "bootstrap.py"
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
    if not wire.flag("ZMEM_HOOK_DAEMON"):
        return wire.REFUSED, b"disabled"
    request = wire.encode_request(host, event_name, str(PACKAGE_DIR), raw.encode())
    return wire.ask(str(ddir / SOCKET_NAME), request, wire.deadline(event_name))


def _run_here(ev: events.HookEvent, t0: float) -> tuple[events.Outcome | None, str]:
    if ev.name in ("SessionStart", "UserPromptSubmit"):
        spawn_daemon(data_dir())
    return _with_deadline(ev, wire.deadline(ev.name) - (time.monotonic() - t0)), "inproc"


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
    keep_private()
    event, host = wire.parse_argv(sys.argv[1:] if argv is None else argv)
    if raw is None:
        try:
            raw = sys.stdin.buffer.read()
        except (OSError, ValueError):
            raw = b""
    out, reason = run(host, event, raw.decode("utf-8", errors="replace"), ask_daemon)
    emit.write(out)
    # os._exit: a verb thread stuck past the deadline (a locked store) must not hold the
    # process open, and interpreter teardown is time the host waits for.
    os._exit(0)


if __name__ == "__main__":
    main()
