"""Issue 35's guard: on the validation side of the dev sets (scripts/eval_quality.py's split by
project), hybrid recall is never below its best single lane on any kind. Built with the real
MiniLM, read passive as the runner reads; a change to fusion, scoring or the lanes that makes
hybrid trail the dense or the lexical lane on some kind fails here, with the kind named."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from conftest import load_script
from zmem.evaluation import harness

ROOT = Path(__file__).resolve().parents[1]
MIN_ITEMS = 5  # a kind with fewer items moves a whole 0.2 on one query: not a measure


@pytest.fixture(scope="module")
def model_data(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("model-data")


@pytest.mark.parametrize("name", ["coding", "paraphrase"])
def test_hybrid_is_never_below_its_best_lane_on_the_validation_side(
    name, model_data, tmp_path, monkeypatch
):
    monkeypatch.setenv("ZMEM_DATA", str(model_data))  # one model build for both sets
    quality = load_script("eval_quality")
    corpus, gold_path, tune = quality.SETS[name]
    reports = harness.run_modes(tmp_path / "store.sqlite", gold_path, quality.K, corpus,
                                profile="minilm")  # fmt: skip
    namespaces = {i.id: i.namespace for i in harness.gold.load(gold_path)}
    hits: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for mode, report in reports.items():
        for row in report["per_item"]:
            if row["expect"] and quality.side_of(namespaces[row["id"]], tune) == "validation":
                hits[row["bucket"]][mode].append(bool(row["hit"]))
    assert hits, "no validation item was scored"
    behind = {}
    for kind, per_mode in hits.items():
        if len(per_mode["hybrid"]) < MIN_ITEMS:
            continue
        rate = {mode: sum(xs) / len(xs) for mode, xs in per_mode.items()}
        best = max(rate["lexical"], rate["dense"])
        if rate["hybrid"] < best:
            behind[kind] = (rate["hybrid"], rate["lexical"], rate["dense"])
    assert not behind, f"{name}: hybrid below its best lane (hybrid, lexical, dense): {behind}"
