"""The judgement evaluation (zmem.evaluation.judgement, scripts/eval_judgement.py): pairs go
through the real MemoryStore.add on fresh stores and the outcome is read back as folded,
flagged or kept apart; the scores count what they claim; the kept pair set is whole."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from zmem import MemoryStore
from zmem.evaluation import judgement

ROOT = Path(__file__).resolve().parents[1]


def _pair(id_: str, a: str, b: str, label: str, family: str = "f") -> judgement.Pair:
    return judgement.Pair(id_, a, b, label, family)


def test_decisions_come_from_the_write_path(store_path):
    pairs = [
        _pair("same", "Run make lint before every commit", "Run make lint before every commit",
              "duplicate"),
        _pair("flip", "Always squash commits before merging to main",
              "Never squash commits before merging to main", "contradiction"),
        _pair("apart", "The staging database listens on port 5433",
              "Release notes live in docs/changes.md", "distinct"),
    ]  # fmt: skip
    results = dict((p.id, d.decided) for p, d in judgement.run(pairs, MemoryStore.open))
    assert results == {"same": "duplicate", "flip": "contradiction", "apart": "distinct"}
    assert not store_path.exists()  # every pair on a store of its own, never the user's


def test_scores_count_what_they_claim():
    rows = [
        (_pair("1", "a", "b", "duplicate", "x"), "duplicate"),
        (_pair("2", "a", "b", "duplicate", "x"), "distinct"),
        (_pair("3", "a", "b", "contradiction", "y"), "contradiction"),
        (_pair("4", "a", "b", "distinct", "y"), "contradiction"),
        (_pair("5", "a", "b", "distinct", "y"), "duplicate"),
        (_pair("6", "a", "b", "contradiction", "y"), "duplicate"),
    ]
    s = judgement.score(rows, lambda p: p.family)
    assert set(s) == {"all", "x", "y"} and s["x"].pairs == 2 and s["y"].pairs == 4
    total = s["all"]
    assert total.flag_precision == 0.5 and total.flag_recall == 0.5
    assert total.fold_recall == 0.5 and total.wrong_folds == 2
    assert total.accuracy == pytest.approx(2 / 6)
    assert total.fold_precision == pytest.approx(1 / 3)


def test_asked_pairs_count_as_covered_and_distinct_asks_are_counted():
    asked = judgement.Outcome("distinct", "same")
    rows = [
        (_pair("1", "a", "b", "duplicate"), asked),
        (_pair("2", "a", "b", "contradiction"), judgement.Outcome("contradiction", None)),
        (_pair("3", "a", "b", "contradiction"), judgement.Outcome("distinct", None)),
        (_pair("4", "a", "b", "distinct"), asked),
        (_pair("5", "a", "b", "distinct"), judgement.Outcome("distinct", None)),
    ]
    total = judgement.score(rows, lambda p: p.family)["all"]
    assert total.coverage == pytest.approx(2 / 3) and total.distinct_asked == 0.5
    assert total.answered_accuracy is None  # no scripted answerer ran


def test_a_scripted_answerer_ends_each_asked_pair_as_labelled(tmp_path, monkeypatch):
    """Through the real add and resolve: a pair the judge asks about, answered by its label."""
    a = "Run the integration tests against a fresh database container before merging feature work"
    pairs = [
        _pair("d", a, a + " to main daily", "duplicate"),
        _pair("c", a, "Do not r" + a[1:] + " on weekend fridays", "contradiction"),
        _pair("x", a, a + " to main daily", "distinct"),
    ]
    got = dict((p.id, o) for p, o in judgement.run(pairs, MemoryStore.open, answer=True))
    assert {k: o.asked for k, o in got.items()} == {"d": "same", "c": "contradicts", "x": "same"}
    assert {k: o.answered for k, o in got.items()} == {
        "d": "duplicate", "c": "contradiction", "x": "distinct"}  # fmt: skip


def test_a_bad_label_is_refused(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps({"id": "1", "a": "x", "b": "y", "label": "same", "family": "f"}))
    with pytest.raises(ValueError, match="label must be one of"):
        judgement.load(path)


def test_the_kept_pair_set_is_whole():
    """eval/judge_pairs.jsonl: 240 pairs written blind, every family present, both sides of
    the split populated (so a rule chosen on one side can be reported on the other)."""
    pairs = judgement.load(ROOT / "eval" / "judge_pairs.jsonl")
    assert len(pairs) == 240 and len({p.id for p in pairs}) == 240
    assert Counter(p.label for p in pairs) == {"distinct": 97, "duplicate": 78, "contradiction": 65}
    sides = Counter((p.side, p.label) for p in pairs)
    assert all(sides[(side, label)] >= 20 for side in ("tune", "validation")
               for label in judgement.LABELS)  # fmt: skip
