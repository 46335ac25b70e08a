"""backup and restore: verified snapshots of the store with retention, and the way back.

A backup is copied with the Online Backup API into a hidden partial file, verified
(integrity_check, and total/live counts equal to the source's in the same snapshot), and only
then renamed to store-<UTC>.sqlite: a killed or failed backup never leaves a file that looks
like one. Retention and the last-backup marker move only after a verified backup. Restore takes
both maintenance locks, verifies the snapshot, keeps a prerestore-<UTC>.sqlite copy of the
current store, and swaps the file in with one rename; a crash at any point leaves the old store
or the new one, whole."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import apsw

from zmem import config, outputs
from zmem.db import backup as db
from zmem.db import connect
from zmem.db.migrate import SCHEMA_VERSION
from zmem.errors import NotFound, Refusal, SchemaError, StoreBusy, UsageError

SNAPSHOT_GLOB = "store-*.sqlite"
PARTIAL_PREFIX = outputs.PARTIAL_PREFIX
MARKER = "backup.last"  # in the data dir: when and where the last verified backup went
LOCKS = ("backup", "consolidate")  # restore takes both
# Network and cloud-synced filesystems: SQLite's locking is unreliable there (restore refuses).
REMOTE_FS = ("nfs", "nfs4", "cifs", "smbfs", "smb3", "9p", "afs", "fuse.sshfs", "davfs", "ncpfs")


def _stamp() -> str:
    return config.now().strftime("%Y%m%dT%H%M%S%fZ")


@contextlib.contextmanager
def maintenance_lock(data_dir: Path, name: str) -> Iterator[None]:
    """A non-blocking advisory lock on <data>/locks/<name>.lock, released by the kernel when
    the process dies (a kill -9 leaves nothing to clean up). Held elsewhere: StoreBusy."""
    import fcntl

    folder = data_dir / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreBusy(f"another {name} job holds its lock ({folder / name}.lock)") from None
        yield
    finally:
        os.close(fd)  # closing releases the lock


def backup_dir(settings: config.Settings, out_dir: str | None) -> Path:
    if out_dir:
        return Path(out_dir).expanduser()
    if settings.backup_dir is not None:
        return settings.backup_dir
    return settings.store_path.parent / "backups"


def last_backup(data_dir: Path) -> dict[str, Any] | None:
    """What the last backup recorded (its time and file), or None before the first."""
    try:
        doc = json.loads((data_dir / MARKER).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("at"), str) else None


def _write_marker(data_dir: Path, doc: dict[str, Any]) -> None:
    tmp = data_dir / f".{MARKER}.tmp"
    tmp.write_text(json.dumps(doc), encoding="utf-8")
    os.replace(tmp, data_dir / MARKER)


@dataclass
class BackupResult:
    skipped: str | None = None
    path: str | None = None
    total: int = 0
    live: int = 0
    bytes: int = 0
    pruned: tuple[str, ...] = ()
    last_backup: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "skipped": self.skipped,
            "path": self.path,
            "total": self.total,
            "live": self.live,
            "bytes": self.bytes,
            "pruned": list(self.pruned),
            "last_backup": self.last_backup,
        }


def backup(
    settings: config.Settings,
    *,
    out_dir: str | None = None,
    retention: int = 7,
    if_due: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> BackupResult:
    if retention < 0:
        raise UsageError("--retention must be 0 (keep every snapshot) or more")
    store = settings.store_path
    if not store.is_file():
        raise NotFound(f"no store at {store}: nothing to back up")
    data_dir = settings.data_dir
    marker = last_backup(data_dir)
    if if_due and marker is not None:
        try:
            last = config.parse_instant(marker["at"])
        except UsageError:
            last = None
        interval = timedelta(days=settings.backup_interval_days)
        if last is not None and config.now() - last < interval:
            return BackupResult(skipped="not due", last_backup=marker["at"])
    target_dir = backup_dir(settings, out_dir)
    with maintenance_lock(data_dir, "backup"):
        outputs.ensure_folder(target_dir, "write the backup")
        for stale in target_dir.glob(PARTIAL_PREFIX + "*"):
            outputs.discard(stale)  # a killed run's copy: never a backup
        at = config.now_iso()
        final = target_dir / f"store-{_stamp()}.sqlite"
        n = 1
        while final.exists():  # a pinned clock (ZMEM_TEST_NOW) must not overwrite a snapshot
            final = target_dir / f"store-{_stamp()}-{n}.sqlite"
            n += 1
        with outputs.whole(final, "write the backup") as partial:
            source = connect.connect(store)
            try:
                expected = db.snapshot(source, partial, progress)
            except (apsw.FullError, apsw.ReadOnlyError, apsw.CantOpenError, apsw.IOError):
                raise  # the destination's fault: `outputs` says where and why
            except apsw.Error as exc:
                raise Refusal(
                    f"the backup could not read {store} ({exc}); run `zmem doctor`"
                ) from None
            finally:
                source.close()
            status, found = db.verify(partial)
            if status != "ok" or found != expected:
                raise Refusal(
                    f"the snapshot failed verification (integrity {status!r}, rows {found} "
                    f"against {expected} in the store): deleted, nothing rotated"
                )
        _write_marker(data_dir, {"at": at, "path": str(final)})
        pruned: list[str] = []
        if retention:
            snapshots = sorted(target_dir.glob(SNAPSHOT_GLOB))
            for old in snapshots[: max(0, len(snapshots) - retention)]:
                outputs.discard(old)
                pruned.append(str(old))
    return BackupResult(
        path=str(final),
        total=expected[0],
        live=expected[1],
        bytes=final.stat().st_size,
        pruned=tuple(pruned),
        last_backup=at,
    )


# ---- restore ---------------------------------------------------------------------------------


def _filesystem(path: Path) -> str | None:
    """The filesystem type holding `path` (Linux: /proc/mounts; None elsewhere)."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return None
    resolved = str(path.resolve())
    best, kind = "", None
    for line in mounts:
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        inside = resolved == point or resolved.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, parts[2]
    return kind


