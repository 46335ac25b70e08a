"""The read-by-relevance half of MemoryStore: recall, search, recent and the --explain
debugger, plus the telemetry those reads leave behind. MemoryStore mixes this in; the ranking
itself lives in retrieval/, the SQL in db/."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import apsw

from zmem import config
from zmem.db import memories
from zmem.db.connect import BUSY_TIMEOUT_MS, read_snapshot, transaction
from zmem.embedding import PROFILE_DIMS, PROFILE_MODELS, PROFILE_SIMILARITY
from zmem.models import Hit
from zmem.retrieval import explain, pipeline
from zmem.retrieval.explain import Verdict
from zmem.retrieval.fusion import DEFAULT_WEIGHTS, Weights
from zmem.retrieval.lanes import DENSE_LANES, HYBRID_LANES, LEXICAL_LANES
from zmem.retrieval.pipeline import RecallReport, RecallRequest
from zmem.retrieval.query import is_change_intent

if TYPE_CHECKING:
    from zmem.config import Settings
    from zmem.retrieval.vector_cache import VectorCache


PASSIVE_BUSY_TIMEOUT_MS = 50


class RecallMixin:
    """Needs `_conn` and `settings` from MemoryStore."""

    _conn: apsw.Connection
    settings: Settings
    _embedder: Any
    _vec_ready: bool
    _vector_cache: VectorCache | None = None

    # ---- the resident process's copy of the vector index ------------------------------------

    def keep_vectors_in_memory(self) -> bool:
        """For long-lived processes (the hooks' resident process): hold a copy of the vector
        index in memory so a hybrid read's KNN is one matrix product, not a vec0 scan. After a
        write by another process the copy is stale and reads use the index again; call this
        between requests to rebuild it. True when a fresh copy is held; False when this store
        reads no vectors."""
        if not self._vec_ready:
            return False
        cache = self._vector_cache
        if cache is None:
            from zmem.retrieval.vector_cache import VectorCache

            profile = self.settings.embed_profile
            cache = VectorCache(self._conn, PROFILE_MODELS[profile], PROFILE_DIMS[profile])
            self._vector_cache = cache
        if not cache.fresh(self._conn):
            with read_snapshot(self._conn):
                cache.rebuild()
        return True

    # ---- recall ----------------------------------------------------------------------------

    def recall(self, query: str, **options: Any) -> list[Hit]:
        """Rows relevant to the query, best first (see recall_report for the options)."""
        return self.recall_report(query, **options).hits

    def recall_report(
        self,
        query: str,
        *,
        namespace: str | None = None,
        limit: int = 5,
        include_global: bool = False,
        global_limit: int = 3,
        as_of: str | None = None,
        no_bump: bool = False,
        hybrid: bool | None = None,
        no_mmr: bool = False,
        link_hops: int = 1,
        link_budget: int = 2,
        no_unfold: bool = False,
        min_confidence: float | None = None,
        telemetry: bool = True,
        weights: Weights | None = None,
        dense_only: bool = False,
        rerank: bool = False,
    ) -> RecallReport:
        """The full recall: hits plus what the read envelope reports (omitted rows, tokens).
        Explicit calls bump retrieval_count on the rows that matched; no_bump=True is the
        passive surface: it records a surface event and omits injection-risk and untrusted-web
        rows. Lineage unfold runs only on explicit change-intent queries with link_hops=1.
        telemetry=False writes nothing at all (evaluation harnesses: the explicit path's
        behaviour without its counters); weights replaces the composite weights; dense_only
        runs the vector lane alone (evaluation: the dense-only rows of the benchmarks).
        rerank=True (the explicit CLI recall) applies the optional cross-encoder when
        ZMEM_CROSS_ENCODER=1; it never runs on a passive read, and any failure leaves the
        order as it was."""
        req = self._request(
            query,
            namespace=namespace,
            limit=limit,
            include_global=include_global,
            global_limit=global_limit,
            as_of=as_of,
            no_bump=no_bump,
            hybrid=hybrid,
            no_mmr=no_mmr,
            link_hops=link_hops,
            link_budget=link_budget,
            no_unfold=no_unfold,
            min_confidence=min_confidence,
            weights=weights or DEFAULT_WEIGHTS,
        )
        unfold = not no_bump and not no_unfold and link_hops >= 1 and is_change_intent(query)
        report = self._read(req, expand_links=True, unfold=unfold, dense_only=dense_only)
        if rerank and not no_bump and self.settings.cross_encoder:
            report.hits = _cross_encode(report.hits, query, self.settings.cross_encoder_model)
        if telemetry:
            self._telemetry(report, no_bump)
        return report

    def search(
        self,
        text: str,
        *,
        namespace: str | None = None,
        limit: int = 10,
        include_global: bool = False,
        global_limit: int = 3,
        as_of: str | None = None,
        no_bump: bool = False,
        telemetry: bool = True,
    ) -> RecallReport:
        """The recall ranking without link expansion or lineage unfold (the search surface of
        the CLI, MCP and Hermes)."""
        req = self._request(
            text,
            namespace=namespace,
            limit=limit,
            include_global=include_global,
            global_limit=global_limit,
            as_of=as_of,
            no_bump=no_bump,
            link_hops=0,
            link_budget=0,
            no_unfold=True,
            # The spec's search applies no confidence floor: it is how an operator finds the
            # ungrounded (signal=none) rows recall deliberately hides.
            min_confidence=0.0,
        )
        report = self._read(req, expand_links=False, unfold=False)
        if telemetry:
            self._telemetry(report, no_bump)
        return report

    def recent(
        self,
        *,
        namespace: str | None = None,
        limit: int = 5,
        min_confidence: float | None = None,
        include_global: bool = False,
        global_limit: int = 3,
        as_of: str | None = None,
        no_bump: bool = False,
        telemetry: bool = True,
    ) -> RecallReport:
        """Newest rows at or above the recent floor (ZMEM_INJECT_FLOOR_RECENT, 0.5)."""
        req = self._request(
            "",
            namespace=namespace,
            limit=limit,
            include_global=include_global,
            global_limit=global_limit,
            as_of=as_of,
            no_bump=no_bump,
            min_confidence=min_confidence,
        )
        with read_snapshot(self._conn):
            report = pipeline.run_recent(self._conn, self.settings, req)
        if telemetry:
            self._telemetry(report, no_bump)
        return report

    def explain(
        self, query: str, *, target: str | None = None, **options: Any
    ) -> tuple[RecallReport, list[Verdict], dict[str, Any]]:
        """recall --explain: the same pipeline with zero writes, one verdict per row (or per row
        the target names). A failing tracer degrades to explain_unavailable; the results stand.
        Takes recall_report's keyword options."""
        # The same options as recall_report; an unknown one is a TypeError, as it is there.
        req = self._request(query, **options)
        report = self._read(req, expand_links=True, unfold=False)
        floor = (
            self.settings.inject_floor_prompt if req.min_confidence is None else req.min_confidence
        )
        try:
            with read_snapshot(self._conn):
                found = explain.verdicts(self._conn, req, report, target, floor)
        except Exception as exc:  # the debugger must never fail the recall it explains
            found = [explain.Verdict(None, "explain_unavailable", detail={"error": repr(exc)})]
        return report, found, req.explain_settings(report.hybrid)

    def _request(self, query: str, *, as_of: str | None = None, **fields: Any) -> RecallRequest:
        instant = config.normalize_instant(as_of) if as_of else None
        return RecallRequest(query=query, as_of=instant, **fields)

    def _read(
        self, req: RecallRequest, *, expand_links: bool, unfold: bool, dense_only: bool = False
    ) -> RecallReport:
        # Hybrid is the default whenever this store can embed the query and holds a vector
        # index; anything missing (runtime, model, sqlite-vec) falls back to lexical + entity,
        # never an error. --no-hybrid (hybrid=False) forces lexical.
        vector = None
        if (req.hybrid is not False or dense_only) and self._vec_ready:
            vector = self._query_vector(req.query)
        if dense_only:
            lanes = DENSE_LANES
        else:
            lanes = HYBRID_LANES if vector is not None else LEXICAL_LANES
        with read_snapshot(self._conn):
            return pipeline.run(
                self._conn,
                self.settings,
                req,
                lanes,
                hybrid=vector is not None,
                expand_links=expand_links,
                unfold=unfold,
                vector=vector,
                similarity_scale=PROFILE_SIMILARITY[self.settings.embed_profile],
                vector_cache=self._vector_cache,
            )

    def _query_vector(self, text: str) -> bytes | None:
        try:
            embedded = self._embedder(text) if self._embedder is not None else None
        except Exception:  # fail-open: recall goes on lexically
            return None
        return embedded[0] if embedded else None

    def _telemetry(self, report: RecallReport, no_bump: bool) -> None:
        # Only rows that matched count: link and lineage extras never advance telemetry.
        ids = [h.id for h in report.matched]
        if not ids:
            return
        if no_bump:
            if not self.surface(ids):
                report.warnings.append("retrieval counters not updated: store busy")
            return
        try:
            self.bump_retrieved(ids)
        except apsw.BusyError:
            report.warnings.append("retrieval counters not updated: store busy")

    def surface(self, ids: Sequence[str]) -> bool:
        """Record a passive surface event for rows actually shown (the hooks call this after
        their gate and render, with telemetry=False on the read). A passive surface runs on
        every prompt: it never waits out a long writer for an advisory counter. False when
        the store was busy."""
        if not ids:
            return True
        self._conn.set_busy_timeout(PASSIVE_BUSY_TIMEOUT_MS)
        try:
            self.record_surfaced(ids)
        except apsw.BusyError:
            return False
        finally:
            self._conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        return True

    # ---- telemetry (the recall surfaces call these) ------------------------------------------

    def bump_retrieved(self, ids: Sequence[str]) -> None:
        """Explicit reads: evidence the memory was useful."""
        if ids:
            with transaction(self._conn):
                memories.bump_retrieved(self._conn, ids, config.now_iso())

    def record_surfaced(self, ids: Sequence[str]) -> None:
        """Passive surfaces (hooks, --no-bump): counted apart from retrievals."""
        if ids:
            with transaction(self._conn):
                memories.record_surfaced(self._conn, ids, config.now_iso())


def _cross_encode(hits: list[Hit], query: str, model_path: str | None) -> list[Hit]:
    """Re-order each tier's matched rows by the local cross-encoder; link and lineage extras
    stay after them (they belong to the rows they were reached from)."""
    from zmem.embedding.cross_encoder import load_reranker
    from zmem.embedding.cross_encoder import rerank as cross_rerank

    reranker = load_reranker(model_path)
    if reranker is None:
        return hits  # missing or broken model: un-reranked, silently (the spec's contract)
    out: list[Hit] = []
    for tier in dict.fromkeys(h.tier for h in hits if not h.extra):
        group = [h for h in hits if not h.extra and h.tier == tier]
        out += cross_rerank(group, query, reranker, top_n=len(group))
    return out + [h for h in hits if h.extra]
