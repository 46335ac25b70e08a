"""The conversational dev protocol (issue 35) on synthetic LoCoMo-shaped data (the real data is
CC BY-NC and never enters the repo): leave-one-out choice and the tune/held-out deltas on
hand-built scores, the naive RRF baseline by hand, every reading of a three-conversation toy
through the real store, and the script's refusals (exit 2, no report written)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from zmem.evaluation import dev_protocol, locomo
from zmem.evaluation.dev_protocol import Scores, leave_one_out, naive_rrf

ROOT = Path(__file__).resolve().parents[1]
TOY = Path(__file__).parent / "fixtures" / "locomo_toy.json"
SCRIPT = ROOT / "scripts" / "dev_protocol.py"


def row(r10: float, category: int = 1) -> locomo.Scored:
    return locomo.Scored("q", category, {k: r10 for k in locomo.KS}, {k: r10 for k in locomo.KS})


def scores_of(table: dict[str, dict[str, list[float]]]) -> Scores:
    out = Scores()
    for reading, convs in table.items():
        for sample, values in convs.items():
            for v in values:
                out.add(reading, sample, row(v))
    return out


def test_the_choice_is_made_on_the_other_conversations_only():
    # "b" is best on c1 alone, so it wins every fold where c1 is on the tune side.
    table = {
        "hooks": {"c1": [0.5], "c2": [0.5], "c3": [0.5]},
        "a": {"c1": [0.4], "c2": [0.7], "c3": [0.7]},
        "b": {"c1": [0.9], "c2": [0.4], "c3": [0.4]},
    }
    loo = leave_one_out(scores_of(table), ["c1", "c2", "c3"], ["hooks", "a", "b"])
    chosen = {f["held_out"]: f["chosen"] for f in loo["folds"]}
    # c1 out: tune a 0.70, b 0.40 -> a. c2 out: a (0.4+0.7)/2=0.55, b 0.65 -> b. c3 likewise.
    assert chosen == {"c1": "a", "c2": "b", "c3": "b"}
    fold1 = loo["folds"][0]
    assert fold1["held_out_chosen"] == pytest.approx(0.4)
    assert fold1["held_out_default"] == pytest.approx(0.5)
    assert fold1["deltas"]["a"] == {"tune": pytest.approx(0.2), "validation": pytest.approx(-0.1)}
    # Each held-out conversation scored under its own fold's choice: 0.4, 0.4, 0.4.
    assert loo["selected_held_out"]["turn_recall"]["10"] == pytest.approx(0.4)
    # 6 pairs, every tune change >= 0.005. Agreeing: a when c2 or c3 is out (tune +0.05,
    # held out +0.2); b never does, and a not when c1 is out (+0.2 -> -0.1).
    assert loo["sign_agreement"] == {"agree": 2, "counted": 6, "pairs": 6}
    assert loo["pearson"] is not None and loo["pearson"] < 0


def test_ties_keep_the_default_and_tiny_tune_changes_are_not_counted():
    table = {
        "hooks": {"c1": [0.5], "c2": [0.5], "c3": [0.5]},
        "same": {"c1": [0.5], "c2": [0.502], "c3": [0.5]},
    }
    loo = leave_one_out(scores_of(table), ["c1", "c2", "c3"], ["hooks", "same"])
    assert [f["chosen"] for f in loo["folds"]] == ["same", "hooks", "same"]
    # Every tune change is under half a point: none predicts anything.
    assert loo["sign_agreement"]["counted"] == 0


def test_naive_rrf_by_hand():
    # 0 is 1st and 3rd: 1/61 + 1/63; 1 is 2nd and 1st: 1/62 + 1/61 (higher); 2 once.
    assert naive_rrf([[0, 1, 2], [1, 3, 0]]) == [1, 0, 3, 2]
    assert naive_rrf([[5], [7]]) == [5, 7]  # equal sums: the smaller index first


@pytest.fixture(scope="module")
def three() -> locomo.Dataset:
    """The toy's two conversations and a renamed copy of the first: three to leave out."""
    toy = locomo.load(TOY)
    copy = dataclasses.replace(toy.conversations[0], sample_id="toy-3")
    return dataclasses.replace(toy, conversations=[*toy.conversations, copy])


