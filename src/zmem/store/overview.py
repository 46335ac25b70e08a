"""The inspector's reads as MemoryStore methods: what the store holds at a glance (live rows by
namespace, type and taint, daily series for the charts, the rows that need a look), a filtered
page of memories, and a memory's lineage with the version valid at an instant. All read-only,
each from one snapshot; no telemetry is written."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw

from zmem import config
from zmem.capture.source import source_state
from zmem.db import memories, overview
from zmem.db.connect import connect, read_snapshot, transaction
from zmem.errors import UsageError
from zmem.models import INJECTION_TAG, MAX_LIMIT, MEMORY_TYPES, TAINTS, Memory

# File sources hashed per overview: each is a file read, so the newest ones only.
SOURCE_CHECKS = 100


class Overview:
    """Mixed into MemoryStore, which provides the connection and id resolution."""

    _conn: apsw.Connection
    path: Path
    resolve_id: Any

    def prepare_overview(self, before: Callable[[], None] | None = None) -> list[str]:
        """Create the covering indexes the overview counts read (db.overview explains why),
        once per store, calling `before` first when there is work; returns the ones created.
        A store without them still answers, slower. It uses a connection of its own and no
        state of this handle, so it may run on another thread while this handle serves reads
        (a second or so per 100k rows under the write lock; readers do not wait for it)."""
        conn = connect(self.path)
        try:
            if not overview.missing_indexes(conn):
                return []
            if before is not None:
                before()
            with transaction(conn):
                missing = overview.missing_indexes(conn)  # re-read under the write lock
                overview.create_indexes(conn, missing)
            return missing
        finally:
            conn.close()

    def overview(self, attention_limit: int = 8) -> dict[str, Any]:
        """Counts, series and the rows to look at, for the overview page."""
        with read_snapshot(self._conn):
            combos = overview.breakdown(self._conn)
            added, retired = overview.daily_writes(self._conn)
            retrieved, surfaced = overview.daily_recall(self._conn)
            n_contra, contra_pairs = overview.live_contradictions(self._conn, attention_limit)
            pair_rows = {
                m.id: m
                for m in memories.get_many(self._conn, sorted({i for p in contra_pairs for i in p}))
            }
            n_inject, injected = overview.tagged_live(self._conn, INJECTION_TAG, attention_limit)
            sources = overview.file_sources(self._conn, SOURCE_CHECKS)
        by_ns: Counter[str] = Counter()
        by_type: Counter[str] = Counter()
        by_taint: Counter[str] = Counter()
        matrix: dict[str, Counter[str]] = {}
        for ns, type_, taint, n in combos:
            by_ns[ns] += n
            by_type[type_] += n
            by_taint[taint] += n
            matrix.setdefault(ns, Counter())[type_] += n
        stale = []
        for ref, digest, n, newest in sources:
            state = source_state(ref, digest)
            if state in ("stale", "unreadable"):
                stale.append({"source_ref": ref, "state": state, "rows": n, "newest": newest})
        return {
            "live": sum(by_ns.values()),
            "by_namespace": by_ns.most_common(),
            "by_type": [(t, by_type[t]) for t in MEMORY_TYPES if by_type[t]],
            "by_taint": [(t, by_taint[t]) for t in TAINTS if by_taint[t]],
            "matrix": {ns: dict(c) for ns, c in matrix.items()},
            "daily": {
                "added": added,
                "retired": retired,
                "retrieved": retrieved,
                "surfaced": surfaced,
            },
            "contradictions": {
                "count": n_contra,
                "pairs": [
                    (pair_rows[a], pair_rows[b])
                    for a, b in contra_pairs
                    if a in pair_rows and b in pair_rows
                ],
            },
            "injection_risk": {"count": n_inject, "rows": injected},
            "stale_sources": {"checked": len(sources), "rows": stale[:attention_limit]},
        }

    def totals(self) -> dict[str, Any]:
        """Live and total rows and the store file's size: the cheap part of `stats`."""
        with read_snapshot(self._conn):
            live, total = overview.totals(self._conn)
        try:
            size = self.path.stat().st_size
        except OSError:
            size = None
        return {"live": live, "total": total, "size_bytes": size}

    def browse(
        self,
        *,
        namespace: str | None = None,
        type: str | None = None,
        taint: str | None = None,
        tag: str | None = None,
        include_superseded: bool = False,
        before: int | None = None,
        limit: int = 50,
    ) -> list[Memory]:
        """A page of memories, newest first; `before` is the previous page's last rowid."""
        if type and type not in MEMORY_TYPES:
            raise UsageError(f"type {type!r} is not one of: {', '.join(MEMORY_TYPES)}")
        if taint and taint not in TAINTS:
            raise UsageError(f"taint {taint!r} is not one of: {', '.join(TAINTS)}")
        if not 1 <= limit <= MAX_LIMIT:
            raise UsageError(f"limit must be between 1 and {MAX_LIMIT}")
        return overview.page(
            self._conn,
            namespace=namespace or None,
            type_=type or None,
            taint=taint or None,
            tag=tag or None,
            include_superseded=include_superseded,
            before_rid=before,
            limit=limit,
        )

    def rows(self, ids: list[str]) -> dict[str, Memory]:
        """The rows these full ids name (tombstoned ones too), by id; unknown ids are absent."""
        return {m.id: m for m in memories.get_many(self._conn, list(dict.fromkeys(ids)))}

    def lineage(self, memory_id: str) -> list[Memory]:
        """Every version of this memory (ancestors by update_of, itself, revisions), oldest
        first."""
        return overview.lineage(self._conn, self.resolve_id(memory_id))

    @staticmethod
    def version_at(versions: list[Memory], as_of: str) -> Memory | None:
        """The version of a lineage valid at `as_of` (valid_from inclusive, valid_until
        exclusive, as every --as-of read), or None before the first or after the last ended."""
        instant = config.normalize_instant(as_of)
        for m in versions:
            if m.valid_from <= instant and (m.valid_until is None or m.valid_until > instant):
                return m
        return None
