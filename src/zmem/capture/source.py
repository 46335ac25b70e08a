"""Source references (`file:<path>`, `session:<id>`, `db:<table>:<rowid>`, and the evaluation
corpora's own `eval:` and `locomo:` keys): validation, path normalisation for Windows/Cygwin
spellings, and the content hash that later tells recall a file: source changed. A file: ref
names an absolute path (a relative one would resolve against whatever directory a later reader
runs in); anything else, web URLs included, is refused."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from zmem.capture.controls import has_controls
from zmem.errors import UsageError

_SCHEME = re.compile(r"^([a-z][a-z0-9+.-]*):(.+)$", re.DOTALL)
_CYGDRIVE = re.compile(r"^/cygdrive/([a-zA-Z])(/.*)?$")
_MSYS = re.compile(r"^/([a-zA-Z])(/.*)?$")
_WINDOWS = re.compile(r"^([a-zA-Z]):[\\/]")
MAX_SOURCE_REF_CHARS = 4096
# The schemes a ref may use: the spec's three, and the keys ZMem's own evaluation corpora carry.
# organize: marks organize's summary rows (reserved: a row carrying it is never an episode member).
SCHEMES = ("file", "session", "db", "eval", "locomo", "organize")
_USAGE = "must look like file:<absolute path>, session:<id> or db:<table>:<rowid>"


def normalize_path(path: str) -> str:
    """Windows (C:\\Users\\me) and Cygwin/MSYS (/cygdrive/c/..., /c/...) spellings of one file
    become one canonical form, C:/Users/me, so the same source always compares equal."""
    match = _CYGDRIVE.match(path) or _MSYS.match(path)
    if match:
        return f"{match.group(1).upper()}:{match.group(2) or '/'}"
    if _WINDOWS.match(path):
        return path[0].upper() + path[1:].replace("\\", "/")
    return path


def normalize_source_ref(ref: str) -> str:
    ref = ref.strip()
    if len(ref) > MAX_SOURCE_REF_CHARS:
        raise UsageError(f"source_ref is longer than {MAX_SOURCE_REF_CHARS} characters")
    match = _SCHEME.match(ref)
    if (
        not match
        or not match.group(2).strip()
        or match.group(1) not in SCHEMES
        or match.group(2).startswith("//")
        or has_controls(ref)
    ):
        raise UsageError(f"source_ref {ref!r} {_USAGE}")
    scheme, rest = match.group(1), match.group(2).strip()
    if scheme == "file":
        path = normalize_path(rest)
        if not (path.startswith(("/", "~")) or _WINDOWS.match(path)):
            raise UsageError(f"source_ref {ref!r}: a file: ref names an absolute path")
        return "file:" + path
    if scheme == "db" and not re.fullmatch(r"[^:\s]+:[^:\s]+", rest):
        raise UsageError(f"source_ref {ref!r}: a db: ref is db:<table>:<rowid>")
    return f"{scheme}:{rest}"


def file_path(ref: str | None) -> str | None:
    if ref and ref.startswith("file:"):
        return ref[len("file:") :]
    return None


def _local_path(path: str) -> Path:
    # A canonical C:/x path only opens on Windows; on Cygwin/MSYS/WSL-style hosts the drive
    # maps back to /cygdrive/c, which the OS resolves.
    drive = re.match(r"^([A-Z]):(/.*)$", path)
    if drive and os.name != "nt" and Path("/cygdrive").is_dir():
        return Path(f"/cygdrive/{drive.group(1).lower()}{drive.group(2)}")
    return Path(path).expanduser()


def hash_file(path: str) -> str | None:
    """sha256 of the file's bytes, or None when it cannot be read. Only a regular file is
    read: opening a FIFO named by a source ref would block the recall (or the inspector's
    overview) until something wrote to it, and a device never ends."""
    import hashlib  # file: sources only: ~3.6 ms (OpenSSL) most reads need not pay

    digest = hashlib.sha256()
    try:
        local = _local_path(path)
        if not stat.S_ISREG(local.stat().st_mode):
            return None
        with local.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 16), b""):
                digest.update(chunk)
    except (OSError, RuntimeError, ValueError):
        # RuntimeError: "~nosuchuser/x" cannot be expanded; ValueError: an embedded NUL. An
        # unreadable source is reported, never a crash of the write or of a later recall.
        return None
    return digest.hexdigest()


def source_state(ref: str | None, stored_hash: str | None) -> str | None:
    """For file: refs: 'fresh', 'stale' (changed since capture: recall halves confidence),
    'unreadable' (warned about, not halved) or 'unverified' (no hash was taken at capture).
    None for every other kind of ref."""
    path = file_path(ref)
    if path is None:
        return None
    current = hash_file(path)
    if current is None:
        return "unreadable"
    if stored_hash is None:
        return "unverified"
    return "fresh" if current == stored_hash else "stale"
