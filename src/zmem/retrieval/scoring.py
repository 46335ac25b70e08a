"""Per-recall scoring state shared by the pipeline, link expansion and lineage unfold: the
reference clock, the [STALE SOURCE] check (one file hash per row per recall), the composite
score of a row, and the passive-surface safety test."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache

import apsw

from zmem import config
from zmem.capture.injection import is_injection_risk
from zmem.capture.source import source_state
from zmem.config import Settings
from zmem.db import origin
from zmem.models import INJECTION_TAG, Hit, Memory
from zmem.retrieval import fusion


def row_injection_risk(m: Memory) -> bool:
    # Re-classified at read time: a row stored before a pattern existed is still caught. Tags
    # and the source ref reach the reader too (entity names, the provenance line), so they
    # are classified with the content.
    return INJECTION_TAG in m.tags or _risky(m.content, m.tags, m.source_ref)


@lru_cache(maxsize=4096)
def _risky(content: str, tags: tuple[str, ...], source_ref: str | None) -> bool:
    # Memoised: a passive read checks a row for the filter and again for its Hit, and a warm
    # resident process sees the same rows prompt after prompt.
    if is_injection_risk(content):
        return True
    extra = " ".join((*tags, source_ref or ""))
    return bool(extra.strip()) and is_injection_risk(extra)


def passive_block(m: Memory) -> str | None:
    """Why a passive surface must not show this row, or None."""
    if row_injection_risk(m):
        return "omitted_injection"
    if m.taint == "untrusted_web":
        return "omitted_untrusted_web"
    return None


class ScoringContext:
    """Per-recall state shared by the tiers: connection, settings, clock, memoised checks."""

    def __init__(
        self,
        conn: apsw.Connection,
        settings: Settings,
        as_of: str | None,
        weights: fusion.Weights = fusion.DEFAULT_WEIGHTS,
    ):
        self.conn = conn
        self.weights = weights
        self.settings = settings
        self.reference: datetime = config.parse_instant(as_of) if as_of else config.now()
        self.warnings: list[str] = []
        self.ranked_by = "fusion"  # "learned" once the learned ranker orders a tier
        self._states: dict[str, str | None] = {}
        # Team members this machine keeps out of passive injection (`zmem hub distrust`), read
        # on the first passive check: an explicit read never asks.
        self._distrusted: frozenset[str] | None = None

    def passive_block(self, m: Memory) -> str | None:
        """Why a passive surface must not show this row here: passive_block's reasons, or a
        row written by a distrusted team member."""
        why = passive_block(m)
        if why is not None:
            return why
        if self._distrusted is None:
            self._distrusted = origin.distrusted(self.conn)
        if self._distrusted and origin.written_by(self.conn, m.id, self._distrusted):
            return "omitted_distrusted"
        return None

    def effective(self, m: Memory) -> tuple[float, bool]:
        """(confidence after [STALE SOURCE] halving, stale?)."""
        if m.source_ref is None or not m.source_ref.startswith("file:"):
            return m.confidence, False
        if m.id not in self._states:
            state = source_state(m.source_ref, m.source_hash)
            if state == "unreadable":
                self.warnings.append(f"source {m.source_ref} cannot be opened")
            self._states[m.id] = state
        stale = self._states[m.id] == "stale"
        return (m.confidence / 2 if stale else m.confidence), stale

    def unmatched_hit(self, m: Memory, tier: str, **keys: object) -> Hit:
        """A row that joins a result without matching the query (a link neighbour, a lineage
        predecessor, a recent row): no lane ranks, no relevance part in its score."""
        conf, stale = self.effective(m)
        return Hit(
            memory=m,
            score=self.score(m, 0.0, conf),
            relevance=0.0,
            rrf=0.0,
            lanes={},
            effective_confidence=conf,
            stale_source=stale,
            injection_risk=row_injection_risk(m),
            tier=tier,
            **keys,  # type: ignore[arg-type]
        )

    def score(self, m: Memory, rel: float, conf: float) -> float:
        # The shipped weights give recency 0 (docs/decisions.md): parsing ~180 timestamps a
        # prompt for a term multiplied by 0 cost ~0.2 ms of the resident answer.
        weights = self.weights
        return fusion.composite(
            rel,
            conf,
            m.trust_score,
            fusion.recency(m.refreshed_at or m.valid_from, self.reference)
            if weights.recency
            else 0.0,
            fusion.popularity(m.retrieval_count),
            weights,
        )
