"""Training and judging the learned ranker (issue 51): the candidate pools the real recall
gathers for every labelled query of the dev sets (coding memories, paraphrases, LoCoMo
conversations), the logistic fit over their features, and the end-to-end scores of a scorer read
through MemoryStore exactly as the hooks read. scripts/train_ranker.py drives it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from zmem.embedding import PROFILE_MODELS
from zmem.evaluation import gold, harness, locomo, runner
from zmem.evaluation.progress import Tracker, quiet
from zmem.retrieval import ranker
from zmem.retrieval.request import RecallRequest
from zmem.store import MemoryStore

PROFILE = "minilm"
# The LoCoMo read of the dev protocol (RecallRequest.prefetch): 50 rows, as R@50 needs.
LOCOMO_LIMIT = 50
CODING_K = 5
LOCOMO_KS = locomo.KS


@dataclass
class Pool:
    """One tier's candidates for one labelled query, as the pipeline gathered them."""

    dataset: str  # "coding", "paraphrase" or "locomo"
    group: str  # the project namespace or the conversation: what leave-one-out holds out
    side: str  # "tune" or "validation"
    kind: str  # the gold bucket, or the LoCoMo category
    ids: list[str]
    xs: list[list[float]]
    gains: list[frozenset[str]]  # the gold keys each candidate stands for
    gold: frozenset[str]

    @property
    def labels(self) -> list[bool]:
        return [bool(g & self.gold) for g in self.gains]


class Recorder:
    """A scorer that keeps every pool it is shown and ranks it as the hand-set fusion does
    (the first feature): recording changes nothing about the read."""

    embedding_model = PROFILE_MODELS[PROFILE]

    def __init__(self) -> None:
        self.pools: list[tuple[list[str], list[list[float]]]] = []

    def relevances(
        self,
        ids: Sequence[str],
        stats: ranker.QueryStats,
        natives: Sequence[Mapping[str, float]],
        ranks: Sequence[Mapping[str, int]],
    ) -> list[float]:
        xs = [ranker.features(stats, n, r) for n, r in zip(natives, ranks, strict=True)]
        self.pools.append((list(ids), xs))
        return [x[0] for x in xs]


def _recorded(read: Callable[[], Any]) -> list[tuple[list[str], list[list[float]]]]:
    recorder = Recorder()
    with harness.retrieval_constants([("ranker.ACTIVE", recorder)]):
        read()
    return recorder.pools


# ---- the coding sets ---------------------------------------------------------------------


def gold_request(item: gold.GoldItem, k: int = CODING_K) -> RecallRequest:
    """A coding gold item as the prompt hook reads it: passive, with the global tier."""
    return RecallRequest(
        query=item.query,
        namespace=item.namespace,
        limit=k,
        include_global=True,
        as_of=item.as_of,
        passive=not item.explicit,
        link_hops=1 if item.explicit else 0,
        link_budget=0,
        telemetry=False,
    )


def record_gold(
    store: MemoryStore,
    items: Iterable[gold.GoldItem],
    ids: dict[str, str],
    dataset: str,
    tune: set[str],
) -> list[Pool]:
    key_of = {mid: key for key, mid in ids.items()}
    pools = []
    for item in items:
        if not item.expect:
            continue  # a forbid-only item (injection) ranks nothing to learn from
        for got_ids, xs in _recorded(lambda item=item: store.read(gold_request(item))):
            gains = [frozenset({key_of.get(i, "?")}) for i in got_ids]
            pools.append(
                Pool(
                    dataset,
                    item.namespace,
                    "tune" if item.namespace in tune else "validation",
                    item.bucket,
                    got_ids,
                    xs,
                    gains,
                    frozenset(item.expect),
                )
            )
    return pools


def score_gold(
    store: MemoryStore,
    items: Sequence[gold.GoldItem],
    ids: dict[str, str],
    scorer: ranker.Scorer | None,
    mode: str = "hybrid",
) -> list[dict[str, Any]]:
    """Every item read with `scorer` (None: the hand-set fusion) as eval_quality.py reads it
    (passive, global tier, no MMR): runner's per-item results."""
    items = [dataclasses.replace(i, include_global=True) for i in items]
    with harness.retrieval_constants([("ranker.ACTIVE", scorer)]):
        return runner.evaluate(store, items, ids, CODING_K, mode=mode)["per_item"]


# ---- LoCoMo ------------------------------------------------------------------------------


