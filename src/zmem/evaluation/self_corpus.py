"""The self-corpus probe: measure recall on the operator's own store (a copy) with probes
templated deterministically from its live rows (first sentence, distinctive words, an entity
name), each expected to bring its source row back. Fully passive: the store stays
byte-identical, the report is the only write."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from statistics import fmean
from typing import Any

from zmem import config
from zmem.errors import UsageError
from zmem.evaluation.progress import Tracker, quiet
from zmem.models import Memory
from zmem.retrieval.query import query_terms
from zmem.retrieval.request import RecallRequest
from zmem.retrieval.scoring import passive_block
from zmem.store import MemoryStore

FIRST_SENTENCE_WORDS = 12
DISTINCTIVE_WORDS = 4
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def check_store_path(path: Path) -> Path:
    """Refuse the operator's live store and paths that do not exist, before opening anything."""
    if not path.exists():
        raise UsageError(f"{path} does not exist; probe a copy of a store (zmem backup, cp)")
    if path.resolve() == config.load_settings().store_path.resolve():
        raise UsageError(
            f"{path} is the live default store; probe a copy instead "
            "(copy the file while no session writes, then pass the copy)"
        )
    return path


def probes(m: Memory, entity_names: Sequence[str]) -> list[tuple[str, str]]:
    """(kind, query) pairs for one row; deterministic, no model."""
    out = []
    sentence = _SENTENCE_END.split(m.content.strip(), maxsplit=1)[0]
    out.append(("first_sentence", " ".join(sentence.split()[:FIRST_SENTENCE_WORDS])))
    terms = query_terms(m.content)
    # Longest words first (ties alphabetical): long words are the rare, specific ones.
    distinctive = sorted(terms, key=lambda t: (-len(t), t))[:DISTINCTIVE_WORDS]
    if distinctive:
        out.append(("distinctive_tokens", " ".join(sorted(distinctive))))
    if entity_names:
        out.append(("entity_alias", sorted(entity_names)[0]))
    return [(kind, q) for kind, q in out if q.strip()]


def run(path: Path, ks: Sequence[int], limit: int, track: Tracker = quiet) -> dict[str, Any]:
    check_store_path(path)
    if not ks or min(ks) < 1:
        raise UsageError("--k takes positive cut-offs, e.g. 5,20")
    if limit < 1:
        raise UsageError("--limit must be at least 1")
    settings = config.load_settings(store_path=path)
    results: list[dict[str, Any]] = []
    with MemoryStore.open(settings=settings) as store:
        rows = sorted(store.list(limit=None), key=lambda m: m.rowid)
        # A passive recall can never show a row below the floor or one the injection/web filter
        # drops: probing those would measure the safety rules, not retrieval.
        eligible = [
            m
            for m in rows
            if m.confidence >= settings.inject_floor_prompt and passive_block(m) is None
        ]
        for m in track(eligible[:limit], "probing"):
            names = [e.name for e in store.entities_of(m.id)]
            for kind, query in probes(m, names):
                report = store.read(
                    RecallRequest(
                        query=query,
                        namespace=m.namespace,
                        limit=max(ks),
                        passive=True,
                        link_hops=0,
                        no_mmr=True,
                        telemetry=False,
                    )
                )
                ranked = [h.id for h in report.hits]
                rank = ranked.index(m.id) + 1 if m.id in ranked else None
                results.append({"id": m.id, "kind": kind, "query": query, "rank": rank})

    def hit(rows: Sequence[dict[str, Any]], k: int) -> float | None:
        return (
            round(fmean(r["rank"] is not None and r["rank"] <= k for r in rows), 6)
            if rows
            else None
        )

    def mrr(rows: Sequence[dict[str, Any]]) -> float | None:
        return round(fmean(1 / r["rank"] if r["rank"] else 0.0 for r in rows), 6) if rows else None

    kinds = sorted({r["kind"] for r in results})
    return {
        "store": str(path),
        "rows_probed": len({r["id"] for r in results}),
        "rows_ineligible": len(rows) - len(eligible),
        "probes": len(results),
        "k": list(ks),
        "hit_at_k": {str(k): hit(results, k) for k in ks},
        "mrr": mrr(results),
        "by_kind": {
            kind: {
                "probes": sum(r["kind"] == kind for r in results),
                "hit_at_k": {str(k): hit([r for r in results if r["kind"] == kind], k) for k in ks},
                "mrr": mrr([r for r in results if r["kind"] == kind]),
            }
            for kind in kinds
        },
        "per_probe": results,
    }
