"""Reciprocal Rank Fusion across lanes and the composite score that re-ranks the fused pool. The
spec's weights, half-life and damping live here and nowhere else; tune-weights evaluates
alternatives by passing another Weights."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from zmem import config
from zmem.errors import UsageError

RRF_K = 60
HALF_LIFE_DAYS = 90.0
# Popularity saturates here: sqrt(n / 50) reaches 1.0 at 50 explicit retrievals. The square
# root is the spec's diminishing return; the cap keeps one hot row from owning every query.
POPULARITY_SATURATION = 50


@dataclass(frozen=True)
class Weights:
    # The spec's 0.55 / 0.20 / 0.15 / 0.10 with recency's share moved to relevance (issue 35):
    # read as the hooks read, LoCoMo dev R@10 went 0.595 -> 0.642, and up on every one of the
    # five conversations held out in turn; the coding dev sets did not move (their rows carry
    # no age). Ties still go to the newer row (floor_and_score's order). docs/decisions.md.
    bm25: float = 0.70
    confidence: float = 0.20
    recency: float = 0.0
    popularity: float = 0.10

    def as_dict(self) -> dict[str, float]:
        return {
            "W_BM25": self.bm25,
            "W_CONFIDENCE": self.confidence,
            "W_RECENCY": self.recency,
            "W_POPULARITY": self.popularity,
        }


DEFAULT_WEIGHTS = Weights()


def rrf(rankings: Iterable[Iterable[int]], k: int = RRF_K) -> dict[int, float]:
    """Per-id additive: a row found by several lanes accumulates each lane's 1/(k + rank)."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            fused[key] = fused.get(key, 0.0) + 1.0 / (k + rank)
    return fused


def recency(valid_from: str, reference: datetime) -> float:
    """1.0 for a row valid from the reference instant, halving every HALF_LIFE_DAYS."""
    try:
        start = config.parse_instant(valid_from)
    except UsageError:  # a hand-edited timestamp must not fail a recall
        return 0.0
    age_days = max(0.0, (reference - start).total_seconds() / 86400.0)
    return 0.5 ** (age_days / HALF_LIFE_DAYS)


def popularity(retrieval_count: int) -> float:
    return min(1.0, math.sqrt(max(0, retrieval_count) / POPULARITY_SATURATION))


# A row both lanes vouch for gains half of its weaker lane's evidence: agreement is the
# per-id additive idea of RRF, expressed on calibrated scores. 0.5 over 0.25 lifted LoCoMo
# R@5 0.516 -> 0.539 and kept the other two dev sets (docs/benchmarks.md).
AGREEMENT_BONUS = 0.5


# How much a named entity alone says about a row, against the words and meaning lanes: at 1.0
# every row naming a common entity ("Go" in a Go project) tied at full relevance. Chosen on the
# tune projects of the coding dev set (0, 0.3, 0.5, 0.7, 1.0; docs/benchmarks.md).
ENTITY_WEIGHT = 0.5
# How far a words query (e near 1) mutes the dense lane: 1.0 silences it completely.
SEMANTIC_GATE = 1.0


def query_coverage(natives: Iterable[Mapping[str, float]]) -> float:
    """E, the query-type signal: the best share of the query's words one lexical row holds."""
    return max((n.get("coverage", 0.0) for n in natives), default=0.0)


def relevance(native: Mapping[str, float], e: float) -> float:
    """The relevance part of the composite, from each lane's calibrated 0..1 evidence.

    `e` (query_coverage) is the best coverage of the query's words by one lexical match: a
    query-type signal. When some row holds most of the words (e near 1: a name, an error
    string, a tool), words are the evidence: a lexical row counts fully and the dense lane only
    fills in (weight 1 - e^2). When no row does (e low: a paraphrase), a lexical row counts by
    its own coverage and meaning takes over. Rows found by both lanes get the agreement bonus.
    Dev sets and the variants tried are in docs/benchmarks.md."""
    return relevance_parts(native, e)[0]


def relevance_parts(native: Mapping[str, float], e: float) -> tuple[float, float, float]:
    """(relevance, the gated words evidence, the gated meaning evidence): relevance's parts,
    which the learned ranker reads as features too."""
    lex = native.get("fts", 0.0)
    cov = native.get("coverage", 0.0)
    dense = native.get("vector", 0.0)
    ent = native.get("entity", 0.0)
    # Squared: a query half of whose words one row holds is still mostly a words query (the
    # linear gate gave dense rows too much say there; see docs/benchmarks.md).
    lexical = lex * (cov + (1.0 - cov) * e * e)
    semantic = dense * (1.0 - SEMANTIC_GATE * e * e)
    rel = min(
        1.0, max(lexical, semantic, ENTITY_WEIGHT * ent) + AGREEMENT_BONUS * min(lexical, semantic)
    )
    return rel, lexical, semantic


def coverage(terms: Iterable[str], tokens: Iterable[str]) -> float:
    """Share of the query's words the row holds: 1.0 for a complete match."""
    wanted = set(terms)
    return len(wanted & set(tokens)) / len(wanted) if wanted else 0.0


def composite(
    rel: float,
    confidence: float,
    trust: float,
    rec: float,
    pop: float,
    weights: Weights = DEFAULT_WEIGHTS,
) -> float:
    # Trust (lowered by contradictions, raised by corroboration) scales the confidence part:
    # a contested row keeps matching but yields to an uncontested one of equal standing.
    return (
        weights.bm25 * rel
        + weights.confidence * confidence * trust
        + weights.recency * rec
        + weights.popularity * pop
    )
