"""feedback through the real CLI: one counter per call, the one-time trust drop at the second
violation, signal never touched, one JSON line; exit 2 for a flag mistake and exit 1 for a
missing or tombstoned memory, with nothing written; and no read path advancing the counters."""

from __future__ import annotations

import json

import pytest

from conftest import add_row, table_counts


def _feedback(run_cli, memory_id, flag):
    result = run_cli("feedback", "--id", memory_id, flag)
    assert result.exit_code == 0, result.output
    assert len(result.stdout.strip().splitlines()) == 1  # one JSON line
    return json.loads(result.stdout)


def test_applied_and_violated_move_one_counter_each(store, run_cli):
    m = add_row(store, "Run the migrations before the integration tests", signal="test")
    doc = _feedback(run_cli, m.id, "--applied")
    assert doc == {"id": m.id, "verdict": "applied", "applied_count": 1, "violated_count": 0,
                   "trust_score": 1.0, "trust_dropped": False}  # fmt: skip
    doc = _feedback(run_cli, m.id[:8], "--applied")  # an unambiguous prefix is enough
    assert doc["applied_count"] == 2 and doc["id"] == m.id


def test_the_second_violation_drops_trust_once(store, run_cli):
    m = add_row(store, "Pin the node version in .nvmrc", signal="test")
    first = _feedback(run_cli, m.id, "--violated")
    assert (first["violated_count"], first["trust_score"], first["trust_dropped"]) == (
        1,
        1.0,
        False,
    )
    second = _feedback(run_cli, m.id, "--violated")
    assert second["violated_count"] == 2 and second["trust_dropped"] is True
    assert second["trust_score"] == pytest.approx(0.85)
    third = _feedback(run_cli, m.id, "--violated")
    assert third["trust_score"] == pytest.approx(0.85) and third["trust_dropped"] is False
    row = store.get(m.id)
    assert row.signal == "test" and row.confidence == 0.9  # provenance is never touched


@pytest.mark.parametrize("args", [["--applied", "--violated"], [], ["--applied", "--bogus"]])
def test_flag_mistakes_exit_2_with_nothing_written(store, store_path, run_cli, args):
    m = add_row(store, "Use uv for the venv")
    before = table_counts(store_path)
    assert run_cli("feedback", "--id", m.id, *args).exit_code == 2
    assert run_cli("feedback", "--applied").exit_code == 2  # no --id
    assert table_counts(store_path) == before


def test_a_missing_or_tombstoned_memory_exits_1(store, store_path, run_cli):
    m = add_row(store, "Use uv for the venv")
    store.supersede(m.id)
    before = table_counts(store_path)
    gone = run_cli("feedback", "--id", m.id, "--applied")
    missing = run_cli("feedback", "--id", "00000000-0000-0000-0000-000000000000", "--applied")
    assert gone.exit_code == missing.exit_code == 1
    assert "tombstoned" in gone.stderr and "no such memory" in missing.stderr
    assert table_counts(store_path) == before
    assert store.get(m.id).applied_count == 0


def test_reads_never_advance_the_counters(store, run_cli):
    m = add_row(store, "Run the migrations before the integration tests", signal="test")
    run_cli("recall", "--query", "integration tests migrations", "--json")
    run_cli("search", "--text", "migrations", "--json")
    store.surface([m.id])
    row = store.get(m.id)
    assert (row.applied_count, row.violated_count) == (0, 0)
    assert row.retrieval_count + row.surfaced_count >= 1  # the reads did count as exposure
