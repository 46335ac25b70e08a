"""Who listens on a loopback TCP port, read from /proc (Linux; None where there is none to
read): how setup and doctor tell ZMem's own keeper from another program holding the port of
Claude Code's http prompt hook, which would otherwise receive prompts and their secret.
Standard library only."""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")
_LISTEN = "0A"  # the TCP state of a listening socket in /proc/net/tcp


# The modules a data dir's own listener runs (its argv also names the data dir).
OURS = ("zmem.resident.keeper", "zmem.resident.daemon")
OWN, NOBODY, ANOTHER = "own", "nobody", "another"


def listeners(port: int, proc: Path = PROC) -> tuple[set[int], bool] | None:
    """(the processes this user can see holding a listening socket on `port`, whether some
    listening socket on it has no owner this user can see: another user's), or None when
    this system has no /proc to tell."""
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
    seen: set[str] = set()
    wanted = {f"socket:[{i}]" for i in inodes}
    if not wanted:
        return pids, False
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            for fd in (entry / "fd").iterdir():
                target = os.readlink(fd)
                if target in wanted:
                    pids.add(int(entry.name))
                    seen.add(target)
        except OSError:
            continue  # gone, or another user's
    return pids, seen != wanted


def listener_pids(port: int, proc: Path = PROC) -> set[int] | None:
    """The processes (this user can see) holding a listening socket on `port`; None when this
    system has no /proc to tell."""
    found = listeners(port, proc)
    return None if found is None else found[0]


def holder(port: int, data_dir: Path, proc: Path = PROC) -> str | None:
    """Who listens on `port`: OWN (this data dir's keeper or resident process), NOBODY, or
    ANOTHER program, which would receive Claude Code's prompts and their secret. A listening
    socket whose owner this user cannot see is another user's: ours always runs as this user.
    None when this system has no /proc to tell."""
    found = listeners(port, proc)
    if found is None:
        return None
    pids, unseen = found
    for pid in pids:
        argv = cmdline(pid, proc)
        if any(m in argv for m in OURS) and str(data_dir) in argv:
            return OWN
    return ANOTHER if pids or unseen else NOBODY


def cmdline(pid: int, proc: Path = PROC) -> list[str]:
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]
