"""The self-corpus probe (refusals, byte-identical store, report) and tune-weights (dry run
only, writes nothing, weight vectors that sum to 1)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import table_counts
from zmem.evaluation import harness

ROOT = Path(__file__).resolve().parents[1]
PROBE = ROOT / "scripts" / "eval_self_corpus.py"


@pytest.fixture(scope="module")
def fixture_store(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("fixture") / "fixture.sqlite"
    harness.run(path, harness.REPO_GOLD, 5)
    return path


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _probe(*args: str, env_store: Path | None = None):
    import os

    env = dict(os.environ)
    if env_store is not None:
        env["ZMEM_STORE"] = str(env_store)
    return subprocess.run(
        [sys.executable, str(PROBE), *args], capture_output=True, text=True, env=env
    )


def test_probe_leaves_the_store_byte_identical(fixture_store, tmp_path):
    copy = tmp_path / "copy.sqlite"
    shutil.copy(fixture_store, copy)
    before = _sha(copy)
    out = tmp_path / "report.json"
    done = _probe("--store", str(copy), "--k", "1,5", "--limit", "20", "--json-out", str(out))
    assert done.returncode == 0, done.stderr
    assert _sha(copy) == before
    report = json.loads(out.read_text())
    assert report["rows_probed"] == 20 and report["k"] == [1, 5]
    assert set(report["hit_at_k"]) == {"1", "5"}
    assert {"first_sentence", "distinctive_tokens"} <= set(report["by_kind"])
    assert report["hit_at_k"]["5"] >= 0.9  # the fixture's own rows come back


def test_probe_refuses_missing_and_default_paths(tmp_path):
    missing = tmp_path / "nope.sqlite"
    done = _probe("--store", str(missing))
    assert done.returncode == 2 and "does not exist" in done.stderr
    assert not missing.exists()
    live = tmp_path / "live.sqlite"
    from zmem import MemoryStore

    MemoryStore.open(live).close()
    before = _sha(live)
    done = _probe("--store", str(live), env_store=live)
    assert done.returncode == 2 and "default store" in done.stderr
    assert _sha(live) == before
    assert _probe("--store", str(live), "--k", "x").returncode == 2


def test_tune_weights_is_dry_run_only_and_writes_nothing(fixture_store, tmp_path, run_cli):
    copy = tmp_path / "copy.sqlite"
    shutil.copy(fixture_store, copy)
    before = (_sha(copy), table_counts(copy))
    gold = str(harness.REPO_GOLD)
    refused = run_cli("--store", str(copy), "tune-weights", "--gold", gold)
    assert refused.exit_code == 2 and "--dry-run" in refused.stderr
    done = run_cli("--store", str(copy), "tune-weights", "--dry-run", "--gold", gold, "--k", "3")
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)
    for side in ("current", "suggested"):
        weights = doc[side]["weights"]
        assert set(weights) == {"W_BM25", "W_CONFIDENCE", "W_RECENCY", "W_POPULARITY"}
        assert sum(weights.values()) == pytest.approx(1.0)
        assert {"hit_at_k", "mrr", "as_of_accuracy", "injection_omit_rate"} <= set(
            doc[side]["metrics"]
        )
    assert doc["current"]["weights"]["W_BM25"] == 0.70 and doc["k"] == 3
    assert (_sha(copy), table_counts(copy)) == before


def test_tune_weights_refuses_an_invalid_gold_set(fixture_store, tmp_path, run_cli):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "broken"}\n')
    done = run_cli("--store", str(fixture_store), "tune-weights", "--dry-run", "--gold", str(bad))
    assert done.exit_code == 2 and "broken" in done.stderr
    missing = tmp_path / "g.jsonl"
    missing.write_text(
        '{"id": "x", "bucket": "fts", "query": "q", "namespace": "n", "expect": ["F99"]}\n'
    )
    done = run_cli(
        "--store", str(fixture_store), "tune-weights", "--dry-run", "--gold", str(missing)
    )
    assert done.exit_code == 2 and "F99" in done.stderr


def test_paraphrase_dev_set_runs_from_its_corpus(tmp_path):
    from zmem.errors import UsageError
    from zmem.evaluation import gold

    items = gold.load(harness.PARAPHRASE_GOLD)
    assert len(items) >= 40 and all(i.bucket == "paraphrase" for i in items)
    corpus = [
        json.loads(line) for line in harness.PARAPHRASE_CORPUS.read_text().splitlines() if line
    ]
    assert len(corpus) >= 60 and len({r["namespace"] for r in corpus}) >= 3
    path = tmp_path / "para.sqlite"
    report = harness.run(path, harness.PARAPHRASE_GOLD, 5, harness.PARAPHRASE_CORPUS)
    assert report["items"] == len(items) and report["settings"]["corpus"].endswith(".jsonl")
    assert 0.0 <= report["hit_at_k"] <= 1.0
    with pytest.raises(UsageError, match="already exists"):
        harness.run(path, harness.PARAPHRASE_GOLD, 5, harness.PARAPHRASE_CORPUS)


def test_a_corpus_with_history_builds_updates_and_contradictions(tmp_path):
    from zmem import MemoryStore
    from zmem.errors import UsageError
    from zmem.evaluation import fixture, gold

    lines = [
        {"key": "A001", "namespace": "project:h", "type": "fact", "signal": "test",
         "content": "The API listens on port 8080 in development."},
        {"key": "A002", "namespace": "project:h", "type": "fact", "signal": "test",
         "content": "The API listens on port 9090 in development.", "update_of": "A001",
         "at": "2026-02-01T00:00:00Z"},
        {"key": "A003", "namespace": "project:h", "type": "convention", "signal": "user",
         "content": "Squash merge every pull request into main."},
        {"key": "A004", "namespace": "project:h", "type": "convention", "signal": "user",
         "content": "Rebase merge pull requests so main keeps each commit.", "contradicts": "A003"},
    ]  # fmt: skip
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(x) + "\n" for x in lines))
    goldfile = tmp_path / "g.jsonl"
    goldfile.write_text(
        json.dumps({"id": "u1", "bucket": "update", "query": "which port does the api use",
                    "namespace": "project:h", "expect": ["A002"], "forbid": ["A001"]}) + "\n"
        + json.dumps({"id": "a1", "bucket": "as_of", "query": "which port does the api use",
                      "namespace": "project:h", "expect": ["A001"], "forbid": ["A002"],
                      "as_of": "2026-01-20T00:00:00Z"}) + "\n"
    )  # fmt: skip
    assert [i.bucket for i in gold.load(goldfile)] == ["update", "as_of"]
    report = harness.run(tmp_path / "h.sqlite", goldfile, 5, corpus)
    assert report["pass_rate"] == 1.0
    with MemoryStore.open(tmp_path / "h.sqlite") as s:
        live = {m.source_ref: m for m in s.list()}
        assert "eval:A001" not in live and live["eval:A002"].update_of is not None
        assert any(link.relation == "contradicts" for link in s.links(live["eval:A004"].id))
    # A reference to a later or unknown key, or an update without its instant, is refused.
    for bad in ({**lines[1], "update_of": "A009"}, {**lines[1], "at": None}):
        broken = tmp_path / "bad.jsonl"
        broken.write_text(json.dumps(lines[0]) + "\n" + json.dumps(bad) + "\n")
        with pytest.raises(UsageError, match="corpus line 2"):
            fixture.load_corpus(broken)
