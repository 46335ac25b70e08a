"""Who listens on a loopback TCP port, read from /proc (Linux; None where there is none to
read): how setup, the session start and doctor tell ZMem's own keeper from another program
holding the port of Claude Code's http prompt hook, which would otherwise receive prompts and
their secret. The owner is the socket's uid in the kernel's table, which no process chooses;
a program's argv proves nothing (another user can imitate it). Standard library only."""

from __future__ import annotations

import errno
import hmac
import json
import os
import socket
import time
from pathlib import Path

PROC = Path("/proc")
_LISTEN = "0A"  # the TCP state of a listening socket in /proc/net/tcp


# The modules a data dir's own listener runs (its argv also names the data dir).
OURS = ("zmem.resident.keeper", "zmem.resident.daemon")
OWN, NOBODY, ANOTHER = "own", "nobody", "another"


def owners(port: int, proc: Path = PROC) -> dict[str, int] | None:
    """socket inode -> uid of every listening socket on `port`, from the kernel's tables;
    None when this system has no /proc to tell."""
    found: dict[str, int] = {}
    try:
        for table in ("tcp", "tcp6"):
            path = proc / "net" / table
            if not path.exists():
                continue
            for line in path.read_text().splitlines()[1:]:
                cols = line.split()
                if len(cols) > 9 and cols[3] == _LISTEN and cols[1].endswith(f":{port:04X}"):
                    found[cols[9]] = int(cols[7])
    except (OSError, ValueError):
        return None
    if not (proc / "net" / "tcp").exists():
        return None
    return found


def listeners(port: int, proc: Path = PROC) -> tuple[set[int], bool] | None:
    """(the processes this user can see holding a listening socket on `port`, whether some
    listening socket on it belongs to another user or has no owner this user can see), or
    None when this system has no /proc to tell."""
    owned = owners(port, proc)
    if owned is None:
        return None
    if any(uid != os.getuid() for uid in owned.values()):
        return set(), True
    inodes = set(owned)
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
    socket of another uid is another user's, whatever its argv says: ours always runs as this
    user. None when this system has no /proc to tell."""
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


def foreign_owner(port: int, proc: Path = PROC) -> int | None:
    """The uid of another user's listening socket on `port`, or None (nobody else's, or no
    /proc to tell)."""
    owned = owners(port, proc)
    if not owned:
        return None
    return next((uid for uid in owned.values() if uid != os.getuid()), None)


def user_name(uid: int) -> str:
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return f"uid {uid}"


# Who holds the port, asked of the holder itself (issue 48), where the kernel's table cannot
# say (no /proc) or to tell ZMem's keeper from another program of this user: it must prove it
# knows the hook's secret without the secret crossing the wire. The question is
# `GET /zmem-hook/identity?nonce=<hex>`; the answer {"proof": HMAC-SHA256(secret,
# "zmem-identity:" + nonce)}.
IDENTITY_PATH = "/zmem-hook/identity"
LOOPBACK = "127.0.0.1"


def identity_proof(secret: str, nonce: str) -> str:
    import hashlib

    return hmac.new(secret.encode(), b"zmem-identity:" + nonce.encode(), hashlib.sha256).hexdigest()


def challenge(port: int, secret: str, timeout: float = 3.0) -> bool | None:
    """Whether the process on `port` proves it holds `secret` (the keeper's resident process);
    None when nothing answers there at all. The secret never leaves this process."""
    import secrets

    nonce = secrets.token_hex(16)
    request = (
        f"GET {IDENTITY_PATH}?nonce={nonce} HTTP/1.1\r\nHost: {LOOPBACK}:{port}\r\n"
        "Content-Length: 0\r\nConnection: close\r\n\r\n"
    ).encode("ascii")
    try:
        conn = socket.create_connection((LOOPBACK, port), timeout=timeout)
    except OSError:
        return None
    data = b""
    try:
        conn.sendall(request)
        deadline = time.monotonic() + timeout
        while len(data) < 4096 and time.monotonic() < deadline:
            conn.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError:
        return False
    finally:
        conn.close()
    _, _, body = data.partition(b"\r\n\r\n")
    try:
        given = json.loads(body.decode("utf-8")).get("proof", "")
    except (ValueError, AttributeError):
        return False
    return isinstance(given, str) and hmac.compare_digest(given, identity_proof(secret, nonce))


_IN_USE = {errno.EADDRINUSE, getattr(errno, "WSAEADDRINUSE", errno.EADDRINUSE)}


def in_use(port: int) -> bool:
    """Something listens on the loopback `port`: binding it fails. A test connection would be
    accepted by whatever listens (the keeper's resident process would wake and refuse a
    request); a bind touches no one. SO_REUSEADDR lets the bind pass over connections in
    TIME_WAIT, never over a listener; on Windows it would let the bind share a listener's
    port, so there the exclusive option is asked instead."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        exclusive = getattr(socket, "SO_EXCLUSIVEADDRUSE", None)  # Windows only
        if exclusive is not None:
            s.setsockopt(socket.SOL_SOCKET, exclusive, 1)
        else:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((LOOPBACK, port))
        return False
    except OSError as exc:
        # Windows reports a held port by its Winsock code (WSAEADDRINUSE), not the C errno.
        return exc.errno in _IN_USE
    finally:
        s.close()


def released(port: int, within: float) -> bool:
    """The port's listener lets it go within `within` seconds. A keeper that finds its install
    deleted when a connection wakes it closes that connection unanswered and leaves: a failed
    challenge followed by a free port is that keeper leaving, not a program that cannot prove
    itself (which keeps listening)."""
    deadline = time.monotonic() + within
    while in_use(port):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True