def check_local(store: Path) -> None:
    text = str(store)
    if text.startswith(("\\\\", "//")):
        raise UsageError(f"refusing to restore onto a network path ({store}): use a local disk")
    folder = store.parent if store.parent.exists() else Path.cwd()
    kind = _filesystem(folder)
    if kind is not None and (kind in REMOTE_FS or kind.startswith("fuse.rclone")):
        raise UsageError(
            f"refusing to restore onto {store}: it is on a {kind} filesystem, where SQLite's "
            "locks are not reliable; use a local disk"
        )


@dataclass
class RestoreResult:
    restored_from: str
    store: str
    prerestore: str | None
    total: int
    live: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _keep_prerestore(store: Path, folder: Path) -> Path | None:
    """A copy of the current store (the rollback path), named outside the retention glob."""
    if not store.exists():
        return None
    outputs.ensure_folder(folder, "keep the prerestore copy")
    dest = folder / f"prerestore-{_stamp()}.sqlite"
    doing = "keep the prerestore copy of the current store"
    try:
        with outputs.whole(dest, doing) as partial:
            source = connect.connect(store)
            try:
                db.snapshot(source, partial)
            finally:
                source.close()
    except Refusal:
        raise
    except apsw.Error:
        # The store may be why we are restoring: keep its files exactly as they are.
        outputs.copy_file(store, dest, doing)
        for suffix in ("-wal", "-shm"):
            side = Path(str(store) + suffix)
            if side.exists():
                outputs.copy_file(side, Path(str(dest) + suffix), doing)
    return dest


