"""Files from outside this process, read as hostile input (issue 48): a checkout's `.git` files
and AGENTS.md, a host's transcript, the host and hub configs. Each is opened without blocking,
read only when it is a regular file (a FIFO, a device such as /dev/zero behind a symlink, a
socket or a directory is refused before a byte is read), and at most `cap` bytes of it, the
head or the tail, within a deadline: no such file can hang or bloat a process that answers
prompts. A refusal is an OSError (NotReadable), so every caller that already skipped a missing
file skips these too; the front ends register `on_refused` to log one line for each."""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path

DEADLINE_S = 1.0
_CHUNK = 1 << 16
# Called with (path, why) for every file refused as not readable this way (a FIFO, a device,
# over a deadline); the resident process and the hooks log it. Kept short: one per front end.
on_refused: list[Callable[[str, str], None]] = []


class NotReadable(OSError):
    """A path that is there but not a regular file this process may read (or not in time)."""


def _refuse(path: str, why: str) -> NotReadable:
    for callback in on_refused:
        try:
            callback(path, why)
        except Exception:  # a logger that fails must not turn a skip into a crash
            pass
    return NotReadable(errno.EINVAL, f"{why}: {path}")


_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


def _open(path: Path | str) -> tuple[int, os.stat_result]:
    """A descriptor of a regular file, opened without blocking (a FIFO's open would wait for a
    writer) and checked by the descriptor itself (no window between a check and the open)."""
    name = os.fspath(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(name, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket, or a FIFO with no reader on some systems
            raise _refuse(name, "not a regular file") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = _KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file")
            raise _refuse(name, f"{kind}, not a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)  # a regular file: reads never wait for a writer
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def _read(fd: int, size: int, name: str, deadline: float) -> bytes:
    parts: list[bytes] = []
    left = size
    while left > 0:
        if time.monotonic() > deadline:
            raise _refuse(name, "too slow to read")
        chunk = os.read(fd, min(_CHUNK, left))
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def read_head(path: Path | str, cap: int, *, deadline_s: float = DEADLINE_S) -> bytes:
    """At most the first `cap` bytes of a regular file (a longer one is cut there: the caller
    asks for one more byte than it keeps when it must know). NotReadable for anything else."""
    fd, _ = _open(path)
    try:
        return _read(fd, cap, os.fspath(path), time.monotonic() + deadline_s)
    finally:
        os.close(fd)


def read_text(path: Path | str, cap: int, *, deadline_s: float = DEADLINE_S) -> str:
    """read_head as text (UTF-8, undecodable bytes replaced)."""
    return read_head(path, cap, deadline_s=deadline_s).decode("utf-8", errors="replace")


def read_tail(path: Path | str, cap: int, *, deadline_s: float = DEADLINE_S) -> tuple[bytes, int]:
    """(at most the last `cap` bytes, the file's size) of a regular file."""
    fd, info = _open(path)
    try:
        size = info.st_size
        os.lseek(fd, max(0, size - cap), os.SEEK_SET)
        return _read(fd, cap, os.fspath(path), time.monotonic() + deadline_s), size
    finally:
        os.close(fd)


def kind(path: Path | str) -> str | None:
    """What a path that is not a regular file is, following symlinks ("a FIFO", "a character
    device", ...); None for a regular file or nothing there. For refusing, not for reading."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")
