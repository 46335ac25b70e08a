"""The files ZMem writes besides the store itself (snapshots, prerestore copies, exports, packs,
review candidates): each is written whole or not at all, through a hidden partial file beside
its target that is removed on any failure, and the operating system's refusals (a read-only
filesystem, a full disk, no permission) become the one-line refusals the CLI prints (exit 2),
never a traceback."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import apsw

from zmem.errors import Refusal, UsageError

PARTIAL_PREFIX = ".partial-"

_WHY = {
    errno.EROFS: "{folder} is on a read-only filesystem",
    errno.ENOSPC: "no space is left on the device of {folder}",
    errno.EDQUOT: "the disk quota for {folder} is used up",
    errno.EACCES: "permission denied in {folder}",
    errno.EPERM: "permission denied in {folder}",
    errno.ENOENT: "{folder} does not exist",
    errno.ENOTDIR: "a part of {folder} is a file, not a folder",
    errno.EISDIR: "the target in {folder} is a folder",
    errno.ENAMETOOLONG: "the name is too long for {folder}",
    errno.EMFILE: "this process has no file handles left ({folder})",
    errno.ENFILE: "the system has no file handles left ({folder})",
}
# The operating system's refusals that are the machine's state, not a bug: any command that
# meets one outside a write this module guards still ends with exit 2 (zmem.cli.app).
MACHINE_ERRNOS = frozenset(_WHY)


def _free(folder: Path) -> str:
    try:
        free = shutil.disk_usage(_existing(folder)).free
    except OSError:
        return ""
    return f" ({free / 1e6:.1f} MB free)"


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def refusal(exc: BaseException, target: Path, doing: str) -> Refusal:
    """`exc` (an OSError, or SQLite's own error while it wrote a copy) as one line: what could
    not be done, where, why, and that nothing was left behind."""
    folder = target.parent
    if isinstance(exc, apsw.FullError):
        code: int | None = errno.ENOSPC
    elif isinstance(exc, apsw.ReadOnlyError):
        code = errno.EROFS
    elif isinstance(exc, apsw.CantOpenError | apsw.PermissionsError):
        code = errno.EROFS if _read_only(folder) else errno.EACCES
    else:
        code = getattr(exc, "errno", None)
    template = _WHY.get(code or -1)
    if template is None:
        detail = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        why = f"{detail} ({folder})"
    else:
        why = template.format(folder=folder)
    if code in (errno.ENOSPC, errno.EDQUOT):
        why += _free(folder)
    return Refusal(f"cannot {doing}: {why}; nothing was written")


def _read_only(folder: Path) -> bool:
    try:
        return bool(os.statvfs(_existing(folder)).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def partial_path(target: Path) -> Path:
    return target.with_name(f"{PARTIAL_PREFIX}{target.name}")


def discard(path: Path, *, sidecars: bool = False) -> None:
    """Remove a partial file, whatever state its filesystem is in (a read-only one answers
    EROFS, not ENOENT, for a file that is not there); with `sidecars`, a SQLite file's
    journal, WAL and shared-memory files too."""
    names = [path]
    if sidecars:
        names += [Path(f"{path}{suffix}") for suffix in ("-journal", "-wal", "-shm")]
    for name in names:
        with contextlib.suppress(OSError):
            name.unlink()


def ensure_folder(folder: Path, doing: str) -> Path:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UsageError(f"cannot {doing}: {folder} is a file, not a folder") from None
    except OSError as exc:
        raise refusal(exc, folder / "x", doing) from None
    return folder


@contextlib.contextmanager
def whole(target: Path, doing: str, *, mode: int | None = None) -> Iterator[Path]:
    """The partial file to write; renamed over `target` when the block ends without an error,
    removed when it fails. OS and SQLite write errors leave as one-line refusals."""
    if target.is_dir():
        raise UsageError(f"cannot {doing}: {target} is a folder")
    ensure_folder(target.parent, doing)
    partial = partial_path(target)
    try:
        yield partial
        if mode is not None:
            os.chmod(partial, mode)
        os.replace(partial, target)
    except (OSError, apsw.FullError, apsw.ReadOnlyError, apsw.IOError, apsw.CantOpenError) as exc:
        discard(partial, sidecars=True)
        raise refusal(exc, target, doing) from None
    except BaseException:
        discard(partial, sidecars=True)
        raise


def write_text(target: Path, fill: Callable[[Callable[[str], object]], None], doing: str) -> Path:
    """`fill(write)` into `target`, whole or not at all (UTF-8)."""
    with whole(target, doing) as partial, partial.open("w", encoding="utf-8") as handle:
        fill(handle.write)
        handle.flush()
        os.fsync(handle.fileno())
    return target


def copy_file(source: Path, target: Path, doing: str, *, mode: int | None = None) -> Path:
    """A byte copy of `source` at `target`, fsynced, whole or not at all."""
    with whole(target, doing, mode=mode) as partial:
        shutil.copyfile(source, partial)
        with open(partial, "rb+") as fh:
            os.fsync(fh.fileno())
    return target
