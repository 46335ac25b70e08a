"""The conversational dev protocol (issue 35): LoCoMo read as the hooks read (link expansion and
MMR on), a grid of reading variants, and leave-one-conversation-out: each conversation in turn
is the validation side, a variant is chosen on the others, and the report shows whether a
change's effect on the tune side predicts its effect on the held-out conversation. Plain BM25
and a naive RRF of BM25 and the embedding model are scored on the same questions."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zmem.embedding import get_embedder
from zmem.evaluation import bm25, harness, locomo
from zmem.evaluation.locomo import KS, Conversation, Dataset, Scored
from zmem.evaluation.progress import Tracker, quiet
from zmem.retrieval import fusion
from zmem.retrieval.fusion import DEFAULT_WEIGHTS, Weights
from zmem.retrieval.request import RecallRequest

DEFAULT = "hooks"
# What the protocol chooses by and reports first: the rows a user sees first are what matter.
OBJECTIVE_K = 10
# A pool each baseline lane ranks before fusing: deeper than any k scored.
BASELINE_DEPTH = 100


@dataclass(frozen=True)
class Variant:
    """One way of reading. Each in VARIANTS differs from the hooks' reading in one thing, so
    its effect is the effect of that thing; "before" is the reading this issue replaced."""

    name: str
    summary: str
    link_hops: int = 1
    mmr: bool = True
    hybrid: bool | None = None  # None: hybrid when the store can embed
    dense_only: bool = False
    weights: Weights = DEFAULT_WEIGHTS
    # zmem.retrieval constants this variant reads with, ("mmr.SIMILARITY_FLOOR", 0.85): set
    # around its reads and put back after, as eval_quality.py --param does for the coding sets.
    constants: tuple[tuple[str, Any], ...] = ()

    def applied(self) -> AbstractContextManager[None]:
        return harness.retrieval_constants(self.constants)

    def request(self, question: str, namespace: str, limit: int) -> RecallRequest:
        return RecallRequest.prefetch(
            question,
            namespace=namespace,
            limit=limit,
            link_hops=self.link_hops,
            no_mmr=not self.mmr,
            hybrid=self.hybrid,
            dense_only=self.dense_only,
            weights=self.weights,
        )


SPEC_WEIGHTS = Weights(bm25=0.55, confidence=0.20, recency=0.15, popularity=0.10)
UNCAPPED_MMR = (("pipeline.MMR_PICKS", 10**6),)

VARIANTS: tuple[Variant, ...] = (
    Variant(DEFAULT, "the passive read the prompt hook makes (links, MMR, hybrid)"),
    Variant("no-links", "without link expansion", link_hops=0),
    Variant("no-mmr", "without MMR", mmr=False),
    Variant("bench", "without both (what bench_locomo.py reads)", link_hops=0, mmr=False),
    Variant(
        "fusion",
        "the hand-set fusion instead of the learned ranker",
        constants=(("ranker.ACTIVE", None),),
    ),
    Variant("lexical", "FTS and entity lanes only", hybrid=False),
    Variant("dense", "the vector lane alone", dense_only=True),
    Variant(
        "recency-0.05",
        "recency weight 0.05, from relevance",
        weights=Weights(bm25=0.65, confidence=0.20, recency=0.05, popularity=0.10),
    ),
    Variant("recency-0.15", "the spec's weights (recency 0.15)", weights=SPEC_WEIGHTS),
    Variant(
        "relevance-0.80",
        "relevance 0.80, confidence 0.15, popularity 0.05",
        weights=Weights(bm25=0.80, confidence=0.15, recency=0.0, popularity=0.05),
    ),
    Variant("mmr-all-picks", "MMR choosing every row, not the first 5", constants=UNCAPPED_MMR),
    Variant(
        "mmr-floor-0.85",
        "MMR counting similarity above 0.85 (not 0.7)",
        constants=(("mmr.SIMILARITY_FLOOR", 0.85),),
    ),
    Variant(
        "before",
        "the reading before issue 35: spec weights, MMR choosing every row",
        weights=SPEC_WEIGHTS,
        constants=UNCAPPED_MMR,
    ),
)


@dataclass
class Scores:
    """Per reading (a variant or a baseline) and conversation, one Scored per question."""

    by: dict[str, dict[str, list[Scored]]] = field(default_factory=dict)

    def add(self, reading: str, sample_id: str, row: Scored) -> None:
        self.by.setdefault(reading, {}).setdefault(sample_id, []).append(row)

    def rows(self, reading: str, samples: Sequence[str]) -> list[Scored]:
        got = self.by.get(reading, {})
        return [r for s in samples for r in got.get(s, [])]

    def mean(self, reading: str, samples: Sequence[str], k: int = OBJECTIVE_K) -> float:
        rows = self.rows(reading, samples)
        return sum(r.turn[k] for r in rows) / len(rows) if rows else 0.0


def read_variants(
    data: Dataset,
    variants: Sequence[Variant] = VARIANTS,
    *,
    profile: str = "minilm",
    limit: int = max(KS),
    track: Tracker = quiet,
) -> tuple[Scores, dict[str, Any]]:
    """Every question of every conversation under every variant, on one store."""
    scores = Scores()
    with locomo.ingested(data, profile=profile, track=track) as (s, stands_for, run):
        jobs = [(v, c) for v in variants for c in data.conversations]
        for variant, conv in track(jobs, "variants", total=len(jobs)):
            locomo.query_clock(conv)
            with variant.applied():
                for q in conv.questions:
                    report = s.read(variant.request(q.text, conv.namespace, limit))
                    ranked = locomo.ranking(report, stands_for)
                    scores.add(variant.name, conv.sample_id, locomo.score(q, ranked))
        counters = dict(run.counters, ingest_s=round(run.ingest_s, 1))
    return scores, counters


def read_baselines(
    data: Dataset, scores: Scores, *, profile: str = "minilm", track: Tracker = quiet
) -> None:
    """Plain BM25, and a naive RRF (k = 60) of BM25 and the embedding model's cosine ranking,
    over each conversation's turns: the two references the held-out report names."""
    embedder = get_embedder(profile)
    for conv in track(data.conversations, "baselines"):
        index = bm25.BM25([t.content for t in conv.turns])
        turns = embedder.embed([t.content for t in conv.turns])
        asked = embedder.embed([q.text for q in conv.questions])
        for q, vec in zip(conv.questions, asked, strict=True):
            lexical = index.rank(q.text, BASELINE_DEPTH)
            scores.add("bm25", conv.sample_id, _scored(conv, q, lexical))
            dense = np.argsort(-(turns @ vec), kind="stable")[:BASELINE_DEPTH].tolist()
            scores.add("rrf", conv.sample_id, _scored(conv, q, naive_rrf([lexical, dense])))


