"""Whose is the prompt hook's port, asked at every Claude Code session start before its first
prompt (issue 48): when another user's program holds it, the hook moves (a new port and secret
in Claude Code's settings and hookd-http.json, the keeper started there) and the person is
told; else the keeper is started when none runs."""

from __future__ import annotations

import os
from pathlib import Path

from zmem import ports
from zmem.resident import http_hook


def guard(data_dir: Path, env: dict[str, str] | None = None) -> str | None:
    """At a Claude Code session start, before its first prompt (issue 48): when another user's
    program holds the hook's port (the kernel's table says whose socket it is; where there is
    none to read, the holder must prove it knows the secret), the hook moves to a new port with
    a new secret and the keeper starts there; returns what the person must be told. Else the
    keeper is started when none runs (start). Never raises: a hook never fails its host."""
    environ = dict(os.environ if env is None else env)
    config = http_hook.load_config(data_dir)
    if config is None:
        return None
    foreign = ports.foreign_owner(config.port)
    who = f"another user's program ({ports.user_name(foreign)})" if foreign is not None else ""
    if not who and ports.owners(config.port) is None and http_hook.running(data_dir):
        if http_hook.challenge(config) is False:  # no /proc: the holder could not prove it is ours
            who = "a program that cannot prove it is ZMem's keeper"
    if not who:
        http_hook.start(data_dir, environ)
        return None
    try:
        from zmem.hosts import setup as wiring  # only now: the move is rare, the check is not

        moved = wiring.move_http_hook(data_dir, environ)
    except Exception:
        moved = None
    if moved is None:
        return (
            f"ZMem: port {config.port} of the prompt hook is held by {who}; it may receive this "
            "session's prompts. Run `zmem setup claude` to move the hook, then start a new "
            "session."
        )
    http_hook.start(data_dir, environ)
    return (
        f"ZMem: port {config.port} of the prompt hook was held by {who}, which would have "
        f"received your prompts. The hook moved to port {moved.port} with a new secret, held by "
        "ZMem's keeper; `zmem doctor` shows who holds it."
    )
