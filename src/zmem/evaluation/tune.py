"""tune-weights: score the shipped composite weights on a gold set, hill-climb a small
deterministic neighbourhood (move 0.05 between two weights at a time) and report the best
vector found. It only reads; applying a suggestion is a manual edit of retrieval/fusion.py."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields, replace
from itertools import permutations
from typing import Any

from zmem.evaluation import fixture, runner
from zmem.evaluation.gold import GoldItem
from zmem.evaluation.progress import Tracker, quiet
from zmem.retrieval.fusion import DEFAULT_WEIGHTS, Weights
from zmem.store import MemoryStore

STEP = 0.05
MAX_ROUNDS = 8
_NAMES = [f.name for f in fields(Weights)]


def _metrics(report: dict[str, Any]) -> dict[str, Any]:
    keep = ("hit_at_k", "mrr", "pass_rate", "as_of_accuracy", "injection_omit_rate")
    return {k: report[k] for k in keep}


def _objective(m: dict[str, Any]) -> tuple[float, float, float]:
    # Hits first, then how early they come, then whether forbidden rows stayed out.
    return (m["hit_at_k"] or 0.0, m["mrr"] or 0.0, m["pass_rate"] or 0.0)


def _neighbours(w: Weights) -> list[Weights]:
    out = []
    for src, dst in permutations(_NAMES, 2):
        if getattr(w, src) >= STEP - 1e-9:
            moved = {
                src: round(getattr(w, src) - STEP, 2),
                dst: round(getattr(w, dst) + STEP, 2),
            }
            out.append(replace(w, **moved))
    return out


def tune(
    store: MemoryStore, items: Sequence[GoldItem], k: int = 5, track: Tracker = quiet
) -> dict[str, Any]:
    ids = {key: mid for mid, key in fixture.key_map(store).items()}

    def score(w: Weights) -> dict[str, Any]:
        return _metrics(runner.evaluate(store, items, ids, k, weights=w))

    current = score(DEFAULT_WEIGHTS)
    best, best_m, evaluated = DEFAULT_WEIGHTS, current, 1
    for _ in range(MAX_ROUNDS):
        improved = False
        for candidate in track(_neighbours(best), "tune-weights"):
            m = score(candidate)
            evaluated += 1
            if _objective(m) > _objective(best_m):
                best, best_m, improved = candidate, m, True
        if not improved:
            break
    return {
        "k": k,
        "items": len(items),
        "evaluated": evaluated,
        "current": {"weights": DEFAULT_WEIGHTS.as_dict(), "metrics": current},
        "suggested": {"weights": best.as_dict(), "metrics": best_m},
        "improved": best != DEFAULT_WEIGHTS,
        "apply": "edit the Weights defaults in src/zmem/retrieval/fusion.py (they sum to 1.0)",
    }
