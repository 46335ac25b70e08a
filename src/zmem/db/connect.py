"""Opening a store file: pragmas for concurrent use (WAL, busy timeout) and the write
transaction every mutation runs in."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw

# Several agent sessions write one store; a writer waits this long for another's commit
# instead of failing with "database is locked".
BUSY_TIMEOUT_MS = 15000


def connect(path: Path | str) -> apsw.Connection:
    target = Path(path)
    if str(target) != ":memory:":
        target.parent.mkdir(parents=True, exist_ok=True)
    conn = apsw.Connection(str(target))
    conn.set_busy_timeout(BUSY_TIMEOUT_MS)
    # WAL lets readers proceed during a write; NORMAL sync is durable across process crashes
    # (only power loss can drop the last commits) and keeps a commit off the fsync path.
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA temp_store = MEMORY")
    # A 32 MB page cache keeps the FTS and index interior pages of a 100k-row store resident, and
    # checkpointing every 4000 pages (16 MB of WAL) instead of 1000 writes a hot page back once
    # instead of four times: together 579 -> 638 adds/s at 30k rows (bench/write_path.py).
    conn.execute("PRAGMA cache_size = -32768")
    conn.execute("PRAGMA wal_autocheckpoint = 4000")
    return conn


@contextmanager
def transaction(conn: apsw.Connection) -> Iterator[apsw.Connection]:
    """A write transaction. IMMEDIATE takes the write lock up front: a deferred transaction that
    upgrades after another writer committed fails with SQLITE_BUSY_SNAPSHOT, which no busy
    timeout retries."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")


@contextmanager
def read_snapshot(conn: apsw.Connection) -> Iterator[apsw.Connection]:
    """A consistent read across several statements."""
    if not conn.in_transaction:
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")
    else:
        yield conn
