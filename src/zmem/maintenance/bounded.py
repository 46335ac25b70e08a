"""Long jobs in bounded transactions: a job is a series of short write transactions, each
committing one batch together with the job's own progress record in `meta`, so a writer beside
it waits for one batch at most, and a killed job resumes where its last batch committed. The
slow work of a batch (a model call, a scan) runs before its transaction, never inside it."""

from __future__ import annotations

import json
import os
import secrets
import socket
import time
from collections.abc import Callable
from typing import Any

import apsw

from zmem.db import graph
from zmem.db.connect import transaction
from zmem.errors import StoreBusy

# After a batch that held the write lock for t seconds, sleep min(t, PAUSE_CAP): SQLite's busy
# handler polls a waiting writer at growing intervals (up to 100 ms), and back-to-back
# transactions with no slow work between them would let it miss every gap.
PAUSE_CAP = 0.05


def commit(
    conn: apsw.Connection, apply: Callable[[apsw.Connection], Any], pause: bool = True
) -> tuple[Any, float]:
    """`apply` in one write transaction; then, if `pause`, sleep as long as the lock was held
    (capped) so writers waiting on it get their turn. Returns (apply's result, seconds held)."""
    started = time.perf_counter()
    with transaction(conn):
        out = apply(conn)
    held = time.perf_counter() - started
    if pause:
        time.sleep(min(held, PAUSE_CAP))
    return out, held


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True


class BoundedJob:
    """One resumable job, its state a JSON object under meta key `key`. `state` is the caller's
    to change inside `step`; it is saved with the batch, atomically."""

    def __init__(self, conn: apsw.Connection, key: str, state: dict[str, Any]):
        self.conn = conn
        self.key = key
        self.state = state
        self.held: list[float] = []  # seconds each transaction held the write lock

    @staticmethod
    def pending(conn: apsw.Connection, key: str) -> dict[str, Any] | None:
        """The saved state of an unfinished job, or None."""
        raw = graph.get_meta(conn, key)
        if raw is None:
            return None
        try:
            state = json.loads(raw)
        except ValueError:
            return None  # unreadable progress: the job starts over, which is always safe
        return state if isinstance(state, dict) else None

    @classmethod
    def claim(
        cls,
        conn: apsw.Connection,
        key: str,
        fresh: Callable[[], dict[str, Any]],
        resumable: Callable[[dict[str, Any]], bool],
        setup: Callable[[apsw.Connection, dict[str, Any] | None], None],
        what: str,
    ) -> tuple[BoundedJob, bool]:
        """Resume the saved job when `resumable(state)` says it is the same job, else start
        `fresh()` (setup gets the abandoned state, or None, to clean up after it). Refused while
        another live process owns the job on this machine. Returns (job, resumed)."""
        owner = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        with transaction(conn):
            saved = cls.pending(conn, key)
            if saved is not None:
                host, _, rest = str(saved.get("owner", "")).partition(":")
                pid = rest.partition(":")[0]
                if host == socket.gethostname() and pid.isdigit() and int(pid) != os.getpid():
                    if _alive(int(pid)):
                        raise StoreBusy(
                            f"another {what} (pid {pid}) is working on this store; wait for it "
                            f"to finish, or stop it (it resumes where it stopped)"
                        )
            resumed = saved is not None and resumable(saved)
            if resumed:
                assert saved is not None
                state = saved
            else:
                setup(conn, saved)
                state = fresh()
            state["owner"] = owner
            graph.set_meta(conn, key, json.dumps(state))
        return cls(conn, key, state), resumed

    def step(self, apply: Callable[[apsw.Connection], Any], pause: bool = True) -> Any:
        """Run `apply` and save the state in one transaction; then, if `pause`, give writers
        waiting on the lock their turn. A job whose state was taken over stops here."""

        def batch(conn: apsw.Connection) -> Any:
            self._check_owner()
            out = apply(conn)
            graph.set_meta(conn, self.key, json.dumps(self.state))
            return out

        out, held = commit(self.conn, batch, pause)
        self.held.append(held)
        return out

    def finish(self, apply: Callable[[apsw.Connection], Any] | None = None) -> Any:
        """The last transaction: `apply`, then forget the job."""

        def last(conn: apsw.Connection) -> Any:
            self._check_owner()
            out = apply(conn) if apply is not None else None
            graph.delete_meta(conn, self.key)
            return out

        out, held = commit(self.conn, last, pause=False)
        self.held.append(held)
        return out

    def _check_owner(self) -> None:
        saved = self.pending(self.conn, self.key)
        if saved is None or saved.get("owner") != self.state.get("owner"):
            raise StoreBusy("another process took this job over; it goes on from where it is")
