"""The SQL side of snapshots: copying a live store with SQLite's Online Backup API from one
consistent read snapshot (writers keep committing meanwhile, in WAL), and verifying a copy
(integrity_check and the total/live row counts, the schema a copy records, opening a copy as
this build opens a store). Files, locks and retention are the maintenance layer's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import apsw

from zmem.db.connect import connect
from zmem.db.migrate import migrate, schema_version

# Pages copied per backup step: each step is short, and progress is reported between them.
STEP_PAGES = 1024


def counts(conn: apsw.Connection) -> tuple[int, int]:
    """(total, live) rows of `memory`."""
    row = conn.execute(
        "SELECT count(*), coalesce(sum(superseded_at IS NULL), 0) FROM memory"
    ).fetchone()
    return int(row[0]), int(row[1])


def snapshot(
    source: apsw.Connection,
    dest_path: Path,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[int, int]:
    """Copy `source`'s main database to `dest_path`; returns the source's (total, live) counts
    read in the same snapshot the copy was taken from. The read transaction pins that
    snapshot, so a concurrent writer neither restarts the copy nor waits for it (WAL)."""
    dest = apsw.Connection(str(dest_path))
    try:
        with source:  # BEGIN ... COMMIT: one read snapshot for the counts and every step
            expected = counts(source)
            with dest.backup("main", source, "main") as job:
                while not job.done:
                    job.step(STEP_PAGES)
                    if progress is not None:
                        progress(job.pagecount - job.remaining, job.pagecount)
        # The copy is a plain rollback-journal file: one file, whatever mode the source used.
        dest.execute("PRAGMA journal_mode = DELETE")
    finally:
        dest.close()
    return expected


def verify(path: Path) -> tuple[str, tuple[int, int] | None]:
    """(integrity_check's first line, (total, live)) of a store file opened read-only; counts
    are None when the file is not a ZMem store or cannot be read."""
    try:
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error as exc:
        return f"cannot open: {exc}", None
    try:
        try:
            result = conn.execute("PRAGMA integrity_check").fetchone()
            status = str(result[0]) if result else "no answer"
        except apsw.Error as exc:
            return f"integrity_check failed: {exc}", None
        try:
            return status, counts(conn)
        except apsw.Error:
            return status, None
    finally:
        conn.close()


def checkpoint(path: Path) -> bool:
    """Fold the store's WAL into the main file and truncate it, so the -wal sidecar holds
    nothing a restore could lose. False when it cannot (damaged, busy)."""
    try:
        conn = apsw.Connection(str(path))
    except apsw.Error:
        return False
    try:
        conn.set_busy_timeout(2000)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        return True
    except apsw.Error:
        return False
    finally:
        conn.close()


def schema_of(path: Path) -> int:
    """The schema version a store file records (0 when it has no meta table or no version);
    -1 when it cannot be read."""
    try:
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error:
        return -1
    try:
        return schema_version(conn)
    except (apsw.Error, ValueError):
        return -1
    finally:
        conn.close()


def upgrade(path: Path, allow_newer: bool) -> int:
    """Open a copy of a store as this build opens a store: its migrations applied. Returns the
    version it is at; SchemaError or apsw.Error when this build cannot use it."""
    conn = connect(path)
    try:
        return migrate(conn, allow_newer)
    finally:
        conn.close()
