"""Runs a gold file from the public-corpus adapters through ZMem: each haystack goes into a fresh
throwaway store under a pinned clock, each question is recalled passively, and the ranked corpus
ids are scored with LongMemEval's official metrics (recall_any, recall_all, ndcg_any @k)."""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from zmem import config
from zmem.errors import ZMemError
from zmem.evaluation.adapters import KS, retrieval_metrics, turn_to_session_metrics
from zmem.evaluation.environment import restored_env
from zmem.evaluation.progress import Tracker, quiet
from zmem.models import MAX_CONTENT_CHARS
from zmem.retrieval.request import RecallRequest
from zmem.store import MemoryStore

MODES = ("lexical", "hybrid")
NAMESPACE = "eval:haystack"
SOURCE_PREFIX = "eval:"
# The passive surface trims hits to the injection token budget (1500 by default); scoring @50
# needs all `limit` hits, so the throwaway stores lift the budget.
UNBOUNDED_BUDGET = 10**9


class _Haystack:
    """One corpus ingested into its own store file, and which corpus ids each row carries."""

    def __init__(self, path: Path, corpus: Sequence[dict[str, Any]], stats: dict[str, int]):
        self.corpus = corpus
        self.path = path
        settings = dataclasses.replace(
            config.load_settings(store_path=path), inject_token_budget=UNBOUNDED_BUDGET
        )
        self.store = MemoryStore.open(path, settings=settings)
        # memory id -> corpus ids, keeper first: dedup-on-write folds an identical document
        # into an earlier row, and the folded id must stay scorable through its keeper.
        self.ids: dict[str, list[str]] = {}
        for doc in corpus:
            self._add(doc, stats)
        stats["corpora"] += 1

    def _add(self, doc: dict[str, Any], stats: dict[str, int]) -> None:
        stats["documents"] += 1
        text = doc["text"]
        if not text.strip():
            stats["empty"] += 1  # e.g. a LongMemEval session without user turns: unfindable
            return
        if len(text) > MAX_CONTENT_CHARS:
            stats["truncated"] += 1
            text = text[:MAX_CONTENT_CHARS]
        os.environ["ZMEM_TEST_NOW"] = doc["date"]
        try:
            result = self.store.add(
                text,
                namespace=NAMESPACE,
                type="fact",
                signal="user",
                source_ref=SOURCE_PREFIX + doc["id"],
            )
        except ZMemError:
            stats["refused"] += 1
            return
        if result.result == "deduped":
            stats["folded"] += 1
        self.ids.setdefault(result.id, []).append(doc["id"])

    def ranked(self, query: str, when: str, limit: int, hybrid: bool) -> tuple[list[str], int]:
        """Corpus ids best first, and how many rows the passive surface withheld."""
        os.environ["ZMEM_TEST_NOW"] = when
        try:
            report = self.store.read(
                RecallRequest(
                    query=query,
                    namespace=NAMESPACE,
                    limit=limit,
                    passive=True,
                    link_hops=0,
                    no_mmr=True,
                    hybrid=hybrid,
                )
            )
        except ZMemError:
            return [], 0
        ranked: list[str] = []
        for hit in report.hits:
            for corpus_id in self.ids.get(hit.id, ()):
                if corpus_id not in ranked:
                    ranked.append(corpus_id)
        return ranked, report.omitted

    def close(self) -> None:
        self.store.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)


def _mean(rows: list[dict[str, float]]) -> dict[str, float]:
    if not rows:
        return {}
    return {key: round(sum(r[key] for r in rows) / len(rows), 6) for key in rows[0]}


def _group(record: dict[str, Any]) -> str:
    meta = record.get("metadata") or {}
    value = meta.get("question_type", meta.get("category"))
    return "none" if value is None else str(value)


def evaluate(
    records: Iterable[dict[str, Any]],
    *,
    mode: str = "lexical",
    limit: int = 50,
    ks: Sequence[int] = KS,
    total: int | None = None,
    track: Tracker = quiet,
) -> dict[str, Any]:
    """Score every gold record and average per level (the record's granularity; a LongMemEval
    turn run is also scored at session level, as the official code does) and per question type
    or category. Consecutive records with the same corpus share one ingestion: passive recall
    leaves the ranking inputs (retrieval_count) untouched, so sharing cannot leak."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}")
    if limit < max(ks):
        raise ValueError(f"limit {limit} is below the largest k ({max(ks)})")
    stats = dict.fromkeys(
        ("corpora", "documents", "empty", "truncated", "refused", "folded", "omitted"), 0
    )
    levels: dict[str, list[dict[str, float]]] = {}
    groups: dict[str, dict[str, list[dict[str, float]]]] = {}
    info: dict[str, str] = {}
    haystack: _Haystack | None = None
    with (
        tempfile.TemporaryDirectory(prefix="zmem-adapter-eval-") as tmp,
        restored_env("ZMEM_TEST_NOW"),
    ):
        try:
            for n, record in enumerate(track(records, "evaluating", total=total)):
                corpus = record["corpus"]
                if haystack is None or haystack.corpus != corpus:
                    if haystack is not None:
                        haystack.close()
                    haystack = _Haystack(Path(tmp) / f"h{n}.sqlite", corpus, stats)
                when = record.get("query_date") or max((d["date"] for d in corpus), default="")
                ranked, omitted = haystack.ranked(
                    record["query"], when or "1970-01-01T00:00:00Z", limit, mode == "hybrid"
                )
                stats["omitted"] += omitted
                info.setdefault("dataset", record.get("dataset", ""))
                info.setdefault("granularity", record.get("granularity", ""))
                scored = _score(record, ranked, ks)
                group = groups.setdefault(_group(record), {})
                for level, values in scored.items():
                    levels.setdefault(level, []).append(values)
                    group.setdefault(level, []).append(values)
        finally:
            if haystack is not None:
                haystack.close()
    first = next(iter(levels.values()), [])
    return {
        **info,
        "mode": mode,
        "limit": limit,
        "questions": len(first),
        "metrics": {level: _mean(rows) for level, rows in sorted(levels.items())},
        "by_group": {
            name: {
                "questions": len(next(iter(g.values()))),
                "metrics": {level: _mean(rows) for level, rows in sorted(g.items())},
            }
            for name, g in sorted(groups.items())
        },
        "ingest": stats,
    }


def _score(
    record: dict[str, Any], ranked: list[str], ks: Sequence[int]
) -> dict[str, dict[str, float]]:
    corpus_ids = [d["id"] for d in record["corpus"]]
    gold = record["gold"]
    level = record.get("granularity") or "turn"
    out = {level: retrieval_metrics(ranked, gold, ks, corpus_ids)}
    if record.get("dataset") == "longmemeval" and level == "turn":
        out["session"] = turn_to_session_metrics(ranked, gold, corpus_ids, ks)
    return out