def naive_rrf(rankings: Sequence[Sequence[int]]) -> list[int]:
    """Indexes by fusion.rrf's summed 1/(k + rank), ties by the smaller index."""
    fused = fusion.rrf(rankings)
    return sorted(fused, key=lambda i: (-fused[i], i))


def _scored(conv: Conversation, q: locomo.Question, ranked: Sequence[int]) -> Scored:
    return locomo.score(q, [frozenset({conv.turns[i].dia_id}) for i in ranked])


# ---- leave one conversation out --------------------------------------------------------------


def leave_one_out(
    scores: Scores, samples: Sequence[str], variants: Sequence[str], k: int = OBJECTIVE_K
) -> dict[str, Any]:
    """Per fold: the variant the other conversations choose and its held-out R@k, and for
    every variant its change against the default on the tune side and on the held-out side.
    Predictive when the two changes agree in sign (tune changes under half a point are not
    counted: they predict nothing) and correlate across folds and variants."""
    folds = []
    pairs: list[tuple[float, float]] = []
    for held in samples:
        tune = [s for s in samples if s != held]
        tune_means = {v: scores.mean(v, tune, k) for v in variants}
        chosen = max(variants, key=lambda v: (tune_means[v], v == DEFAULT))
        deltas = {}
        for v in variants:
            if v == DEFAULT:
                continue
            d_tune = tune_means[v] - tune_means[DEFAULT]
            d_val = scores.mean(v, [held], k) - scores.mean(DEFAULT, [held], k)
            deltas[v] = {"tune": round(d_tune, 4), "validation": round(d_val, 4)}
            pairs.append((d_tune, d_val))
        folds.append(
            {
                "held_out": held,
                "chosen": chosen,
                "tune": round(tune_means[chosen], 4),
                "held_out_chosen": round(scores.mean(chosen, [held], k), 4),
                "held_out_default": round(scores.mean(DEFAULT, [held], k), 4),
                "held_out_bm25": round(scores.mean("bm25", [held], k), 4),
                "held_out_rrf": round(scores.mean("rrf", [held], k), 4),
                "deltas": deltas,
            }
        )
    counted = [(t, v) for t, v in pairs if abs(t) >= 0.005]
    agree = sum((t > 0) == (v > 0) for t, v in counted)
    selected = [r for f in folds for r in scores.rows(f["chosen"], [f["held_out"]])]
    return {
        "k": k,
        "folds": folds,
        "sign_agreement": {"agree": agree, "counted": len(counted), "pairs": len(pairs)},
        "pearson": _pearson(pairs),
        "selected_held_out": locomo.summarize(selected)["all"],
    }