def restore(
    settings: config.Settings,
    snapshot: str,
    *,
    force: bool = False,
    out_dir: str | None = None,
) -> RestoreResult:
    source = Path(snapshot).expanduser()
    store = settings.store_path
    if not source.is_file():
        raise UsageError(f"--from {source}: no such snapshot file")
    if source.resolve() == (store.resolve() if store.exists() else store):
        raise UsageError("--from names the store itself")
    check_local(store)
    exists = store.exists()
    if exists and not force:
        raise Refusal(
            f"a store already exists at {store}: add --force to replace it (a prerestore copy "
            "of it is kept)"
        )
    try:
        with contextlib.ExitStack() as locks:
            for name in LOCKS:
                locks.enter_context(maintenance_lock(settings.data_dir, name))
            return _restore_locked(settings, source, store, out_dir)
    except StoreBusy as exc:
        # Spec: a skipped restore must never look like a completed one; exit 2, not "retry".
        raise Refusal(f"restore refused, nothing touched: {exc}") from None


def _restore_locked(
    settings: config.Settings, source: Path, store: Path, out_dir: str | None
) -> RestoreResult:
    status, expected = db.verify(source)
    if status != "ok" or expected is None:
        raise Refusal(
            f"the snapshot {source} is not a sound ZMem store (integrity {status!r}); "
            "nothing touched"
        )
    _check_schema(source, settings.allow_newer_schema)
    # The copy is staged beside the store and opened as this build opens a store (its
    # migrations applied) before anything of the current store is touched.
    staged = outputs.partial_path(store)
    doing = "stage the snapshot beside the store"
    outputs.ensure_folder(store.parent, doing)
    try:
        outputs.copy_file(source, staged, doing, mode=0o600)
        db.upgrade(staged, settings.allow_newer_schema)
        status, found = db.verify(staged)
        if status != "ok" or found != expected:
            raise Refusal(
                f"the snapshot {source} did not survive being opened by this zmem (integrity "
                f"{status!r}, rows {found}); nothing touched"
            )
        # Fold the current WAL in first: once the sidecars go, nothing they held is lost.
        if store.exists():
            db.checkpoint(store)
        kept = _keep_prerestore(store, backup_dir(settings, out_dir))
        # Old sidecars must not meet the new file: a stale WAL replayed onto it would corrupt it.
        for suffix in ("-wal", "-shm"):
            Path(str(store) + suffix).unlink(missing_ok=True)
        os.replace(staged, store)
        outputs.discard(staged, sidecars=True)  # what SQLite left of the staged copy's opening
    except SchemaError as exc:
        outputs.discard(staged, sidecars=True)
        raise Refusal(f"the snapshot {source} cannot be opened by this zmem ({exc}); nothing "
                      "touched") from None  # fmt: skip
    except (OSError, apsw.FullError, apsw.ReadOnlyError, apsw.IOError) as exc:
        outputs.discard(staged, sidecars=True)
        raise outputs.refusal(exc, store, "restore the store") from None
    except apsw.Error as exc:
        outputs.discard(staged, sidecars=True)
        raise Refusal(f"the snapshot {source} cannot be opened by this zmem ({exc}); nothing "
                      "touched") from None  # fmt: skip
    except BaseException:
        outputs.discard(staged, sidecars=True)
        raise
    status, found = db.verify(store)
    if status != "ok" or found != expected:
        raise Refusal(
            f"the restored store failed verification (integrity {status!r}, rows {found}); "
            f"the previous store is kept at {kept}"
        )
    return RestoreResult(str(source), str(store), str(kept) if kept else None, *expected)


def _check_schema(source: Path, allow_newer: bool) -> None:
    """A snapshot this build can open: a meta table with a schema version it knows (or a newer
    one the user allows), so that a restore never swaps in a file every command then refuses."""
    version = db.schema_of(source)
    if version <= 0:
        raise Refusal(
            f"the snapshot {source} records no schema version (its meta table is missing or "
            "empty): it is not a ZMem store this zmem can open; nothing touched"
        )
    if version > SCHEMA_VERSION and not allow_newer:
        raise Refusal(
            f"the snapshot {source} is schema v{version}, newer than this zmem (v{SCHEMA_VERSION})"
            "; update zmem first (or ZMEM_ALLOW_NEWER_SCHEMA=1); nothing touched"
        )
