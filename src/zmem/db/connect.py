"""Opening a store file: pragmas for concurrent use (WAL, busy timeout) and the write
transaction every mutation runs in."""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw

from zmem.db import vectors

# Several agent sessions write one store; a writer waits this long for another's commit
# instead of failing with "database is locked".
BUSY_TIMEOUT_MS = 15000

# How often a waiting writer tries the lock again. SQLite's own busy handler sleeps 1, 2, 5, 10,
# 15, 20, 25, 25, 25, 50, 50 and then 100 ms between tries, so the writer that has waited longest
# tries least often: beside a long job's batches (and its 50 ms pauses) and beside other
# writers, newcomers took each free moment first and an add waited 1.8 s beside consolidate and
# 2.7 s beside ingest on a loaded machine while the 99th percentile was 0.1 s (bench/beside.py,
# docs/benchmarks.md). Trying every 2 ms, whatever the wait so far, gives every waiter the same
# chance at each free moment; the polls cost ~10 us of CPU each.
BUSY_POLL_S = 0.002


def wait_when_busy(conn: apsw.Connection, timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
    """Make `conn` wait up to `timeout_ms` for a lock another connection holds, trying again
    every BUSY_POLL_S (in place of SQLite's busy timeout and its growing sleeps)."""
    limit = timeout_ms / 1000
    began = [0.0]

    def handler(prior_calls: int) -> bool:
        now = time.monotonic()
        if prior_calls == 0:
            began[0] = now
        elif now - began[0] >= limit:
            return False  # SQLITE_BUSY reaches the caller: StoreBusy, exit 3
        time.sleep(BUSY_POLL_S)
        return True

    conn.set_busy_handler(handler if timeout_ms > 0 else None)


# The file is read through a memory map of up to this size (a larger store reads its remainder
# with read()); the page cache then only needs room for the pages a transaction writes.
MMAP_BYTES = 1 << 30
MAPPED_CACHE_KIB = 4096
UNMAPPED_CACHE_KIB = 32768


# WAL checkpoints. A checkpoint copies the WAL's pages into the database file and fsyncs both;
# at 100k rows an add dirties ~43 pages, and the fsyncs were ~80% of a checkpoint's 38 ms, i.e.
# 0.4 ms of every add's 1.5 ms when the writer ran them itself (SQLite's autocheckpoint every
# 4000 pages). A helper thread with its own connection now runs them (PASSIVE: it never blocks a
# writer or a reader), so the fsyncs wait on the disk while the writer carries on. Every commit
# is exactly as durable as before: it is in the WAL when COMMIT returns, and a checkpoint only
# copies it on.
#
# SQLite fsyncs the database file only in a checkpoint that copies everything up to the newest
# commit, and only such a checkpoint lets the next write start the WAL over. With the writer
# committing while the helper copies, most helper rounds leave a tail. So: once the WAL holds
# CHECKPOINT_PAGES pages, the writer asks for a round after each commit while the helper is idle;
# the tail shrinks round by round, and a small round soon completes (database fsync done by the
# helper). Then, with at most CHECKPOINT_TAIL_PAGES left and little unsynced in the database
# file, the writer completes the checkpoint itself in ~2-8 ms, and its next write restarts the
# WAL (at 100k rows the file peaks at 20-40 MB per cycle instead of 16 MB). Past
# CHECKPOINT_HARD_PAGES (a helper that cannot keep up, or another process holding the checkpoint
# lock) the writer checkpoints itself, as SQLite's autocheckpoint would. The bookkeeping below
# only decides who checkpoints when; any checkpoint is safe.
CHECKPOINT_PAGES = 4000
CHECKPOINT_TAIL_PAGES = 200
CHECKPOINT_HARD_PAGES = 16000
CHECKPOINT_RETRIES = 4


class _Checkpointer:
    """The helper thread and its connection, started on the first checkpoint a store needs."""

    def __init__(self, path: str):
        self._path = path
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._pending = False
        self._stopping = False
        self.running = False
        self.wal_pages = 0  # the WAL's size after the writer's latest commit
        self.backfilled = 0  # frames of the current WAL copied into the database file
        self.unsynced = 0  # of those, frames copied since the database file was last fsynced

    def request(self) -> None:
        with self._wake:
            if self._stopping:
                return
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="zmem-checkpoint", daemon=True
                )
                self._thread.start()
            self._pending = self.running = True
            self._wake.notify()

    def _run(self) -> None:
        conn = apsw.Connection(self._path, flags=apsw.SQLITE_OPEN_READWRITE)
        try:
            conn.execute("PRAGMA synchronous = NORMAL")
            retries = 0
            while True:
                with self._wake:
                    while not self._pending and not retries and not self._stopping:
                        self._wake.wait()
                    if self._stopping:
                        return
                    self._pending = False
                try:
                    _, copied = conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_PASSIVE)
                except apsw.Error:  # busy (another checkpointer) or I/O: the writer's fallback
                    copied = self.backfilled
                with self._wake:
                    if copied >= self.wal_pages:  # reached the newest commit: fsynced the file
                        self.unsynced = retries = 0
                    else:
                        self.unsynced += max(0, copied - self.backfilled)
                        # A short tail: go again at once. The WAL fsync of the next round
                        # covers only what was committed meanwhile, so it is quick and likely
                        # to finish before the writer's next commit.
                        # (Not past twice the size: there the writer finishes a short tail.)
                        short = (
                            self.wal_pages - copied <= CHECKPOINT_TAIL_PAGES
                            and self.wal_pages < 2 * CHECKPOINT_PAGES
                        )
                        retries = (retries or CHECKPOINT_RETRIES + 1) - 1 if short else 0
                    self.backfilled = copied
                    self.running = self._pending or bool(retries)
        finally:
            conn.close()

    def stop(self) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()