def _pearson(pairs: Sequence[tuple[float, float]]) -> float | None:
    xs, ys = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    if len(pairs) < 3 or xs.std() == 0 or ys.std() == 0:
        return None
    return round(float(np.corrcoef(xs, ys)[0, 1]), 3)


def run(
    data: Dataset,
    variants: Sequence[Variant] = VARIANTS,
    *,
    profile: str = "minilm",
    track: Tracker = quiet,
) -> dict[str, Any]:
    """The whole protocol's JSON report."""
    scores, counters = read_variants(data, variants, profile=profile, track=track)
    read_baselines(data, scores, profile=profile, track=track)
    samples = [c.sample_id for c in data.conversations]
    readings = [v.name for v in variants] + ["bm25", "rrf"]
    per_reading = {
        name: {
            **locomo.summarize(scores.rows(name, samples)),
            "by_conversation": {s: scores.mean(name, [s]) for s in samples},
        }
        for name in readings
    }
    return {
        "protocol": "locomo-leave-one-conversation-out",
        "conversations": samples,
        "questions": sum(len(c.questions) for c in data.conversations),
        "profile": profile,
        "ingest": counters,
        "variants": {v.name: v.summary for v in variants},
        "readings": per_reading,
        "leave_one_out": leave_one_out(scores, samples, [v.name for v in variants]),
    }


def format_report(doc: dict[str, Any]) -> str:
    """The report as markdown tables: every reading pooled, then the folds, then the deltas."""
    ks = "".join(f" R@{k} |" for k in KS)
    out = [
        f"LoCoMo dev, {len(doc['conversations'])} conversations, {doc['questions']} questions, "
        f"turn-level recall, read as the hooks read unless named",
        "",
        f"| reading |{ks} what |",
        "|---|" + "---:|" * len(KS) + "---|",
    ]
    for name, r in doc["readings"].items():
        cells = "".join(f" {r['all']['turn_recall'][str(k)]:.3f} |" for k in KS)
        what = doc["variants"].get(name, {"bm25": "plain BM25", "rrf": "naive RRF"}.get(name))
        out.append(f"| {name} |{cells} {what} |")
    loo = doc["leave_one_out"]
    k = loo["k"]
    cats = locomo.CATEGORIES
    out += [
        "",
        f"R@{k} per category:",
        "",
        "| reading | " + " | ".join(cats.values()) + " |",
        "|---|" + "---:|" * len(cats),
    ]
    for name, r in doc["readings"].items():
        blocks = [r["by_category"][str(c)]["turn_recall"][str(k)] for c in cats]
        out.append(
            f"| {name} | " + " | ".join("-" if b is None else f"{b:.3f}" for b in blocks) + " |"
        )
    out += [
        "",
        f"Leave one conversation out, chosen by R@{k} on the other conversations:",
        "",
        f"| held out | chosen | tune R@{k} | held-out R@{k} | default | BM25 | RRF |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for f in loo["folds"]:
        out.append(
            f"| {f['held_out']} | {f['chosen']} | {f['tune']:.3f} | {f['held_out_chosen']:.3f} "
            f"| {f['held_out_default']:.3f} | {f['held_out_bm25']:.3f} | {f['held_out_rrf']:.3f} |"
        )
    sel = loo["selected_held_out"]["turn_recall"]
    out.append(
        "| all, as chosen | | | " + " / ".join(f"{sel[str(k)]:.3f}" for k in KS) + " | | | |"
    )
    variants = [v for v in doc["variants"] if v != DEFAULT]
    out += [
        "",
        f"Change against `{DEFAULT}` in R@{k}, tune side -> held-out side, per fold:",
        "",
        "| variant | " + " | ".join(f["held_out"] for f in loo["folds"]) + " |",
        "|---|" + "---|" * len(loo["folds"]),
    ]
    for v in variants:
        cells = " | ".join(
            f"{f['deltas'][v]['tune']:+.3f} -> {f['deltas'][v]['validation']:+.3f}"
            for f in loo["folds"]
        )
        out.append(f"| {v} | {cells} |")
    agree = loo["sign_agreement"]
    out += [
        "",
        f"Sign agreement (tune changes of at least 0.005): {agree['agree']}/{agree['counted']} "
        f"of {agree['pairs']}; Pearson r of the changes: {loo['pearson']}",
    ]
    return "\n".join(out)