def test_every_reading_of_every_question_through_the_store(three):
    # Lexical vs hybrid is not what the fake profile can show; the plumbing and the equality
    # of the `bench` variant with bench_locomo.py's own reading are.
    doc = dev_protocol.run(three, profile="fake")
    n = sum(len(c.questions) for c in three.conversations)
    assert doc["questions"] == n == 10 + 6
    names = [v.name for v in dev_protocol.VARIANTS]
    assert list(doc["readings"]) == [*names, "bm25", "rrf"]
    for reading in doc["readings"].values():
        assert reading["all"]["n"] == n
        assert set(reading["by_conversation"]) == {"toy-1", "toy-2", "toy-3"}
    assert [f["held_out"] for f in doc["leave_one_out"]["folds"]] == ["toy-1", "toy-2", "toy-3"]
    bench = locomo.run_zmem(three, profile="fake")
    ours = doc["readings"]["bench"]
    assert ours["all"] == bench.to_dict()["all"]
    assert ours["by_category"] == bench.to_dict()["by_category"]
    assert doc["readings"]["bm25"]["all"] == locomo.run_bm25(three).to_dict()["all"]
    text = dev_protocol.format_report(doc)
    assert "| hooks |" in text and "Sign agreement" in text and "| toy-3 |" in text


def run_script(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )


def test_the_script_refuses_too_few_conversations_and_writes_nothing(tmp_path):
    out = tmp_path / "o.json"
    done = run_script(tmp_path, "--input", str(TOY), "--json-out", str(out), "--profile", "fake")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"dev_protocol: {TOY} holds 2 conversations; leave-one-out needs 3"
    ]
    assert not out.exists()


def test_the_script_refuses_an_unknown_variant_and_writes_nothing(tmp_path):
    out = tmp_path / "o.json"
    done = run_script(
        tmp_path, "--input", str(TOY), "--json-out", str(out), "--variants", "hooks,magic"
    )
    assert done.returncode == 2
    assert "unknown variant(s) magic" in done.stderr
    assert not out.exists()


def test_the_script_runs_end_to_end_on_three_conversations(tmp_path):
    raw = json.loads(TOY.read_text())
    raw.append({**raw[0], "sample_id": "toy-3"})
    data = tmp_path / "three.json"
    data.write_text(json.dumps(raw))
    out = tmp_path / "report.json"
    done = run_script(
        tmp_path,
        *("--input", str(data), "--json-out", str(out), "--profile", "fake"),
        *("--variants", "bench,no-links"),
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert list(doc["variants"]) == ["hooks", "no-links", "bench"]
    assert len(doc["leave_one_out"]["folds"]) == 3
    assert doc["input"]["path"] == str(data)
    assert "Leave one conversation out" in done.stdout


def test_a_variants_constants_hold_during_its_reads_only():
    from zmem.retrieval import mmr

    variant = next(v for v in dev_protocol.VARIANTS if v.name == "mmr-floor-0.85")
    before = mmr.SIMILARITY_FLOOR
    with variant.applied():
        assert mmr.SIMILARITY_FLOOR == 0.85
    assert mmr.SIMILARITY_FLOOR == before
    with pytest.raises(RuntimeError), variant.applied():
        raise RuntimeError("a read failed")
    assert mmr.SIMILARITY_FLOOR == before


def test_a_variants_constants_are_what_its_reads_see(three, monkeypatch):
    from zmem.retrieval import mmr, pipeline

    seen: dict[float, int] = {}
    real = pipeline.mmr_order

    def spy(*args, **kwargs):
        seen[mmr.SIMILARITY_FLOOR] = seen.get(mmr.SIMILARITY_FLOOR, 0) + 1
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "mmr_order", spy)
    plain = dev_protocol.Variant("hooks", "as shipped")
    floored = dev_protocol.Variant("f", "x", constants=(("mmr.SIMILARITY_FLOOR", 0.5),))
    dev_protocol.read_variants(three, [plain, floored], profile="fake")
    # Both tiers of every question, once per variant, each under its own floor.
    questions = sum(len(c.questions) for c in three.conversations)
    assert seen == {mmr.SIMILARITY_FLOOR: 2 * questions, 0.5: 2 * questions}