def locomo_request(question: str, namespace: str) -> RecallRequest:
    """A question as the dev protocol's "hooks" reading asks it."""
    return RecallRequest.prefetch(question, namespace=namespace, limit=LOCOMO_LIMIT)


def record_locomo(
    store: MemoryStore,
    data: locomo.Dataset,
    stands_for: dict[str, set[str]],
    tune: set[str],
    track: Tracker = quiet,
) -> list[Pool]:
    pools = []
    for conv in track(data.conversations, "record locomo"):
        locomo.query_clock(conv)
        side = "tune" if conv.sample_id in tune else "validation"
        for q in conv.questions:
            request = locomo_request(q.text, conv.namespace)
            for got_ids, xs in _recorded(lambda r=request: store.read(r)):
                gains = [frozenset(stands_for.get(i, set())) for i in got_ids]
                pools.append(
                    Pool(
                        "locomo",
                        conv.sample_id,
                        side,
                        str(q.category),
                        got_ids,
                        xs,
                        gains,
                        frozenset(q.evidence),
                    )
                )
    return pools


def score_locomo(
    store: MemoryStore,
    data: locomo.Dataset,
    stands_for: dict[str, set[str]],
    scorer: ranker.Scorer | None,
    samples: set[str] | None = None,
) -> list[tuple[str, locomo.Scored]]:
    """(conversation, Scored) per question, read with `scorer` (None: the hand-set fusion)."""
    out = []
    with harness.retrieval_constants([("ranker.ACTIVE", scorer)]):
        for conv in data.conversations:
            if samples is not None and conv.sample_id not in samples:
                continue
            locomo.query_clock(conv)
            for q in conv.questions:
                report = store.read(locomo_request(q.text, conv.namespace))
                out.append((conv.sample_id, locomo.score(q, locomo.ranking(report, stands_for))))
    return out


# ---- the fit -----------------------------------------------------------------------------


@dataclass(frozen=True)
class FitSettings:
    # Ridge pulling the weights toward the hand-set fusion's ranking (the "hand" feature alone):
    # a feature moves away from it only as far as the data insists. Chosen leave-one-dataset-out
    # on the tune sides (fitted on coding tune, read on LoCoMo tune, and the reverse) among
    # 0.3..30 and a ridge toward zero (docs/decisions.md).
    l2: float = 10.0
    # The non-answers each answer is set against: the best of the pool by the hand-set
    # fusion, the rows an answer has to pass to be read.
    negatives: int = 50
    iterations: int = 50  # Newton steps with a halving line search; it converges in ~10


def pairs(pools: Sequence[Pool], negatives: int) -> tuple[np.ndarray, np.ndarray]:
    """(answer minus non-answer feature differences, weight per pair). Each dataset weighs the
    same in total (LoCoMo's 997 questions must not drown the coding sets' few hundred), each
    pool the same within its dataset, whatever its number of answers and rows."""
    usable = [p for p in pools if any(p.labels)]
    per_dataset: dict[str, int] = {}
    for p in usable:
        per_dataset[p.dataset] = per_dataset.get(p.dataset, 0) + 1
    diffs: list[np.ndarray] = []
    weights: list[np.ndarray] = []
    for p in usable:
        x = np.array(p.xs, dtype=np.float64)
        labels = np.array(p.labels)
        order = np.argsort(-x[:, 0], kind="stable")  # the hand-set fusion's order
        neg = [i for i in order if not labels[i]][:negatives]
        pos = np.flatnonzero(labels)
        if not neg:
            continue
        share = len(usable) / (len(per_dataset) * per_dataset[p.dataset])
        d = (x[pos][:, None, :] - x[neg][None, :, :]).reshape(-1, x.shape[1])
        diffs.append(d)
        weights.append(np.full(len(d), share / len(d)))
    if not diffs:
        raise ValueError("no pool holds both an answer and another row")
    return np.vstack(diffs), np.concatenate(weights)


