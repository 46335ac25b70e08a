"""Who listens on a loopback TCP port, read from /proc (Linux; None where there is none to
read): how setup and doctor tell ZMem's own keeper from another program holding the port of
Claude Code's http prompt hook, which would otherwise receive prompts and their secret.
Standard library only."""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")
_LISTEN = "0A"  # the TCP state of a listening socket in /proc/net/tcp


def listener_pids(port: int, proc: Path = PROC) -> set[int] | None:
    """The processes (this user can see) holding a listening socket on `port`; an empty set
    when none, None when this system has no /proc to tell."""
    inodes: set[str] = set()
    try:
        for table in ("tcp", "tcp6"):
            path = proc / "net" / table
            if not path.exists():
                continue
            for line in path.read_text().splitlines()[1:]:
                cols = line.split()
                if len(cols) > 9 and cols[3] == _LISTEN and cols[1].endswith(f":{port:04X}"):
                    inodes.add(cols[9])
    except OSError:
        return None
    if not (proc / "net" / "tcp").exists():
        return None
    pids: set[int] = set()
    wanted = {f"socket:[{i}]" for i in inodes}
    if not wanted:
        return pids
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            for fd in (entry / "fd").iterdir():
                if os.readlink(fd) in wanted:
                    pids.add(int(entry.name))
                    break
        except OSError:
            continue  # gone, or another user's
    return pids


def cmdline(pid: int, proc: Path = PROC) -> list[str]:
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]
