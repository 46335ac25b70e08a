"""The judge's questions as MemoryStore methods: answering one (`resolve`: same, replaces,
contradicts or distinct, each mapped onto what the store already does), the queue of pending
ones (`reviews`), and the few a session start offers once each (`offer_reviews`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import apsw

from zmem import config
from zmem.capture import judge, writer
from zmem.db import graph, memories, origin
from zmem.db import reviews as db
from zmem.db.connect import read_snapshot, transaction, wait_when_busy
from zmem.errors import Refusal, UsageError
from zmem.models import Memory
from zmem.retrieval.scoring import passive_block

# A session start waits this long for the write lock to mark what it offers (as a passive
# surface does), and looks at this many pending questions to find the few it may show.
PASSIVE_BUSY_TIMEOUT_MS = 50
OFFER_SCAN = 50

# What each answer does to the two rows (the `result` of a resolve).
RESULTS = {
    "same": "folded",  # the new row retired into the old one, which is corroborated
    "replaces": "replaced",  # the old row retired as updated by the new one
    "contradicts": "contradicts",  # both stay live, linked, each loses trust
    "distinct": "kept apart",  # nothing changes; the pair is never asked again
}


def review_doc(r: db.Review, new: Memory | None, old: Memory | None) -> dict[str, Any]:
    """One pending review as `zmem review --json`, MCP and the inspector show it."""
    return {
        "new": r.new_id,
        "old": r.old_id,
        "namespace": r.namespace,
        "new_text": new.content if new else None,
        "old_text": old.content if old else None,
        "likely": r.likely,
        "evidence": r.evidence,
        "origin": r.origin,
        "asked_at": r.created_at,
        "answer": f"zmem resolve {r.new_id} {r.old_id} --as {'|'.join(judge.ANSWERS)}",
    }


class Reviews:
    """Mixed into MemoryStore, which provides the connection and id lookup."""

    _conn: apsw.Connection
    resolve_id: Callable[[str], str]

    def resolve(self, new_id: str, old_id: str, answer: str, by: str = "cli") -> dict[str, Any]:
        """Answer what the judge asked about two rows (or any two rows of one namespace).
        Refused, with nothing written, for an unknown answer, a row that is not live, rows of
        two namespaces, or a pair already answered otherwise."""
        if answer not in judge.ANSWERS:
            raise UsageError(f"--as must be one of {', '.join(judge.ANSWERS)}, not {answer!r}")
        new_id, old_id = self.resolve_id(new_id), self.resolve_id(old_id)
        if new_id == old_id:
            raise UsageError("NEW and OLD are the same memory")
        with transaction(self._conn):
            at = config.now_iso()
            new, old = memories.get(self._conn, new_id), memories.get(self._conn, old_id)
            assert new is not None and old is not None  # resolve_id found both
            if new.namespace != old.namespace:
                raise Refusal(
                    f"cannot resolve {new_id} and {old_id}: they are in two namespaces "
                    f"({new.namespace}, {old.namespace})"
                )
            before = db.get(self._conn, new_id, old_id) or db.get(self._conn, old_id, new_id)
            if before is not None and before.answer is not None:
                # same and replaces have a direction; contradicts and distinct do not.
                if before.answer == answer and (
                    before.new_id == new_id or answer in ("contradicts", "distinct")
                ):
                    return self._resolved(new, old, answer, "unchanged", before.answered_at)
                raise Refusal(
                    f"{new_id} and {old_id} were already resolved as {before.answer} at "
                    f"{before.answered_at}"
                )
            for m in (new, old):
                if not m.live:
                    raise Refusal(f"cannot resolve: {m.id} was superseded at {m.superseded_at}")
            self._apply(new, old, answer, at)
            if before is not None and before.new_id != new_id:
                # Asked the other way round: the answer is recorded in the caller's order, the
                # one it was applied in, so a later resolve reads it as it was meant.
                db.forget(self._conn, before.new_id, before.old_id)
            db.answer(self._conn, new_id, old_id, new.namespace, answer, by, at)
        return self._resolved(new, old, answer, RESULTS[answer], at)

    def _apply(self, new: Memory, old: Memory, answer: str, at: str) -> None:
        conn = self._conn
        if answer == "same":
            # The spec's dedup refresh, after the fact: the older row is corroborated and
            # takes the newer one's tags; the newer one retires as its duplicate.
            twin = memories.candidates(conn, [old.id])[0]
            writer.corroborate(conn, twin, new.tags, new.taint, new.confidence, new.signal, at)
            memories.tombstone(conn, new.id, at, f"duplicate of {old.id}")
        elif answer == "replaces":
            memories.tombstone(conn, old.id, at, "updated")
            graph.insert_link(conn, new.id, old.id, "updates", None, at)
        elif answer == "contradicts":
            writer.contradict(conn, new.id, old.id, at)

    def _resolved(
        self, new: Memory, old: Memory, answer: str, result: str, at: str | None
    ) -> dict[str, Any]:
        live = [m.id for m in memories.get_many(self._conn, [new.id, old.id]) if m.live]
        return {"new": new.id, "old": old.id, "answer": answer, "result": result, "at": at,
                "live": live}  # fmt: skip

    def reviews(
        self, namespaces: Sequence[str] | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        """Pending questions (both rows still live), oldest first."""
        with read_snapshot(self._conn):
            return self._docs(db.pending(self._conn, namespaces, limit))

    def offer_reviews(self, namespaces: Sequence[str], limit: int) -> list[dict[str, Any]]:
        """At most `limit` pending questions of these namespaces that were never offered, now
        marked offered: a session start shows each one once. A session start never waits out
        a long writer for this (nothing offered then, the questions wait for the next one);
        the rows the passive surfaces withhold (an injection risk, the web, a distrusted team
        member) are never offered, and are marked so they never hold the line."""
        if limit <= 0:
            return []
        # Most session starts find nothing to offer: they read, and take no write lock.
        with read_snapshot(self._conn):
            if not db.pending(self._conn, namespaces, 1, unoffered=True):
                return []
        wait_when_busy(self._conn, PASSIVE_BUSY_TIMEOUT_MS)
        try:
            with transaction(self._conn):
                return self._offer(namespaces, limit)
        except apsw.BusyError:
            return []
        finally:
            wait_when_busy(self._conn)

    def _offer(self, namespaces: Sequence[str], limit: int) -> list[dict[str, Any]]:
        conn = self._conn
        found = db.pending(conn, namespaces, OFFER_SCAN, unoffered=True)
        rows = {m.id: m for m in memories.get_many(conn, [
            i for r in found for i in (r.new_id, r.old_id)])}  # fmt: skip
        distrusted = origin.distrusted(conn)

        def withheld(memory_id: str) -> bool:
            m = rows.get(memory_id)
            return (
                m is None
                or passive_block(m) is not None
                or bool(distrusted and origin.written_by(conn, m.id, distrusted))
            )

        shown, seen = [], []
        for r in found:
            if len(shown) == limit:
                break
            seen.append((r.new_id, r.old_id))
            if not (withheld(r.new_id) or withheld(r.old_id)):
                shown.append(r)
        db.mark_offered(conn, seen, config.now_iso())
        return [review_doc(r, rows.get(r.new_id), rows.get(r.old_id)) for r in shown]

    def _docs(self, found: Sequence[db.Review]) -> list[dict[str, Any]]:
        rows = {m.id: m for m in memories.get_many(self._conn, [
            i for r in found for i in (r.new_id, r.old_id)])}  # fmt: skip
        return [review_doc(r, rows.get(r.new_id), rows.get(r.old_id)) for r in found]