class Connection(apsw.Connection):
    """An apsw.Connection whose WAL checkpoints run on a helper thread (see CHECKPOINT_PAGES)."""

    def __init__(self, filename: str):
        super().__init__(filename)
        self._checkpointer = _Checkpointer(filename)
        # Stops the helper when the connection is closed, garbage-collected or at exit.
        self._stop_checkpointer = weakref.finalize(self, self._checkpointer.stop)
        self.set_wal_hook(_wal_hook(self._checkpointer))

    def close(self, force: bool = False) -> None:
        self._stop_checkpointer()  # first, so this connection stays the store's last one
        super().close(force)


def _wal_hook(helper: _Checkpointer):
    # A closure over the helper, not the connection: the hook must not keep it alive.
    def hook(conn: apsw.Connection, dbname: str, pages: int) -> int:
        # Runs after every commit with the WAL's size in frames. It must never raise: the
        # commit has already happened.
        try:
            with helper._wake:
                if pages < helper.backfilled:  # the WAL started over
                    helper.backfilled = helper.unsynced = 0
                helper.wal_pages = pages
                if pages < CHECKPOINT_PAGES:
                    return apsw.SQLITE_OK
                # Finish when the tail is short and little is unsynced; past twice the size,
                # also when much is unsynced (a writer too fast for the helper's rounds to ever
                # reach its newest commit would otherwise grow the WAL to the hard limit).
                finish = pages - helper.backfilled <= CHECKPOINT_TAIL_PAGES and (
                    helper.unsynced <= CHECKPOINT_TAIL_PAGES or pages >= 2 * CHECKPOINT_PAGES
                )
                ask = not finish and pages < CHECKPOINT_HARD_PAGES
                if ask and helper.running:
                    return apsw.SQLITE_OK
            if ask:
                helper.request()
                return apsw.SQLITE_OK
            # Busy while a helper round holds the checkpoint lock: tried again next commit.
            conn.wal_checkpoint(dbname, apsw.SQLITE_CHECKPOINT_PASSIVE)
        except apsw.Error:
            pass
        return apsw.SQLITE_OK

    return hook


def connect(path: Path | str) -> apsw.Connection:
    target = Path(path)
    if str(target) != ":memory:":
        target.parent.mkdir(parents=True, exist_ok=True)
        conn: apsw.Connection = Connection(str(target))
    else:
        conn = apsw.Connection(str(target))
    wait_when_busy(conn)
    # WAL lets readers proceed during a write; NORMAL sync is durable across process crashes
    # (only power loss can drop the last commits) and keeps a commit off the fsync path.
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA temp_store = MEMORY")
    # Reads come straight from a memory map of the file, and the page cache holds little more
    # than the pages a transaction writes. A large page cache cost more than its misses saved:
    # SQLite walks the whole cache at the end of most write transactions (docs/decisions.md,
    # "Write-path throughput, fourth round"). Where the build cannot map the file, a 32 MB cache
    # keeps the FTS and index interior pages of a 100k-row store resident instead.
    mapped = conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}").fetchone()
    cache_kib = MAPPED_CACHE_KIB if mapped and mapped[0] > 0 else UNMAPPED_CACHE_KIB
    conn.execute(f"PRAGMA cache_size = -{cache_kib}")
    # The vector index (memory_vec) needs vec0 in every connection that writes or reads it;
    # without the wheel the store still works, lexically (the spec's fail-open).
    vectors.load(conn)
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
