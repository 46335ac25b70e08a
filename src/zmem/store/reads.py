"""The read-by-relevance path of an open store: recall, search and recent from one
RecallRequest, the --explain debugger, and the telemetry those reads leave behind (retrievals
for explicit reads, surface events for passive ones). The ranking lives in retrieval/, the SQL
in db/; the store owns one Reader and hands it its connection and embedding state."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw

from zmem import config
from zmem.config import Settings
from zmem.db import memories
from zmem.db.connect import read_snapshot, transaction, wait_when_busy
from zmem.embedding import PROFILE_MODELS, PROFILE_SIMILARITY
from zmem.models import Hit
from zmem.retrieval import explain, pipeline
from zmem.retrieval.explain import Verdict
from zmem.retrieval.lanes import DENSE_LANES, HYBRID_LANES, LEXICAL_LANES
from zmem.retrieval.request import NO_TRACE, RecallReport, RecallRequest, Tracer
from zmem.store.vectors import StoreVectors

PASSIVE_BUSY_TIMEOUT_MS = 50
BUSY_WARNING = "retrieval counters not updated: store busy"


class Reader:
    def __init__(self, conn: apsw.Connection, settings: Settings, vectors: StoreVectors):
        self._conn = conn
        self.settings = settings
        self._vectors = vectors

    def read(self, req: RecallRequest) -> RecallReport:
        """The report for one request, with its telemetry written (unless req.telemetry is
        False). Explicit reads bump retrieval_count on the rows that matched; passive reads
        record a surface event. The cross-encoder re-orders only an explicit recall that asks
        for it (req.rerank) when ZMEM_CROSS_ENCODER=1, and any failure leaves the order."""
        if req.kind == "recent":
            with read_snapshot(self._conn):
                report = pipeline.run_recent(self._conn, self.settings, req)
        else:
            report = self._ranked(req)
            if req.rerank and not req.passive and self.settings.cross_encoder:
                report.hits = _cross_encode(report.hits, req.query, self.settings)
        if req.telemetry:
            self._telemetry(report, req.passive)
        return report

    def explain(
        self, req: RecallRequest, target: str | None = None
    ) -> tuple[RecallReport, list[Verdict], dict[str, Any]]:
        """recall --explain: the same pipeline with the tracer on and zero writes (it never
        reaches the telemetry step), one verdict per row (or per row the target names); it
        never unfolds. A failing verdict step degrades to explain_unavailable."""
        tracer = Tracer(on=True)
        report = self._ranked(req, unfold=False, tracer=tracer)
        try:
            with read_snapshot(self._conn):
                found = explain.verdicts(self._conn, req, report, target, req.floor(self.settings))
        except Exception as exc:  # the debugger must never fail the recall it explains
            found = [explain.Verdict(None, "explain_unavailable", detail={"error": repr(exc)})]
        return report, found, req.explain_settings(report.hybrid, report.ranker)

    def _ranked(
        self, req: RecallRequest, *, unfold: bool | None = None, tracer: Tracer = NO_TRACE
    ) -> RecallReport:
        # Hybrid is the default whenever this store can embed the query and holds a vector
        # index; anything missing (runtime, model, sqlite-vec) falls back to lexical + entity,
        # never an error. --no-hybrid (hybrid=False) forces lexical.
        vectors = self._vectors
        vector = None
        if (req.hybrid is not False or req.dense_only) and vectors.ready:
            vector = vectors.query(req.query, keep=req.keep_vector)
        if req.dense_only:
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
                unfold=unfold,
                vector=vector,
                similarity_scale=PROFILE_SIMILARITY[self.settings.embed_profile],
                vector_cache=vectors.cache,
                vector_model=PROFILE_MODELS[self.settings.embed_profile],
                tracer=tracer,
            )

    # ---- telemetry ---------------------------------------------------------------------------

    def _telemetry(self, report: RecallReport, passive: bool) -> None:
        # Only rows that matched count: link and lineage extras never advance telemetry.
        ids = [h.id for h in report.matched]
        if not ids:
            return
        if passive:
            if not self.surface(ids):
                report.warnings.append(BUSY_WARNING)
            return
        try:
            self.bump_retrieved(ids)
        except apsw.BusyError:
            report.warnings.append(BUSY_WARNING)

    def surface(self, ids: Sequence[str]) -> bool:
        """Record a passive surface event for rows actually shown (the hooks call this after
        their gate and render, with telemetry off on the read). A passive surface runs on
        every prompt: it never waits out a long writer for an advisory counter. False when
        the store was busy."""
        if not ids:
            return True
        wait_when_busy(self._conn, PASSIVE_BUSY_TIMEOUT_MS)
        try:
            self.record_surfaced(ids)
        except apsw.BusyError:
            return False
        finally:
            wait_when_busy(self._conn)
        return True

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


def _cross_encode(hits: list[Hit], query: str, settings: Settings) -> list[Hit]:
    """Re-order each tier's matched rows by the local cross-encoder; link and lineage extras
    stay after them (they belong to the rows they were reached from)."""
    from zmem.embedding.cross_encoder import load_reranker
    from zmem.embedding.cross_encoder import rerank as cross_rerank

    reranker = load_reranker(settings.cross_encoder_model)
    if reranker is None:
        return hits  # missing or broken model: un-reranked, silently (the spec's contract)
    out: list[Hit] = []
    for tier in dict.fromkeys(h.tier for h in hits if not h.extra):
        group = [h for h in hits if not h.extra and h.tier == tier]
        out += cross_rerank(group, query, reranker, top_n=len(group))
    return out + [h for h in hits if h.extra]
