"""The learned ranker (issue 51): the features of one fused candidate, the linear scorer over
them that scripts/train_ranker.py fits offline (pairwise logistic loss), and the weights file
shipped beside this module (ranker_weights.json). When the file is absent or unreadable, the
hand-set fusion (fusion.relevance) orders the candidates as before."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from zmem.retrieval import fusion

WEIGHTS_FILE = Path(__file__).with_name("ranker_weights.json")
FORMAT = "zmem-ranker/1"

# What a query asks, read from its first word or its mark: a question is answered by meaning
# more often than a pasted name or error string is.
_QUESTION_WORDS = frozenset(
    "what which who whom whose when where why how did does do is are was were can could "
    "should would will has have".split()
)
# Query length in terms at which a query stops counting as "short" (a name, a command).
SHORT_QUERY_TERMS = 3

# The order of the feature vector. A weights file names its features; one that names others
# (an older or newer layout) is not loaded, and the hand-set fusion ranks instead.
FEATURES: tuple[str, ...] = (
    "hand",  # the hand-set fusion's relevance: the model starts from what ranked before
    "fts",  # BM25 relative to the query's best row
    "coverage",  # share of the query's words the row holds
    "vector",  # calibrated cosine
    "entity",  # share of the query's named entities the row links
    "lexical_gated",  # fusion's words evidence, gated by the query-type signal
    "semantic_gated",  # fusion's meaning evidence, muted on a words query
    "agree",  # the weaker of the two: both lanes vouch for the row
    "fts_rank",  # 1 / log2(1 + rank) in each lane, 0 when the lane did not find the row
    "vector_rank",
    "entity_rank",
    "lanes",  # how many of the three lanes found it, over three
    "vector_gap",  # how far below the pool's best meaning match the row is
    "fts_x_e",  # words evidence on a words query
    "vector_x_e",  # meaning evidence on a words query
    "vector_x_question",  # meaning evidence on a question
    "coverage_x_short",  # a short query (a name) the row holds whole
    "vector_x_top",  # meaning evidence when the pool's best meaning match is strong
)


class Scorer(Protocol):
    """What the pipeline asks of a ranker: the embedding model its meaning features were
    measured with, and a 0..1 relevance for each candidate of a pool, from the pool's query
    statistics and each candidate's lane evidence and ranks (`ids` name the rows: a recorder
    keeps them with their features, a model needs only the evidence)."""

    embedding_model: str

    def relevances(
        self,
        ids: Sequence[str],
        stats: QueryStats,
        natives: Sequence[Mapping[str, float]],
        ranks: Sequence[Mapping[str, int]],
    ) -> list[float]: ...


@dataclass(frozen=True)
class Model:
    """A linear scorer on the hand-set relevance's 0..1 scale: relevance = bias + weights .
    features, clipped to 0..1 (scripts/train_ranker.py fits it pairwise). Its meaning
    features are calibrated cosines of one embedding model: under another model (the fake
    profile of the unit tests, a store configured otherwise) the hand-set fusion ranks."""

    weights: tuple[float, ...]
    bias: float
    embedding_model: str

    def relevance(self, x: Sequence[float]) -> float:
        z = self.bias
        for w, v in zip(self.weights, x, strict=True):
            z += w * v
        return min(1.0, max(0.0, z))

    def relevances(
        self,
        ids: Sequence[str],
        stats: QueryStats,
        natives: Sequence[Mapping[str, float]],
        ranks: Sequence[Mapping[str, int]],
    ) -> list[float]:
        """relevance(features(...)) of each candidate, without building the vectors: the
        features that multiply a candidate's evidence by a query statistic fold into that
        evidence's weight once per pool (this runs on every prompt, ~150 rows a tier)."""
        (w_hand, w_fts, w_cov, w_vec, w_ent, w_lexg, w_semg, w_agree, w_rf, w_rv, w_re,
         w_lanes, w_gap, w_fts_e, w_vec_e, w_vec_q, w_cov_s, w_vec_t) = self.weights  # fmt: skip
        e = stats.e
        top = stats.top_vector
        base = self.bias + w_gap * top
        k_fts = w_fts + w_fts_e * e
        k_cov = w_cov + w_cov_s * stats.short
        k_vec = w_vec - w_gap + w_vec_e * e + w_vec_q * stats.question + w_vec_t * top
        w_lanes /= 3.0
        parts = fusion.relevance_parts
        out = []
        for native, rank in zip(natives, ranks, strict=True):
            hand, lexical, semantic = parts(native, e)
            z = (
                base
                + w_hand * hand
                + k_fts * native.get("fts", 0.0)
                + k_cov * native.get("coverage", 0.0)
                + k_vec * native.get("vector", 0.0)
                + w_ent * native.get("entity", 0.0)
                + w_lexg * lexical
                + w_semg * semantic
                + w_agree * (lexical if lexical < semantic else semantic)
                + w_lanes * len(rank)
            )
            if rank:
                r = rank.get("fts")
                if r:
                    z += w_rf * _rank_part(r)
                r = rank.get("vector")
                if r:
                    z += w_rv * _rank_part(r)
                r = rank.get("entity")
                if r:
                    z += w_re * _rank_part(r)
            out.append(1.0 if z > 1.0 else 0.0 if z < 0.0 else z)
        return out

    def to_dict(self) -> dict[str, object]:
        return {
            "format": FORMAT,
            "embedding_model": self.embedding_model,
            "features": list(FEATURES),
            "weights": [round(w, 8) for w in self.weights],
            "bias": round(self.bias, 8),
        }


