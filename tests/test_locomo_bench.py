"""The LoCoMo retrieval benchmark on a synthetic file in LoCoMo's schema (the real data is CC BY-NC
and never enters the repo): evidence parsing and dropped questions, what one turn is stored as,
the metrics on hand-computed cases, the BM25 baseline, and the script end to end."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from zmem import MemoryStore
from zmem.errors import UsageError
from zmem.evaluation import locomo
from zmem.evaluation.bm25 import BM25

ROOT = Path(__file__).resolve().parents[1]
TOY = Path(__file__).parent / "fixtures" / "locomo_toy.json"
SCRIPT = ROOT / "scripts" / "bench_locomo.py"


@pytest.fixture(scope="module")
def toy() -> locomo.Dataset:
    return locomo.load(TOY)


def by_question(run: locomo.SystemRun) -> dict[str, locomo.Scored]:
    return {row.question: row for row in run.rows}


# ---- parsing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (["D1:3"], ["D1:3"]),
        (["D8:6; D9:17"], ["D8:6", "D9:17"]),  # a list joined into one string
        (["D2:2 D1:2"], ["D2:2", "D1:2"]),
        (["D", "D4:1"], ["D4:1"]),
        (["D:11:26"], []),  # not a D<n>:<m> token
        ([], []),
        (None, []),
        (["D08:6", "D8:6"], ["D8:6"]),  # one id, however spelled, counts once
        ("D3:1", ["D3:1"]),
    ],
)
def test_every_evidence_token_is_parsed(raw, expected):
    assert locomo.parse_evidence(raw) == expected


def test_questions_without_usable_evidence_are_dropped_and_counted(toy):
    assert toy.questions_total == 14
    # Empty list, "D" and "D:2:2" parse to nothing; "D7:1" names no turn of the dialog.
    assert toy.dropped_no_evidence == 3
    assert toy.dropped_unresolved == 1
    assert toy.dropped == 4
    kept = [q.text for c in toy.conversations for q in c.questions]
    assert len(kept) == 10
    assert "Is Ada a member of a sailing club?" not in kept
    assert "Who cooked dinner?" not in kept
    # A question naming one real and one missing turn is kept, scored on the real one.
    repair = next(q for q in toy.conversations[0].questions if "sailboat" in q.text)
    assert repair.evidence == ("D1:2",)
    assert toy.partially_resolved == 1
    assert sorted(toy.unresolved_ids) == ["toy-1:D7:1", "toy-1:D9:9"]


def test_joined_evidence_string_yields_both_turns(toy):
    regatta = next(q for q in toy.conversations[0].questions if q.text.startswith("When did"))
    assert regatta.evidence == ("D2:1", "D3:2")
    assert regatta.category == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("12:09 am on 13 September, 2023", datetime(2023, 9, 13, 0, 9, tzinfo=UTC)),
        ("12:30 pm on 1 January, 2024", datetime(2024, 1, 1, 12, 30, tzinfo=UTC)),
        ("9:05 AM on 17 april 2023", datetime(2023, 4, 17, 9, 5, tzinfo=UTC)),
    ],
)
def test_session_dates_parse(text, expected):
    assert locomo.parse_session_date(text) == expected


def test_an_unparsable_session_date_is_an_error_not_a_guess():
    with pytest.raises(ValueError, match="session date"):
        locomo.parse_session_date("sometime in spring")


# ---- ingest ----------------------------------------------------------------------------------


@pytest.fixture
def ingested(toy, tmp_path):
    # Function-scoped so it runs inside conftest's isolated environment.
    path = tmp_path / "kept.sqlite"
    # Lexical: the assertions below count word overlap (the fake vectors carry no meaning).
    run = locomo.run_zmem(toy, store=path, hybrid=False)
    with MemoryStore.open(path) as s:
        rows = {
            ns: s.list(namespace=ns, include_superseded=True)
            for ns in ("locomo:toy-1", "locomo:toy-2")
        }
    return run, rows


def test_one_memory_per_turn_in_one_namespace_per_conversation(ingested):
    run, rows = ingested
    refs = {ns: sorted(m.source_ref for m in ms) for ns, ms in rows.items()}
    # toy-1's D1:5 repeats D1:4 word for word in the same session: dedup folds it.
    assert run.counters["deduped_turns"] == 1
    assert run.counters["turns"] == 15
    assert len(refs["locomo:toy-1"]) == 10
    assert "locomo:toy-1:D1:5" not in refs["locomo:toy-1"]
    assert refs["locomo:toy-2"] == [f"locomo:toy-2:D{s}:{t}" for s in (1, 2) for t in (1, 2)]
    for ms in rows.values():
        assert {(m.type, m.signal, m.taint, m.tags) for m in ms} == {
            ("fact", "user", "trusted_internal", ())
        }


def test_content_is_date_speaker_text_and_photo_caption(ingested):
    _, rows = ingested
    content = {m.source_ref: m.content for ms in rows.values() for m in ms}
    assert content["locomo:toy-1:D1:3"] == (
        "[2:15 pm on 3 March, 2023] Ada: Pixel loves the beach, look! "
        "[shares a photo of a grey dog running on a sandy beach]"
    )
    assert content["locomo:toy-2:D2:2"] == (
        "[12:20 am on 20 February, 2024] Dana: I ran my first marathon in Oslo last Sunday."
    )


def test_rows_are_created_at_their_sessions_date(ingested):
    _, rows = ingested
    valid_from = {m.source_ref: m.valid_from for ms in rows.values() for m in ms}
    assert valid_from["locomo:toy-1:D1:1"] == "2023-03-03T14:15:00.000000Z"
    assert valid_from["locomo:toy-1:D2:4"] == "2023-04-17T09:05:00.000000Z"
    assert valid_from["locomo:toy-1:D3:2"] == "2023-06-02T19:40:00.000000Z"
    assert valid_from["locomo:toy-2:D2:1"] == "2024-02-20T00:20:00.000000Z"


def test_the_callers_clock_and_profile_come_back(toy, monkeypatch):
    monkeypatch.setenv("ZMEM_TEST_NOW", "2030-01-01T00:00:00Z")
    monkeypatch.delenv("ZMEM_EMBED_PROFILE")
    locomo.run_zmem(toy, profile="fake")
    assert os.environ["ZMEM_TEST_NOW"] == "2030-01-01T00:00:00Z"
    assert "ZMEM_EMBED_PROFILE" not in os.environ


def test_an_existing_store_is_never_written(toy, tmp_path):
    path = tmp_path / "mine.sqlite"
    path.write_bytes(b"precious")
    with pytest.raises(UsageError, match="fresh path"):
        locomo.run_zmem(toy, store=path)
    assert path.read_bytes() == b"precious"


# ---- metrics ---------------------------------------------------------------------------------


def test_recall_at_k_by_hand():
    evidence = ["D1:1", "D2:3"]
    ranking = [frozenset({"D3:1"}), frozenset({"D1:1"}), frozenset({"D2:1"}), frozenset({"D2:3"})]
    assert locomo.recall_at(evidence, ranking, 1) == (0.0, 0.0)  # session 3 holds no evidence
    assert locomo.recall_at(evidence, ranking, 2) == (0.5, 1.0)
    assert locomo.recall_at(evidence, ranking, 3) == (0.5, 1.0)  # D2:1: right session, wrong turn
    assert locomo.recall_at(evidence, ranking, 4) == (1.0, 1.0)
    assert locomo.recall_at(evidence, [], 5) == (0.0, 0.0)


def test_a_dedup_keeper_covers_the_turns_folded_into_it():
    keeper = frozenset({"D1:4", "D1:5"})
    assert locomo.recall_at(["D1:5"], [keeper], 1) == (1.0, 1.0)
    assert locomo.recall_at(["D1:4", "D1:5", "D2:1"], [keeper], 1) == (pytest.approx(2 / 3), 1.0)


def test_summary_averages_over_questions_per_category():
    def q(text, cat, ev):
        return locomo.Question(text, cat, tuple(ev))

    rows = [
        locomo.score(q("a", 1, ["D1:1", "D1:2"]), [frozenset({"D1:1"})]),  # 0.5
        locomo.score(q("b", 1, ["D2:1"]), [frozenset({"D2:1"})]),  # 1.0
        locomo.score(q("c", 5, ["D3:1"]), [frozenset({"D4:1"})]),  # 0.0
    ]
    summary = locomo.summarize(rows)
    assert summary["all"]["n"] == 3
    assert summary["all"]["turn_recall"]["5"] == pytest.approx(0.5)
    assert summary["all"]["session_recall"]["5"] == pytest.approx(2 / 3, abs=1e-4)
    assert summary["no_adversarial"]["turn_recall"]["5"] == pytest.approx(0.75)
    assert summary["by_category"]["1"]["turn_recall"]["50"] == pytest.approx(0.75)
    assert summary["by_category"]["5"]["session_recall"]["10"] == 0.0
    assert summary["by_category"]["2"] == {
        "name": "temporal",
        "n": 0,
        "turn_recall": dict.fromkeys(("5", "10", "25", "50")),
        "session_recall": dict.fromkeys(("5", "10", "25", "50")),
    }


def test_percentile_is_nearest_rank():
    values = [float(v) for v in range(1, 21)]
    assert locomo.percentile(values, 50) == 10.0
    assert locomo.percentile(values, 95) == 19.0
    assert locomo.percentile([], 50) is None


def test_zmem_finds_every_answerable_toy_question(ingested):
    run, _ = ingested
    found = by_question(run)
    assert len(found) == 10
    # The folded turn D1:5 is scored through its keeper D1:4.
    assert found["What did Bruno say was cute?"].turn[50] == 1.0
    assert found["When did Bruno race in the Kiel regatta?"].turn[50] == 1.0
    # No word of this question occurs in toy-2: nothing comes back, recall is 0.
    assert found["Who painted the lighthouse mural?"].turn[50] == 0.0
    assert found["Who painted the lighthouse mural?"].session[50] == 0.0
    summary = run.to_dict()
    assert summary["all"]["turn_recall"]["50"] == pytest.approx(0.9)
    assert summary["by_category"]["5"]["n"] == 2
    assert summary["by_category"]["3"]["turn_recall"]["50"] == 0.0


# ---- the BM25 baseline -----------------------------------------------------------------------


def test_bm25_scores_by_hand():
    index = BM25(["apple banana", "apple apple cherry", "durian"])
    # df(apple)=2 of N=3: idf = ln(1 + 1.5/2.5); avgdl = 2.
    idf = math.log(1.6)
    doc0 = idf * 1 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 2 / 2))
    doc1 = idf * 2 * 2.2 / (2 + 1.2 * (0.25 + 0.75 * 3 / 2))
    assert index.scores("apple") == pytest.approx([doc0, doc1, 0.0])
    assert index.rank("apple", 10) == [1, 0]
    # Stop words and case do not count; a repeated query word counts once.
    assert index.scores("The APPLE, apple!") == pytest.approx(index.scores("apple"))
    assert index.rank("kiwi", 10) == []


def test_bm25_prefers_the_shorter_document_at_equal_term_frequency():
    index = BM25(["kiwi", "kiwi mango papaya guava"])
    assert index.rank("kiwi", 10) == [0, 1]


def test_bm25_baseline_on_the_toy(toy):
    run = locomo.run_bm25(toy)
    found = by_question(run)
    assert found["What did Bruno repair on his sailboat hull?"].turn[5] == 1.0
    assert found["Who painted the lighthouse mural?"].turn[50] == 0.0
    # Plain BM25 has no dedup: the folded turn is its own document and still matches "cute".
    assert found["What did Bruno say was cute?"].turn[5] == 1.0
    assert run.to_dict()["all"]["turn_recall"]["50"] == pytest.approx(0.9)


# ---- the script ------------------------------------------------------------------------------


def test_script_runs_end_to_end(tmp_path):
    out = tmp_path / "report.json"
    args = [str(SCRIPT), "--input", str(TOY), "--baseline", "bm25", "--json-out", str(out)]
    done = subprocess.run(
        [sys.executable, *args, "--no-hybrid"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert doc["questions"] == 14
    assert doc["kept_questions"] == 10
    assert doc["dropped_questions"]["total"] == 4
    assert set(doc["runs"]) == {"zmem", "bm25"}
    zmem = doc["runs"]["zmem"]
    assert zmem["hybrid"] is False
    assert zmem["deduped_turns"] == 1
    assert set(zmem["all"]["turn_recall"]) == {"5", "10", "25", "50"}
    assert doc["runs"]["bm25"]["all"]["turn_recall"]["50"] == pytest.approx(0.9)
    assert zmem["query_ms"]["p50"] is not None
    assert "R@50" in done.stdout and "bm25" in done.stdout and "4 dropped" in done.stdout
    # The run used a throwaway store: the configured default store was never created.
    assert not Path(os.environ["ZMEM_STORE"]).exists()


def test_script_refuses_an_unknown_profile(tmp_path):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--input", str(TOY), "--json-out", str(tmp_path / "o.json")]
        + ["--profile", "gpt"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert not (tmp_path / "o.json").exists()
