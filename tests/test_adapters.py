"""Public-corpus adapters: the toy fixtures convert byte for byte (through the functions and the
script), a missing corpus skips cleanly, the metrics match hand-computed values of LongMemEval's
official formulas, and the evaluator scores the toys end to end through a real store."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from zmem.evaluation import adapters
from zmem.evaluation.adapter_eval import evaluate
from zmem.evaluation.adapters import (
    convert,
    gold_line,
    load_json,
    ndcg_any,
    recall_all,
    recall_any,
    retrieval_metrics,
    turn_to_session_metrics,
)
from zmem.evaluation.locomo_format import parse_evidence, session_date_iso

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "adapters"
SCRIPT = ROOT / "scripts" / "eval_adapters.py"
LME = FIXTURES / "longmemeval_toy.json"
LOCOMO = FIXTURES / "locomo_toy.json"

CASES = [
    ("longmemeval", LME, "session", "longmemeval_toy.session.expected.jsonl"),
    ("longmemeval", LME, "turn", "longmemeval_toy.turn.expected.jsonl"),
    ("locomo", LOCOMO, None, "locomo_toy.expected.jsonl"),
]


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120
    )


# ---- conversion --------------------------------------------------------------------------


@pytest.mark.parametrize(("adapter", "source", "granularity", "expected"), CASES)
def test_toy_converts_byte_for_byte_via_function(adapter, source, granularity, expected):
    conversion = convert(adapter, load_json(source), granularity or "session")
    text = "".join(gold_line(r) for r in conversion.records)
    assert text.encode("utf-8") == (FIXTURES / expected).read_bytes()


@pytest.mark.parametrize(("adapter", "source", "granularity", "expected"), CASES)
def test_toy_converts_byte_for_byte_via_script(tmp_path, adapter, source, granularity, expected):
    out = tmp_path / "gold.jsonl"
    args = ["--adapter", adapter, "--input", str(source), "--out", str(out)]
    if granularity:
        args += ["--granularity", granularity]
    done = run_script(*args)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == (FIXTURES / expected).read_bytes()
    assert done.stdout.startswith("wrote 2 questions")


def test_longmemeval_protocol_on_the_toy():
    data = load_json(LME)
    session = convert("longmemeval", data, "session")
    # _abs questions are skipped; the one whose second answer session has only an assistant
    # has_answer stays, with that session renamed noans (not gold).
    assert session.skipped == {"abstention": ["toy_q002_abs"]}
    q3 = session.records[1]
    assert [d["id"] for d in q3["corpus"]] == [
        "answer_toy003_1",
        "sharegpt_toyB2_3",
        "noans_toy003_2",
    ]
    assert q3["gold"] == ["answer_toy003_1"]
    # Keys are the user turns only: assistant text never enters a document.
    assert all("Zagreb" not in d["text"] for d in q3["corpus"])
    turn = convert("longmemeval", data, "turn").records
    # Turn ids count every turn of the session (1-based), user and assistant alike.
    assert [d["id"] for d in turn[0]["corpus"]] == [
        "sharegpt_toyA1_0_1",
        "answer_toy001_1_1",
        "noans_toy001_1_3",
        "ultrachat_toy77_1",
    ]
    assert turn[1]["gold"] == ["answer_toy003_1_1", "answer_toy003_1_3"]


def test_longmemeval_skips_a_question_without_a_user_side_target():
    entry = load_json(LME)[2]
    for session in entry["haystack_sessions"]:
        for turn in session:
            if turn["role"] == "user":
                turn["has_answer"] = False
    conversion = convert("longmemeval", [entry], "session")
    assert conversion.records == []
    assert conversion.skipped == {"no_target": ["toy_q003"]}


def test_locomo_evidence_and_dates():
    assert parse_evidence(["D8:6; D9:17", "D", "D:11:26", "D10:2 D8:6"]) == [
        "D8:6",
        "D9:17",
        "D10:2",
    ]
    assert session_date_iso("12:40 am on 19 April, 2022") == "2022-04-19T00:40:00Z"
    assert session_date_iso("12:05 pm on 1 May, 2023") == "2023-05-01T12:05:00Z"
    assert adapters.longmemeval_date("2023/05/20 (Sat) 14:02") == "2023-05-20T14:02:00Z"
    with pytest.raises(ValueError):
        session_date_iso("sometime in spring")
    conversion = convert("locomo", load_json(LOCOMO))
    assert conversion.skipped == {"no_evidence": ["toy-1:2"]}
    assert conversion.records[0]["corpus"][2]["text"].endswith(
        "[shares a photo of a lopsided clay bowl on a wooden table]"
    )


# ---- the script's edges --------------------------------------------------------------------


def test_missing_input_prints_skipped_and_exits_0(tmp_path):
    out = tmp_path / "gold.jsonl"
    missing = tmp_path / "absent.json"
    done = run_script("--adapter", "locomo", "--input", str(missing), "--out", str(out))
    assert done.returncode == 0
    assert done.stdout == f"skipped: {missing} not found\n"
    assert not out.exists()


@pytest.mark.parametrize(
    "args",
    [
        ["--adapter", "nope", "--input", "x.json", "--out", "y"],
        ["--adapter", "locomo", "--input", "x.json"],  # neither --out nor --evaluate
        ["--adapter", "locomo", "--input", "x.json", "--out", "y", "--granularity", "session"],
        ["--input", "x.json", "--out", "y"],
    ],
)
def test_bad_arguments_exit_2_with_one_line(args):
    done = run_script(*args)
    assert done.returncode == 2
    assert done.stderr.startswith("error: ")
    assert done.stderr.count("\n") == 1


def test_help_documents_evaluate():
    done = run_script("--help")
    assert done.returncode == 0
    assert "--evaluate" in done.stdout and "skipped" in done.stdout


# ---- metrics -------------------------------------------------------------------------------


def test_metrics_on_hand_computed_rankings():
    ranked, gold = ["a", "x", "b", "y"], ["a", "b"]
    assert recall_any(ranked, gold, 1) == 1.0
    assert recall_all(ranked, gold, 1) == 0.0
    assert recall_all(ranked, gold, 3) == 1.0
    assert ndcg_any(ranked, gold, 1) == 1.0
    # DCG = 1 + 0/log2(2) + 1/log2(3); ideal = 1 + 1/log2(2) = 2.
    assert ndcg_any(ranked, gold, 3) == pytest.approx((1 + 1 / math.log2(3)) / 2)
    # The official DCG leaves positions 1 and 2 both undiscounted.
    assert ndcg_any(["x", "a"], ["a"], 2) == 1.0
    assert ndcg_any(["x", "y", "a"], ["a"], 3) == pytest.approx(1 / math.log2(3))
    # Nothing retrieved; empty gold is vacuously all-recalled, as in the official code.
    assert retrieval_metrics([], ["a"], ks=(5,)) == {
        "recall_any@5": 0.0,
        "recall_all@5": 0.0,
        "ndcg_any@5": 0.0,
    }
    assert recall_all(["x"], [], 1) == 1.0 and recall_any(["x"], [], 1) == 0.0


def test_turn_to_session_metrics_grow_k_to_distinct_sessions():
    corpus = ["s1_1", "s1_3", "answer_a_1", "noans_a_3", "s2_1"]
    ranked = ["s1_1", "s1_3", "answer_a_1"]
    got = turn_to_session_metrics(ranked, ["answer_a_1"], corpus, ks=(1, 2, 3))
    assert got["recall_any@1"] == 0.0
    # k=2 needs two distinct sessions: s1, s1, answer_a -> effective k 3 reaches the gold.
    assert got["recall_any@2"] == 1.0
    # One relevant corpus position (answer_a's noans turn is not relevant), found at rank 3.
    assert got["ndcg_any@2"] == pytest.approx(1 / math.log2(3))
    # k=3 cannot reach three sessions in a 3-hit ranking: k grows past the corpus and stops.
    assert got["recall_all@3"] == 1.0
    assert got["ndcg_any@3"] == pytest.approx(1 / math.log2(3))


# ---- evaluator -----------------------------------------------------------------------------


def test_evaluator_end_to_end_on_the_longmemeval_toy():
    os.environ["ZMEM_TEST_NOW"] = "2030-01-01T00:00:00Z"
    records = convert("longmemeval", load_json(LME), "turn").records
    report = evaluate(records)
    assert os.environ["ZMEM_TEST_NOW"] == "2030-01-01T00:00:00Z"  # the clock is put back
    assert report["questions"] == 2
    assert report["dataset"] == "longmemeval" and report["granularity"] == "turn"
    assert set(report["metrics"]) == {"turn", "session"}
    assert report["metrics"]["turn"]["recall_any@1"] == 1.0
    assert report["metrics"]["session"]["recall_any@5"] == 1.0
    assert set(report["by_group"]) == {"single-session-user", "multi-session"}
    assert report["ingest"]["corpora"] == 2 and report["ingest"]["documents"] == 9


def test_evaluator_end_to_end_on_the_locomo_toy_via_script():
    done = run_script("--adapter", "locomo", "--input", str(LOCOMO), "--evaluate")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["questions"] == 2
    assert report["skipped"] == {"no_evidence": 1}
    # Both questions share one conversation: it is ingested once.
    assert report["ingest"]["corpora"] == 1 and report["ingest"]["documents"] == 5
    assert report["metrics"]["turn"]["recall_any@50"] == 1.0
    assert set(report["metrics"]["turn"]) == {
        f"{m}@{k}" for m in ("recall_any", "recall_all", "ndcg_any") for k in adapters.KS
    }


def test_a_folded_duplicate_stays_scorable_through_its_keeper():
    text = "The lighthouse keeper paints the railing green every spring."
    record = {
        "corpus": [
            {"date": "2024-01-01T00:00:00Z", "id": "d1", "text": text},
            {"date": "2024-01-02T00:00:00Z", "id": "d2", "text": "Unrelated note about soup."},
            {"date": "2024-01-03T00:00:00Z", "id": "d3", "text": text},
        ],
        "dataset": "synthetic",
        "gold": ["d1", "d3"],
        "granularity": "turn",
        "id": "fold",
        "metadata": {},
        "query": "what colour is the lighthouse railing",
        "query_date": "2024-02-01T00:00:00Z",
    }
    report = evaluate([record])
    assert report["ingest"]["folded"] == 1
    assert report["metrics"]["turn"]["recall_all@3"] == 1.0


def test_evaluator_refuses_a_limit_below_k():
    with pytest.raises(ValueError):
        evaluate([], limit=10)
