"""The evaluation harness: the fixture corpus builds deterministically through the real write
path, the gold set is valid and scores as the spec requires, refusals exit 2 and the script's
JSON report carries every key scripts rely on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from zmem.errors import UsageError
from zmem.evaluation import fixture, gold, harness

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "eval_runner.py"
REPORT_KEYS = {"hit_at_k", "mrr", "as_of_accuracy", "injection_omit_rate", "buckets", "per_item"}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return harness.run(tmp_path_factory.mktemp("eval") / "fixture.sqlite", harness.REPO_GOLD, 5)


def test_report_has_the_spec_keys_and_per_item_detail(report):
    assert REPORT_KEYS <= set(report)
    assert len(report["per_item"]) == len(gold.load(harness.REPO_GOLD))
    assert {"id", "bucket", "returned", "first_rank", "passed"} <= set(report["per_item"][0])


def test_as_of_accuracy_and_injection_omission_are_perfect(report):
    assert report["as_of_accuracy"] == 1.0
    assert report["injection_omit_rate"] == 1.0


def test_gold_set_covers_every_bucket():
    items = gold.load(harness.REPO_GOLD)
    counts = {b: sum(1 for i in items if i.bucket == b) for b in gold.BUCKETS}
    for bucket in ("fts", "as_of", "contested", "entity", "namespace", "injection"):
        assert counts[bucket] >= 5, bucket
    for bucket in ("retraction", "polarity", "change_intent"):
        assert counts[bucket] >= 3, bucket
    assert sum(1 for i in items if i.explicit) >= 3


def test_honesty_buckets_behave(report):
    rows = {r["id"]: r for r in report["per_item"]}
    # retraction: gone now, present before the tombstone
    assert rows["ret-01"]["passed"] and rows["ret-04"]["passed"]
    # polarity: both live sides come back
    assert all(rows[f"pol-0{i}"]["passed"] for i in (1, 2, 3))
    # change intent: the explicit item unfolds, its passive twin never does
    assert set(rows["chg-01"]["returned"]) >= {"F58", "F57", "F56"}
    assert rows["chg-04"]["returned"][0] == "F58" and "F57" not in rows["chg-04"]["returned"]


def test_fixture_build_is_deterministic(tmp_path):
    a = harness.run(tmp_path / "a.sqlite", harness.REPO_GOLD, 5)
    b = harness.run(tmp_path / "b.sqlite", harness.REPO_GOLD, 5)
    strip = lambda r: [(i["id"], i["returned"]) for i in r["per_item"]]  # noqa: E731
    assert strip(a) == strip(b)
    # a second run reuses the built store and scores the same
    again = harness.run(tmp_path / "a.sqlite", harness.REPO_GOLD, 5)
    assert strip(again) == strip(a)


def test_the_run_writes_nothing_to_the_fixture_rows(tmp_path):
    path = tmp_path / "f.sqlite"
    harness.run(path, harness.REPO_GOLD, 5)
    import apsw

    def counters():
        conn = apsw.Connection(str(path))
        try:
            return list(conn.execute("SELECT retrieval_count, surfaced_count FROM memory"))
        finally:
            conn.close()

    assert all(c == (0, 0) for c in counters())


def test_default_store_and_foreign_stores_are_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("ZMEM_STORE", str(tmp_path / "home.sqlite"))
    with pytest.raises(UsageError, match="default store"):
        fixture.open_fixture(tmp_path / "home.sqlite")
    from zmem import MemoryStore

    other = tmp_path / "real.sqlite"
    with MemoryStore.open(other) as s:
        s.add("a real memory", namespace="project:x", type="fact", signal="test")
    with pytest.raises(UsageError, match="not an evaluation fixture store"):
        harness.run(other, harness.REPO_GOLD, 5)


@pytest.mark.parametrize(
    "line, message",
    [
        ("not json", "invalid JSON"),
        (
            '{"id": "x", "bucket": "nope", "query": "q", "namespace": "n", "expect": ["F01"]}',
            "bucket",
        ),
        ('{"id": "x", "bucket": "fts", "query": "", "namespace": "n", "expect": ["F01"]}', "query"),
        ('{"id": "x", "bucket": "fts", "query": "q", "namespace": "n"}', "needs"),
        (
            '{"id": "x", "bucket": "fts", "query": "q", "namespace": "n", "expect": ["7"]}',
            "corpus keys",
        ),
        (
            '{"id": "x", "bucket": "fts", "query": "q", "namespace": "n", "expect": ["F01"], '
            '"as_of": "soon"}',
            "ISO-8601",
        ),
        (
            '{"id": "x", "bucket": "fts", "query": "q", "namespace": "n", "expect": ["F01"], '
            '"extra": 1}',
            "unknown keys",
        ),
    ],
)
def test_invalid_gold_item_is_named(tmp_path, line, message):
    path = tmp_path / "gold.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(UsageError, match=message) as err:
        gold.load(path)
    assert "gold line 1" in str(err.value)


def _script(*args):
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT
    )


def test_script_prints_the_report_and_writes_json_out(tmp_path):
    out = tmp_path / "report.json"
    done = _script("--store", str(tmp_path / "s.sqlite"), "--json-out", str(out), "--k", "3")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert REPORT_KEYS <= set(doc) and doc["k"] == 3
    assert json.loads(out.read_text()) == doc


def test_script_exit_codes(tmp_path):
    assert _script().returncode == 2  # --store is required
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "only", "bucket": "fts"}\n')
    done = _script("--store", str(tmp_path / "s.sqlite"), "--gold", str(bad))
    assert done.returncode == 2 and "only" in done.stderr and not (tmp_path / "s.sqlite").exists()
    done = _script("--store", str(tmp_path / "t.sqlite"), "--fail-under", "1.01")
    assert done.returncode == 1