def _logistic(
    a: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float, prior: np.ndarray, iterations: int
) -> np.ndarray:
    """Minimise sum w * logloss(y, a @ beta) + l2/2 |beta - prior|^2 by Newton's method with a
    halving line search. Deterministic: the same data gives the same bits."""
    ridge = l2 * np.eye(a.shape[1])

    def loss(beta: np.ndarray) -> float:
        z = a @ beta
        per_row = np.where(y > 0, np.logaddexp(0, -z), np.logaddexp(0, z))
        return float(w @ per_row + 0.5 * (beta - prior) @ ridge @ (beta - prior))

    beta = prior.copy()
    current = loss(beta)
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(a @ beta, -30, 30)))
        grad = a.T @ (w * (p - y)) + ridge @ (beta - prior)
        hess = (a * (w * p * (1 - p))[:, None]).T @ a + ridge
        step = np.linalg.solve(hess, grad)
        t = 1.0
        candidate = beta - step
        value = loss(candidate)
        while value > current and t > 1e-4:
            t /= 2
            candidate = beta - t * step
            value = loss(candidate)
        if value > current:
            break  # no step lowers the loss: converged as far as floats go
        done = current - value < 1e-12
        beta, current = candidate, value
        if done:
            break
    return beta


def fit(pools: Sequence[Pool], settings: FitSettings = FitSettings()) -> ranker.Model:
    """A pairwise logistic ranker (each answer against the non-answers above it), regularised
    toward the hand-set fusion, its scores put on the hand-set relevance's scale.
    Deterministic, so one command rebuilds the shipped weights byte for byte (they are rounded
    to 8 places when written)."""
    d, w = pairs(pools, settings.negatives)
    ones = np.ones(len(d))
    # The prior: the best multiple of the hand-set relevance alone.
    hand = _logistic(d[:, :1], ones, w, 0.0, np.zeros(1), settings.iterations)[0]
    prior = np.zeros(d.shape[1])
    prior[0] = hand
    beta = _logistic(d, ones, w, settings.l2, prior, settings.iterations)
    # The scale: the scores given the hand-set relevance's mean and spread over the rows the
    # pairs came from, so the composite's confidence and popularity weigh against the learned
    # relevance as they were tuned to weigh against the hand-set one. The order is the fit's.
    x = _rows(pools, settings.negatives)
    scores = x @ beta
    spread = float(scores.std())
    if not spread > 0:
        raise ValueError("the fitted scores do not tell the rows apart; nothing to ship")
    scale = float(x[:, 0].std()) / spread
    bias = float(x[:, 0].mean()) - scale * float(scores.mean())
    return ranker.Model(tuple(float(v) for v in scale * beta), bias, PROFILE_MODELS[PROFILE])


def _rows(pools: Sequence[Pool], negatives: int) -> np.ndarray:
    """The feature rows the pairs were drawn from: every answer and the non-answers each was
    set against."""
    xs: list[list[float]] = []
    for p in pools:
        labels = p.labels
        if not any(labels):
            continue
        order = sorted(range(len(p.xs)), key=lambda i: -p.xs[i][0])
        keep = [i for i in order if not labels[i]][:negatives]
        if keep:
            xs += [p.xs[i] for i in range(len(labels)) if labels[i]] + [p.xs[i] for i in keep]
    return np.array(xs, dtype=np.float64)


def selected(pools: Sequence[Pool], **where: Any) -> list[Pool]:
    """The pools whose attributes match: selected(pools, dataset="locomo", side="tune");
    a value that is a set matches any member; a key prefixed "not_" excludes."""
    out = []
    for p in pools:
        ok = True
        for key, want in where.items():
            negate = key.startswith("not_")
            value = getattr(p, key[4:] if negate else key)
            hit = value in want if isinstance(want, (set, frozenset)) else value == want
            if hit == negate:
                ok = False
                break
        if ok:
            out.append(p)
    return out


# ---- offline scores (a pool ordered by a scorer, no MMR or tier merging) ------------------


def offline(pools: Sequence[Pool], scorer: ranker.Model | None, k: int) -> float:
    """Mean over pools with an answer of the share of gold keys in the first k: a quick look
    used to compare fits; the figures to quote are the end-to-end reads."""
    total = 0.0
    n = 0
    for p in pools:
        if not any(p.labels):
            continue
        rel = [scorer.relevance(x) for x in p.xs] if scorer else [x[0] for x in p.xs]
        order = sorted(range(len(rel)), key=lambda i: -rel[i])[:k]
        found = frozenset().union(*(p.gains[i] for i in order)) & p.gold
        total += len(found) / len(p.gold)
        n += 1
    return total / n if n else 0.0


def write_weights(model: ranker.Model, path: Path) -> bytes:
    import json

    text = json.dumps(model.to_dict(), indent=1, sort_keys=True) + "\n"
    data = text.encode("utf-8")
    path.write_bytes(data)
    return data