def parse(doc: object) -> Model:
    """A Model from a weights document; ValueError when it is not one for these features."""
    if not isinstance(doc, Mapping) or doc.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} document")
    if list(doc.get("features", ())) != list(FEATURES):
        raise ValueError("the file names other features than this version computes")
    weights = doc.get("weights")
    bias = doc.get("bias")
    model = doc.get("embedding_model")
    if not isinstance(model, str) or not model:
        raise ValueError("the file does not name the embedding model it was trained with")
    if not isinstance(weights, list) or len(weights) != len(FEATURES):
        raise ValueError("one weight per feature is needed")
    values = [*weights, bias]
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values):
        raise ValueError("every weight must be a finite number")
    return Model(tuple(float(w) for w in weights), float(bias), model)  # type: ignore[arg-type]


def load(path: Path = WEIGHTS_FILE) -> Model | None:
    """The shipped model, or None (the hand-set fusion ranks) when the file is absent or is
    not a model for these features: a damaged install still recalls."""
    try:
        return parse(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


_UNLOADED = object()
# The model recall orders by: loaded once per process on first use (a resident process keeps
# it). Evaluation sets it for a block (harness.retrieval_constants("ranker.ACTIVE", ...)): None
# reads with the hand-set fusion, a Scorer reads with that scorer.
ACTIVE: Scorer | None | object = _UNLOADED


def active(vector_model: str | None) -> Scorer | None:
    """The scorer for a hybrid read whose query `vector_model` embedded, or None: the hand-set
    fusion ranks (no model shipped, or it was trained on another model's cosines)."""
    global ACTIVE
    if ACTIVE is _UNLOADED:
        ACTIVE = load()
    scorer: Scorer | None = ACTIVE  # type: ignore[assignment]
    if scorer is None or vector_model is None or scorer.embedding_model != vector_model:
        return None
    return scorer


@dataclass(frozen=True)
class QueryStats:
    """What the features need of the query and of the whole pool, computed once per tier."""

    e: float  # fusion.query_coverage: the best share of the query's words one row holds
    question: float  # 1.0 for a question
    short: float  # 1.0 for a query of at most SHORT_QUERY_TERMS terms
    top_vector: float  # the pool's best calibrated cosine


def query_stats(
    text: str, terms: Sequence[str], natives: Iterable[Mapping[str, float]], e: float
) -> QueryStats:
    """The pool's statistics; `e` is fusion.query_coverage of the same pool, which the caller
    has already computed."""
    # Only the first word is read: a prompt can be a pasted log of many kilobytes.
    first = text.lstrip()[:32].lower().split(maxsplit=1)
    question = 1.0 if "?" in text or (first and first[0] in _QUESTION_WORDS) else 0.0
    return QueryStats(
        e=e,
        question=question,
        short=1.0 if len(terms) <= SHORT_QUERY_TERMS else 0.0,
        top_vector=max((n.get("vector", 0.0) for n in natives), default=0.0),
    )


# 1 / log2(1 + rank) for the ranks a pool holds (a lane fetches at most a few hundred rows).
_RANK_PARTS = [0.0] + [1.0 / math.log2(1.0 + r) for r in range(1, 1025)]


def _rank_part(rank: int | None) -> float:
    if not rank:
        return 0.0
    return _RANK_PARTS[rank] if rank < len(_RANK_PARTS) else 1.0 / math.log2(1.0 + rank)


def features(
    stats: QueryStats, native: Mapping[str, float], ranks: Mapping[str, int]
) -> list[float]:
    """The feature vector of one candidate, in FEATURES' order."""
    e = stats.e
    lex = native.get("fts", 0.0)
    cov = native.get("coverage", 0.0)
    dense = native.get("vector", 0.0)
    ent = native.get("entity", 0.0)
    hand, lexical, semantic = fusion.relevance_parts(native, e)
    found = sum(1 for lane in ("fts", "vector", "entity") if lane in ranks)
    return [
        hand,
        lex,
        cov,
        dense,
        ent,
        lexical,
        semantic,
        min(lexical, semantic),
        _rank_part(ranks.get("fts")),
        _rank_part(ranks.get("vector")),
        _rank_part(ranks.get("entity")),
        found / 3.0,
        stats.top_vector - dense,
        lex * e,
        dense * e,
        dense * stats.question,
        cov * stats.short,
        dense * stats.top_vector,
    ]
