"""Running a gold set through the real recall pipeline and scoring it: hit_at_k, mrr,
as_of_accuracy and injection_omit_rate, per bucket and per item. Evaluation is passive and
writes nothing (telemetry off); link expansion and MMR are presentation, so they are off too."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import fmean
from typing import Any

from zmem.errors import UsageError
from zmem.evaluation.gold import GoldItem
from zmem.retrieval.fusion import DEFAULT_WEIGHTS, Weights
from zmem.retrieval.request import RecallRequest
from zmem.store import MemoryStore

MODES = ("lexical", "dense", "hybrid")
# Gold items are scored without MMR by default (a diversity pass reorders near-duplicates the
# gold set may expect together); scripts/eval_quality.py --mmr measures what the hooks do.
MMR = False


def _mean(values: Sequence[float]) -> float | None:
    return round(fmean(values), 6) if values else None


def run_item(
    store: MemoryStore,
    item: GoldItem,
    key_of: Mapping[str, str],
    k: int,
    weights: Weights | None = None,
    mode: str = "lexical",
) -> dict[str, Any]:
    """One gold item through MemoryStore.read, scored against its expect/forbid keys.
    mode: "lexical" (the default: model-absent by construction), "dense" or "hybrid"."""
    report = store.read(
        RecallRequest(
            query=item.query,
            namespace=item.namespace,
            limit=k,
            include_global=item.include_global,
            as_of=item.as_of,
            # Explicit items take the explicit path so change-intent unfold can fire (it needs
            # link_hops >= 1); link_budget=0 keeps link expansion out of the measurement.
            passive=not item.explicit,
            link_hops=1 if item.explicit else 0,
            link_budget=0,
            no_mmr=not MMR,
            telemetry=False,
            weights=weights or DEFAULT_WEIGHTS,
            hybrid=mode != "lexical",
            dense_only=mode == "dense",
        )
    )
    returned = [key_of.get(h.id, "?") for h in report.hits]
    # A row's rank is its place in the list as presented (global rows merged in by relevance):
    # what a reader of the first k lines sees. Link neighbours and lineage rows are extras.
    tier_rank: dict[str, int] = {}
    for place, h in enumerate((h for h in report.hits if not h.extra), start=1):
        tier_rank.setdefault(key_of.get(h.id, "?"), place)
    unfolded = [key_of.get(h.id, "?") for h in report.hits if h.unfold_of is not None]
    visible = [key for key, rank in tier_rank.items() if rank <= k] + unfolded
    if item.expect:
        ok = all if item.require == "all" else any
        hit = ok(key in visible for key in item.expect)
        ranks = [tier_rank[key] for key in item.expect if key in tier_rank]
        first = min(ranks) if ranks else None
    else:
        hit, first = True, None
    leaked = [key for key in item.forbid if key in returned]
    return {
        "id": item.id,
        "bucket": item.bucket,
        "query": item.query,
        "returned": returned,
        "expect": list(item.expect),
        "forbid": list(item.forbid),
        "first_rank": first,
        "hit": hit,
        "leaked": leaked,
        "passed": hit and not leaked,
        "omitted": report.omitted,
    }


def score(results: Sequence[dict[str, Any]], items: Sequence[GoldItem], k: int) -> dict[str, Any]:
    by_id = {i.id: i for i in items}

    def summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
        expecting = [r for r in rows if by_id[r["id"]].expect]
        return {
            "items": len(rows),
            "hit_at_k": _mean([float(r["hit"]) for r in expecting]),
            "mrr": _mean(
                [
                    1.0 / r["first_rank"] if r["first_rank"] and r["first_rank"] <= k else 0.0
                    for r in expecting
                ]
            ),
            "pass_rate": _mean([float(r["passed"]) for r in rows]),
        }

    overall = summary(results)
    dated = [r for r in results if by_id[r["id"]].as_of is not None]
    injection = [r for r in results if r["bucket"] == "injection"]
    buckets = {}
    for bucket in dict.fromkeys(r["bucket"] for r in results):
        buckets[bucket] = summary([r for r in results if r["bucket"] == bucket])
    return {
        "k": k,
        "items": overall["items"],
        "hit_at_k": overall["hit_at_k"],
        "mrr": overall["mrr"],
        "pass_rate": overall["pass_rate"],
        "as_of_accuracy": _mean([float(r["passed"]) for r in dated]),
        "injection_omit_rate": _mean([float(not r["leaked"]) for r in injection]),
        "buckets": buckets,
        "per_item": list(results),
    }


def evaluate(
    store: MemoryStore,
    items: Sequence[GoldItem],
    ids: Mapping[str, str],
    k: int = 5,
    weights: Weights | None = None,
    mode: str = "lexical",
) -> dict[str, Any]:
    """Every item, scored. ids maps fixture keys to memory ids; a key the store lacks is an
    operational error naming the item, not a miss."""
    if k < 1:
        raise UsageError("--k must be at least 1")
    if mode not in MODES:
        raise UsageError(f"--mode must be one of {', '.join(MODES)}")
    for item in items:
        missing = [key for key in (*item.expect, *item.forbid) if key not in ids]
        if missing:
            raise UsageError(f"gold item {item.id} names rows this store lacks: {missing}")
    key_of = {mid: key for key, mid in ids.items()}
    results = [run_item(store, item, key_of, k, weights, mode) for item in items]
    return score(results, items, k)
