"""The eval_runner entry: pin the run (fake embeddings, the fixture's clock, default knobs),
open or build the fixture store, run the gold set and write the report. Shared by
scripts/eval_runner.py and the tests."""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from zmem import config
from zmem.errors import UsageError
from zmem.evaluation import fixture, gold, runner
from zmem.evaluation.environment import restored_env
from zmem.retrieval.fusion import Weights
from zmem.store import MemoryStore

EVAL_DIR = Path(__file__).resolve().parents[3] / "eval"
REPO_GOLD = EVAL_DIR / "gold.jsonl"
PARAPHRASE_CORPUS = EVAL_DIR / "paraphrase_corpus.jsonl"
PARAPHRASE_GOLD = EVAL_DIR / "paraphrase_gold.jsonl"
# The labelled dev sets and their fixed split by project: name -> (corpus, gold, the tune-side
# namespaces). A project's rows and queries are never on both sides; eval_quality.py reports
# by it and train_ranker.py fits on its tune side.
DEV_SETS: dict[str, tuple[Path, Path, set[str]]] = {
    "coding": (
        EVAL_DIR / "coding_corpus.jsonl",
        EVAL_DIR / "coding_gold.jsonl",
        {"project:ferrox", "project:relay-mesh", "project:tidewater", "project:platform-infra"},
    ),
    "paraphrase": (PARAPHRASE_CORPUS, PARAPHRASE_GOLD, {"project:billing-api"}),
}
# The settings a run may not inherit from the operator's shell: they would change the ranking.
_ISOLATED = ("ZMEM_INJECT_FLOOR_PROMPT", "ZMEM_MMR_LAMBDA", "ZMEM_UNFOLD_TOP_K",
             "ZMEM_UNFOLD_MAX_HOPS", "ZMEM_UNFOLD_BUDGET", "ZMEM_INJECT_TOKEN_BUDGET",
             "ZMEM_LINK_THRESHOLD", "ZMEM_CAPTURE_MODE", "ZMEM_STORE", "ZMEM_DATA")  # fmt: skip


def retrieval_constant(name: str) -> tuple[ModuleType, str]:
    """("mmr.SIMILARITY_FLOOR") -> (zmem.retrieval.mmr, "SIMILARITY_FLOOR"); AttributeError
    (naming it) when there is no such constant."""
    module_name, _, attr = name.rpartition(".")
    try:
        module = importlib.import_module(f"zmem.retrieval.{module_name}")
    except ImportError:
        raise AttributeError(f"zmem.retrieval.{name} does not exist") from None
    if not module_name or not hasattr(module, attr):
        raise AttributeError(f"zmem.retrieval.{name} does not exist")
    return module, attr


@contextmanager
def retrieval_constants(pairs: Sequence[tuple[str, Any]]) -> Iterator[None]:
    """zmem.retrieval constants set for the block and put back after: how a dev run reads with
    a value it is weighing (eval_quality.py --param, the dev protocol's variants)."""
    saved = []
    try:
        for name, value in pairs:
            module, attr = retrieval_constant(name)
            saved.append((module, attr, getattr(module, attr)))
            setattr(module, attr, value)
        yield
    finally:
        for module, attr, value in reversed(saved):
            setattr(module, attr, value)


def run(
    store_path: Path,
    gold_path: Path,
    k: int,
    corpus_path: Path | None = None,
    *,
    profile: str = "fake",
    mode: str = "lexical",
) -> dict[str, Any]:
    """The report for gold_path over the fixture store at store_path (built on first use), or
    over a store built from corpus_path (a dev set, with or without history)."""
    report = run_modes(store_path, gold_path, k, corpus_path, profile=profile, modes=(mode,))[mode]
    report["settings"] = {
        "store": str(store_path),
        "gold": str(gold_path),
        "corpus": str(corpus_path) if corpus_path else "fixture",
        "profile": profile,
        "mode": mode,
        "clock": fixture.QUERY_AT,
        "passive": True,
        "link_hops": 0,
        "no_mmr": not runner.MMR,
    }
    return report


def run_modes(
    store_path: Path,
    gold_path: Path,
    k: int,
    corpus_path: Path | None,
    *,
    profile: str,
    modes: tuple[str, ...] = runner.MODES,
    include_global: bool = False,
    weights: Weights | None = None,
) -> dict[str, dict[str, Any]]:
    """One store built once (corpus, or the fixture), every gold item recalled in each mode:
    {mode: report}, with the shipped composite weights unless `weights` is given. Reads are
    passive and write no telemetry, so the modes see one store."""
    items = gold.load(gold_path)
    if include_global:  # every item as the prompt hook asks: with the global tier
        items = [dataclasses.replace(i, include_global=True) for i in items]
    with corpus_store(store_path, corpus_path, profile=profile) as (store, ids):
        return {
            mode: runner.evaluate(store, items, ids, k, weights=weights, mode=mode)
            for mode in modes
        }


@contextmanager
def corpus_store(
    store_path: Path, corpus_path: Path | None, *, profile: str
) -> Iterator[tuple[MemoryStore, dict[str, str]]]:
    """The store built from corpus_path (or the fixture) at store_path, open at the gold set's
    query clock, with key -> memory id; the operator's settings and clock come back on exit."""
    rows = fixture.load_corpus(corpus_path) if corpus_path is not None else None
    cleared = {name: os.environ.pop(name) for name in _ISOLATED if name in os.environ}
    try:
        with restored_env(ZMEM_EMBED_PROFILE=profile, ZMEM_TEST_NOW=fixture.BUILD_AT):
            store, ids = _open(store_path, rows)
            try:
                os.environ["ZMEM_TEST_NOW"] = fixture.QUERY_AT
                yield store, ids
            finally:
                store.close()
    finally:
        os.environ.update(cleared)


def _open(path: Path, rows: list[fixture.CorpusRow] | None) -> tuple[MemoryStore, dict[str, str]]:
    if rows is None:
        return fixture.open_fixture(path)
    if path.exists():
        raise UsageError(f"{path} already exists; a corpus run needs a new, throwaway path")
    store = MemoryStore.open(settings=config.load_settings(store_path=path))
    try:
        return store, fixture.build_corpus(store, rows)
    except BaseException:
        store.close()
        raise


def write(report: dict[str, Any], json_out: Path | None) -> str:
    text = json.dumps(report, indent=2, sort_keys=True)
    if json_out is not None:
        json_out.write_text(text + "\n", encoding="utf-8")
    return text
