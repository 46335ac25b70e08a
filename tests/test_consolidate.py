"""consolidate through the real CLI and the store API: near-duplicates merge into the keeper the
spec's rule picks, with history kept (the grown keeper is a new row, every merged row a
tombstone, --as-of still sees the old ones), whole-text absorb with merged_from, subsumed text
not repeated, the 65,536-character cap with :truncated, worst-of taint; rows that differ in a
number or in polarity never merge; the contested guard and the NLI judge; --prune with the
unrecalled extension; the cadence gate, the single-flight lock, --dry-run exact and writing
nothing; bad input refused with nothing written; the write path's judge on every pair it would
merge (issue 50): only a fold merges, an unsure pair is asked once through the review queue,
an answered pair follows its answer."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import apsw
import pytest

from conftest import add_row, ingest_file, table_counts
from zmem import MemoryStore, config
from zmem.maintenance import backup

# Seven similarity tokens, and the same plus one more: token Jaccard 7/8 = 0.875, where the
# write path's judge folds. An add would fold them as it writes; rows of one ingested file never
# fold into each other (as a sync file or an older store's rows arrive), so the duplicates a
# consolidate test merges come in through ingest-jsonl.
BASE = "Rotate the vault token before staging deploys of the billing service"
PLUS_A = BASE + " manually"
PLUS_B = BASE + " nightly"
# Five tokens and one more: Jaccard 5/6 = 0.83, above consolidate's 0.80 and below the judge's
# fold. The judge cannot tell whether "manually" matters: it asks.
UNSURE = "Pin the terraform provider versions in modules"
UNSURE_PLUS = UNSURE + " manually"


def _ingest(run_cli, tmp_path: Path, *rows, namespace: str = "project:t") -> list[str]:
    """Ingest rows (a text, or a text and its fields) from one file; their ids in order."""
    path, ids = ingest_file(tmp_path, *rows, namespace=namespace)
    done = run_cli("ingest-jsonl", "--in", str(path), "--json")
    assert done.exit_code == 0, done.output
    return ids


def _reviews(run_cli) -> list[tuple[str, str, str]]:
    found = _json(run_cli, "review")["reviews"]
    return [(r["new"], r["old"], r["origin"]) for r in found]


def _json(run_cli, *args):
    result = run_cli(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _live(store_path: Path) -> list[tuple[str, str]]:
    conn = apsw.Connection(str(store_path))
    try:
        return list(
            conn.execute("SELECT id, content FROM memory WHERE superseded_at IS NULL ORDER BY rid")
        )
    finally:
        conn.close()


def test_near_duplicates_merge_with_history_kept(store, store_path, run_cli, tmp_path):
    keeper, a, b = _ingest(
        run_cli, tmp_path,
        (BASE, {"ingestion_ts": "2026-01-01T00:00:00Z"}),
        (PLUS_A, {"signal": "user", "confidence": 0.6, "ingestion_ts": "2026-01-02T00:00:00Z"}),
        (PLUS_B, {"signal": "user", "confidence": 0.6, "ingestion_ts": "2026-01-03T00:00:00Z"}),
    )  # fmt: skip
    other = add_row(store, "Pin the terraform provider versions in every module").id
    before = config.now_iso()
    report = _json(run_cli, "consolidate", "--force")
    assert report["merged"] == 1 and report["absorbed"] == 2
    assert report["live_before"] == 4 and report["live_after"] == 2
    (cluster,) = report["clusters"]
    assert cluster["keeper"] == keeper
    assert [m["action"] for m in cluster["members"]] == ["keeper", "absorb", "absorb"]
    new_id = cluster["result_id"]
    assert new_id not in (keeper, a, b)
    merged = json.loads(run_cli("get", "--id", new_id).stdout)
    # The whole text of each absorbed row is appended: recallable, nothing lost.
    assert merged["content"] == f"{BASE}\n{PLUS_A}\n{PLUS_B}"
    assert merged["merged_from"] == [a, b] and merged["update_of"] == keeper
    assert merged["confidence"] == 0.9 and merged["signal"] == "test"
    # Recency is the knowledge's, not the merge's: the newest member's time.
    newest = json.loads(run_cli("get", "--id", b).stdout)["valid_from"]
    assert merged["refreshed_at"] == newest < merged["valid_from"]
    for old in (keeper, a, b):
        row = json.loads(run_cli("get", "--id", old).stdout)
        assert row["superseded_at"] and row["supersede_reason"].endswith(f"into {new_id}")
    assert {i for i, _ in _live(store_path)} == {new_id, other}
    # History: a read as of before the merge sees the three rows as they were.
    then = run_cli("search", "--text", "vault token", "--as-of", before, "--json")
    then = json.loads(then.stdout)
    assert {h["id"] for h in then["results"]} == {keeper, a, b}
    now = json.loads(run_cli("recall", "--query", "vault token staging", "--json").stdout)
    assert now["results"][0]["id"] == new_id


def test_keeper_is_the_most_used_then_the_most_confident_then_the_oldest(store, run_cli,
                                                                         tmp_path):  # fmt: skip
    first, used, _ = _ingest(run_cli, tmp_path, BASE, PLUS_A, PLUS_B)
    store.surface([used])  # one surface event: confidence x events beats zero
    report = _json(run_cli, "consolidate", "--force", "--dry-run")
    assert report["clusters"][0]["keeper"] == used
    store.surface([first])
    store.surface([first])
    report = _json(run_cli, "consolidate", "--force", "--dry-run")
    assert report["clusters"][0]["keeper"] == first


def test_rows_differing_in_a_number_or_in_polarity_survive(store, store_path, run_cli,
                                                           tmp_path):  # fmt: skip
    # Ten shared words and one number each: Jaccard 10/12, similar enough to cluster.
    ttl = "The session cache TTL on staging web servers behind the load balancer is {} minutes"
    thirty = add_row(store, ttl.format(30)).id
    sixty = add_row(store, ttl.format(60)).id
    hours = add_row(store, ttl.format(30).replace("minutes", "hours")).id
    rule = "squash commits before merging release branches into main"
    keep, agree = _ingest(
        run_cli, tmp_path, f"Always {rule}", (f"Always {rule} upstream", {"confidence": 0.6})
    )
    deny = add_row(store, f"Never {rule} upstream").id
    report = _json(run_cli, "consolidate", "--force")
    live = {i for i, _ in _live(store_path)}
    # A changed number, the number in another unit, a contradiction: never merged.
    assert {thirty, sixty, hours, deny} <= live
    assert agree not in live and keep not in live  # the agreeing pair did merge
    (cluster,) = [c for c in report["clusters"] if c["keeper"] == keep]
    actions = {m["id"]: m["action"] for m in cluster["members"]}
    assert actions[deny] == "parked" and actions[agree] == "absorb"
    assert "contested" in cluster["reason"] and report["parked"] == 1


def test_a_row_adding_a_prohibition_is_not_merged_into_one_without_it(store, store_path, run_cli):
    # The write path keeps the two apart (the negation governs what the first never mentions,
    # so it is no contradiction either); consolidate must not merge them on their similarity.
    base = "The staging load balancer drops idle websocket connections after sixty seconds"
    plain = add_row(store, base).id
    ruled = add_row(store, f"{base}; never reuse them").id
    assert _json(run_cli, "consolidate", "--force")["merged"] == 0
    assert {plain, ruled} <= {i for i, _ in _live(store_path)}


def test_rows_parked_by_a_keeper_that_disagrees_still_merge_with_each_other(
    store, store_path, run_cli, tmp_path
):
    # The "never" row is the most used, so it is the keeper; the two "always" rows disagree
    # with it, are parked, and then merge with each other.
    rule = "squash commits before merging release branches into main after review passes in ci"
    deny, keep, agree = _ingest(
        run_cli, tmp_path, f"Never {rule}", f"Always {rule}",
        (f"Always {rule} upstream", {"confidence": 0.6}),
    )  # fmt: skip
    store.surface([deny])
    report = _json(run_cli, "consolidate", "--force")
    assert [c["keeper"] for c in report["clusters"]] == [deny, keep]
    assert report["clusters"][0]["decision"] == "parked" and report["merged"] == 1
    live = {i for i, _ in _live(store_path)}
    assert deny in live and keep not in live and agree not in live


def test_subsumed_text_is_not_repeated_and_the_keeper_keeps_its_id(store, run_cli, tmp_path):
    keeper, short = _ingest(
        run_cli, tmp_path, PLUS_B, (BASE.lower(), {"signal": "user", "confidence": 0.6})
    )
    report = _json(run_cli, "consolidate", "--force")
    (cluster,) = report["clusters"]
    assert [m["action"] for m in cluster["members"]] == ["keeper", "subsumed"]
    assert cluster["result_id"] == keeper  # no new text: the keeper stays, metadata merged
    row = json.loads(run_cli("get", "--id", keeper).stdout)
    assert row["live"] and row["content"].count("vault") == 1
    assert row["merged_from"] == [short]


def test_reordered_phrasing_is_kept_as_distinct_text(store, run_cli, tmp_path):
    _ingest(
        run_cli, tmp_path, "Call cache flush before schema reload in staging deploys",
        ("Call schema reload before cache flush in staging deploys", {"confidence": 0.6}),
    )  # fmt: skip
    report = _json(run_cli, "consolidate", "--force")
    (cluster,) = report["clusters"]
    merged = json.loads(run_cli("get", "--id", cluster["result_id"]).stdout)["content"]
    assert "cache flush before schema" in merged and "schema reload before cache" in merged


def test_the_size_cap_records_truncated_and_dry_run_counts_the_loss(store, run_cli, tmp_path):
    # Seven tokens and one more (7/8): the judge folds them.
    big = "alpha beta gamma delta epsilon eta theta " + "pad " * 16300
    small = "theta eta epsilon delta gamma beta alpha zeta " + "pad " * 300
    keeper, gone = _ingest(run_cli, tmp_path, big, (small, {"confidence": 0.6}))
    dry = _json(run_cli, "consolidate", "--force", "--dry-run")
    (cluster,) = dry["clusters"]
    assert cluster["members"][1]["action"] == "truncated" and cluster["would_lose_tokens"] > 0
    _json(run_cli, "consolidate", "--force")
    row = json.loads(run_cli("get", "--id", keeper).stdout)
    assert row["live"] and row["content"] == big
    assert row["merged_from"] == [f"{gone}:truncated"]
    # The dropped text is still in history, on the tombstoned row.
    assert json.loads(run_cli("get", "--id", gone).stdout)["content"] == small


def test_taint_is_the_worst_of_the_members(store, run_cli, tmp_path):
    _ingest(
        run_cli, tmp_path, (BASE, {"taint": "trusted_internal"}),
        (PLUS_A, {"taint": "untrusted_web", "confidence": 0.6}),
    )  # fmt: skip
    report = _json(run_cli, "consolidate", "--force")
    merged = json.loads(run_cli("get", "--id", report["clusters"][0]["result_id"]).stdout)
    assert merged["taint"] == "untrusted_web"


def test_links_of_merged_rows_carry_over(store, run_cli, tmp_path):
    keeper, a = _ingest(run_cli, tmp_path, BASE, (PLUS_A, {"confidence": 0.6}))
    elsewhere = add_row(store, "Staging deploys read the vault address from env").id
    store.add_link(a, elsewhere, "supports", reason="same deploy")
    report = _json(run_cli, "consolidate", "--force")
    new_id = report["clusters"][0]["result_id"]
    links = json.loads(run_cli("links", "--id", new_id, "--json").stdout)
    pairs = {(x["src"], x["dst"], x["relation"]) for x in links}
    assert (new_id, elsewhere, "supports") in pairs and (new_id, keeper, "updates") in pairs


def test_dry_run_writes_nothing_and_says_exactly_what_the_run_does(store, store_path, run_cli,
                                                                   tmp_path):  # fmt: skip
    _ingest(run_cli, tmp_path, BASE, (PLUS_A, {"confidence": 0.6}))
    add_row(store, f"Never {BASE[0].lower()}{BASE[1:]} manually")
    before = table_counts(store_path)
    dry = _json(run_cli, "consolidate", "--dry-run")
    text = run_cli("consolidate", "--dry-run")
    assert table_counts(store_path) == before  # no meta, no clock, no row
    assert "would merge 1 cluster(s)" in text.stdout and "parked" in text.stdout
    real = _json(run_cli, "consolidate")
    strip = [({**c, "result_id": None, "applied": False}) for c in real["clusters"]]
    assert strip == dry["clusters"]
    assert (real["merged"], real["absorbed"], real["parked"], real["reviews_queued"]) == (
        dry["merged"], dry["absorbed"], dry["parked"], dry["reviews_queued"]
    )  # fmt: skip
    assert real["live_after"] == dry["live_after"]


def test_the_cadence_gate(store, store_path, run_cli, monkeypatch, tmp_path):
    monkeypatch.setenv("ZMEM_TEST_NOW", "2026-06-01T00:00:00Z")
    _ingest(run_cli, tmp_path, BASE, (PLUS_A, {"confidence": 0.6}))
    assert _json(run_cli, "consolidate")["merged"] == 1
    # A day later, nothing grew: skipped, said on one line, nothing changed.
    monkeypatch.setenv("ZMEM_TEST_NOW", "2026-06-02T00:00:00Z")
    before = table_counts(store_path)
    result = run_cli("consolidate")
    assert result.exit_code == 0 and result.stdout == ""
    assert result.stderr.strip().startswith("[zmem] consolidate: skipped by cadence gate (")
    assert len(result.stderr.strip().splitlines()) == 1
    dry = run_cli("consolidate", "--dry-run")
    assert "would skip by cadence gate" in dry.stderr
    assert table_counts(store_path) == before
    # Growth past the threshold opens it (1 -> 3 live rows: +200 %).
    pin = "Pin the terraform provider versions in every module of the platform repo"
    _ingest(run_cli, tmp_path, pin, (pin + " today", {"confidence": 0.6}))
    monkeypatch.setenv("ZMEM_CONSOLIDATE_GROWTH_THRESHOLD", "3")
    assert _json(run_cli, "consolidate")["skipped"] is not None
    monkeypatch.setenv("ZMEM_CONSOLIDATE_GROWTH_THRESHOLD", "0.2")
    assert _json(run_cli, "consolidate")["merged"] == 1
    # Nothing grew since: gated again, except with --force, or once the interval has passed.
    assert _json(run_cli, "consolidate")["skipped"] is not None
    assert _json(run_cli, "consolidate", "--force")["skipped"] is None
    monkeypatch.setenv("ZMEM_TEST_NOW", "2026-06-10T00:00:00Z")
    assert _json(run_cli, "consolidate", "--dry-run")["skipped"] is None  # 8 days > 7
    monkeypatch.setenv("ZMEM_CONSOLIDATE_MIN_INTERVAL_DAYS", "30")
    assert _json(run_cli, "consolidate")["skipped"] is not None


def test_a_second_run_at_the_same_time_skips_cleanly(store, store_path, run_cli, isolated_env):
    add_row(store, BASE, signal="test")
    add_row(store, PLUS_A, signal="user")
    before = table_counts(store_path)
    data = Path(os.environ["ZMEM_DATA"])
    with backup.maintenance_lock(data, "consolidate"):
        text = run_cli("consolidate", "--force")
        doc = run_cli("consolidate", "--force", "--json")
        org = run_cli("organize", "--force", "--json")
    assert text.exit_code == doc.exit_code == org.exit_code == 0
    assert "- skipped" in text.stderr
    assert json.loads(doc.stdout)["error"] == "consolidate lock busy"
    assert json.loads(org.stdout)["error"] == "organize lock busy"
    assert table_counts(store_path) == before


@pytest.mark.parametrize(
    "args", [["--threshold", "0"], ["--threshold", "1.5"], ["--threshold", "x"], ["--bogus"]]
)
def test_bad_input_is_refused_with_nothing_written(store, store_path, run_cli, args):
    add_row(store, BASE, signal="test")
    add_row(store, PLUS_A, signal="user")
    before = table_counts(store_path)
    result = run_cli("consolidate", "--force", *args)
    assert result.exit_code == 2
    assert table_counts(store_path) == before


def test_a_missing_store_is_not_created(run_cli, store_path):
    result = run_cli("consolidate", "--force")
    assert result.exit_code == 1 and not store_path.exists()  # as every read of a missing store


def test_namespace_scope(store, store_path, run_cli, tmp_path):
    for ns in ("project:one", "project:two"):
        _ingest(run_cli, tmp_path, BASE, (PLUS_A, {"confidence": 0.6}), namespace=ns)
    report = _json(run_cli, "consolidate", "--force", "--namespace", "project:two")
    assert report["merged"] == 1 and report["clusters"][0]["namespace"] == "project:two"
    assert len(_live(store_path)) == 3


# ---- the write path's judge on every pair consolidate would merge (issue 50) -----------------


def _unsure_pair(run_cli, tmp_path: Path) -> tuple[str, str]:
    """Two rows the judge cannot decide (Jaccard 0.83), from one file, so nothing asked yet;
    (older, newer)."""
    old, new = _ingest(
        run_cli, tmp_path, (UNSURE, {"ingestion_ts": "2026-01-01T00:00:00Z"}),
        (UNSURE_PLUS, {"confidence": 0.6, "ingestion_ts": "2026-01-02T00:00:00Z"}),
    )  # fmt: skip
    assert _reviews(run_cli) == []
    return old, new


def test_an_unsure_pair_is_not_merged_and_its_question_is_queued(store, store_path, run_cli,
                                                                 tmp_path):  # fmt: skip
    old, new = _unsure_pair(run_cli, tmp_path)
    report = _json(run_cli, "consolidate", "--force")
    assert report["merged"] == 0 and report["absorbed"] == 0 and report["reviews_queued"] == 1
    (cluster,) = report["clusters"]
    assert cluster["decision"] == "asked" and cluster["keeper"] == old
    assert [(m["id"], m["action"]) for m in cluster["members"]] == [
        (old, "keeper"), (new, "asked")]  # fmt: skip
    assert {i for i, _ in _live(store_path)} == {old, new}
    # Asked as an add of the newer row would have asked it; no agent was there: the queue.
    assert _reviews(run_cli) == [(new, old, "queue")]
    text = run_cli("consolidate", "--force")
    assert "merged 0 cluster(s)" in text.stdout


def test_a_rerun_does_not_queue_the_question_twice(store, store_path, run_cli, tmp_path):
    old, new = _unsure_pair(run_cli, tmp_path)
    assert _json(run_cli, "consolidate", "--force")["reviews_queued"] == 1
    again = _json(run_cli, "consolidate", "--force")
    assert again["merged"] == 0 and again["reviews_queued"] == 0
    # Still waiting for its answer, and still not guessed.
    assert [m["action"] for m in again["clusters"][0]["members"]] == ["keeper", "asked"]
    assert _reviews(run_cli) == [(new, old, "queue")]
    assert {i for i, _ in _live(store_path)} == {old, new}


def test_a_pair_answered_distinct_is_never_merged_nor_asked_again(store, store_path, run_cli,
                                                                   tmp_path):  # fmt: skip
    old, new = _unsure_pair(run_cli, tmp_path)
    _json(run_cli, "consolidate", "--force")
    assert run_cli("resolve", new, old, "--as", "distinct").exit_code == 0
    report = _json(run_cli, "consolidate", "--force")
    assert report["clusters"] == [] and report["reviews_queued"] == 0 and report["merged"] == 0
    assert _reviews(run_cli) == []
    # Even a pair the judge would fold stays two rows once someone said they are distinct.
    keep, twin = _ingest(run_cli, tmp_path, BASE, (PLUS_A, {"confidence": 0.6}))
    assert run_cli("resolve", twin, keep, "--as", "distinct").exit_code == 0
    report = _json(run_cli, "consolidate", "--force")
    assert report["merged"] == 0 and report["reviews_queued"] == 0
    assert {i for i, _ in _live(store_path)} == {old, new, keep, twin}


def test_a_dry_run_counts_the_questions_and_writes_none(store, store_path, run_cli, tmp_path):
    old, new = _unsure_pair(run_cli, tmp_path)
    before = table_counts(store_path)
    dry = _json(run_cli, "consolidate", "--force", "--dry-run")
    text = run_cli("consolidate", "--force", "--dry-run")
    assert table_counts(store_path) == before  # no review row, no row, no meta
    assert dry["reviews_queued"] == 1 and dry["merged"] == 0
    assert "would queue 1 review(s)" in text.stdout and f"asked     {new}" in text.stdout
    assert _reviews(run_cli) == []
    real = _json(run_cli, "consolidate", "--force")
    assert real["reviews_queued"] == dry["reviews_queued"]
    assert real["clusters"] == [{**c, "result_id": None} for c in dry["clusters"]]


def test_a_sure_duplicate_still_merges_beside_an_unsure_one(store, store_path, run_cli, tmp_path):
    # The same words reordered (Jaccard 1.0): the judge folds it. One word more (0.83): asked.
    keeper, twin, unsure = _ingest(
        run_cli, tmp_path, UNSURE,
        ("In modules, pin the terraform provider versions", {"confidence": 0.6}),
        (UNSURE_PLUS, {"confidence": 0.5}),
    )  # fmt: skip
    report = _json(run_cli, "consolidate", "--force")
    assert report["merged"] == 1 and report["absorbed"] == 1
    first = report["clusters"][0]
    assert [(m["id"], m["action"]) for m in first["members"]] == [
        (keeper, "keeper"), (twin, "absorb"), (unsure, "asked")]  # fmt: skip
    merged = first["result_id"]
    assert {i for i, _ in _live(store_path)} == {merged, unsure}
    # The question about the retired keeper was left to the next round, which asked it about
    # the merged row: once.
    [(a, b, origin)] = _reviews(run_cli)
    assert {a, b} == {merged, unsure} and origin == "queue" and report["reviews_queued"] == 1


# ---- prune ------------------------------------------------------------------------------------


def _set(store_path: Path, memory_id: str, **cols) -> None:
    conn = apsw.Connection(str(store_path))
    sets = ", ".join(f"{k} = ?" for k in cols)
    conn.execute(f"UPDATE memory SET {sets} WHERE id = ?", (*cols.values(), memory_id))
    conn.close()


def test_prune_retires_only_rows_with_no_evidence_of_use(store, store_path, run_cli, monkeypatch):
    monkeypatch.setenv("ZMEM_TEST_NOW", "2026-01-01T00:00:00Z")
    unused = store.add("scratch note about a flaky port", namespace="project:t", type="fact").id
    stale = store.add("scratch note about the proxy cache", namespace="project:t", type="fact").id
    recent = store.add("scratch note about the yarn lockfile", namespace="project:t", type="fact")
    retrieved = store.add("scratch note about grpc deadlines", namespace="project:t", type="fact")
    grounded = add_row(store, "The linter config lives in ruff.toml", signal="user").id
    store.surface([stale])
    monkeypatch.setenv("ZMEM_TEST_NOW", "2026-03-01T00:00:00Z")
    store.surface([recent.id])
    _set(store_path, retrieved.id, retrieval_count=1)
    assert _json(run_cli, "consolidate", "--force")["pruned"] == 0  # opt-in only
    dry = _json(run_cli, "consolidate", "--force", "--prune", "--dry-run")
    assert set(dry["pruned_ids"]) == {unused, stale}
    report = _json(run_cli, "consolidate", "--force", "--prune")
    assert set(report["pruned_ids"]) == {unused, stale}
    live = {i for i, _ in _live(store_path)}
    assert {recent.id, retrieved.id, grounded} <= live and not {unused, stale} & live
    # The unrecalled window is a knob: 90 days makes January's surface event fresh again.
    assert json.loads(run_cli("get", "--id", stale).stdout)["supersede_reason"].startswith("pruned")


def test_prune_honours_the_unrecalled_days_knob(store, store_path, run_cli, monkeypatch):
    monkeypatch.setenv("ZMEM_TEST_NOW", "2026-01-01T00:00:00Z")
    surfaced = store.add("scratch note about the proxy cache", namespace="project:t", type="fact")
    store.surface([surfaced.id])
    monkeypatch.setenv("ZMEM_TEST_NOW", "2026-03-01T00:00:00Z")
    monkeypatch.setenv("ZMEM_UNRECALLED_DAYS", "90")
    assert _json(run_cli, "consolidate", "--force", "--prune")["pruned"] == 0
    monkeypatch.setenv("ZMEM_UNRECALLED_DAYS", "30")
    assert _json(run_cli, "consolidate", "--force", "--prune")["pruned"] == 1


# ---- the NLI judge ----------------------------------------------------------------------------


def _judge(tmp_path: Path, body: str) -> str:
    script = tmp_path / "judge.py"
    script.write_text(f"import sys\nlines = sys.stdin.read().splitlines()\n{body}\n")
    return f"{sys.executable} {script}"


def _polar_pair(store, store_path):
    # "never after" reads as a negation to the regex, though both say the same; the write path
    # linked the pair contradicts (that is the polarity guard); a judge may clear it.
    keep = add_row(store, BASE).id
    other = add_row(store, BASE + ", never after them").id
    return keep, other


def test_the_judge_clears_a_polarity_flag_only_with_entailment(
    store, store_path, run_cli, monkeypatch, tmp_path
):
    keep, other = _polar_pair(store, store_path)
    seen = tmp_path / "seen.txt"
    monkeypatch.setenv(
        "ZMEM_NLI_CMD",
        _judge(tmp_path, f"open({str(seen)!r}, 'a').write(repr(lines) + '\\n')\nprint('neutral')"),
    )
    report = _json(run_cli, "consolidate", "--force")
    assert report["merged"] == 0 and report["parked"] == 1 and report["nli_calls"] == 1
    assert "NLI judge: neutral" in report["clusters"][0]["reason"]
    asked = eval(seen.read_text().splitlines()[0])  # noqa: S307 - our own file
    assert asked == [BASE, BASE + ", never after them"]
    monkeypatch.setenv("ZMEM_NLI_CMD", _judge(tmp_path, "print('Entailment')"))
    report = _json(run_cli, "consolidate", "--force")
    assert report["merged"] == 1 and "entailment" in report["clusters"][0]["reason"]


@pytest.mark.parametrize("body", ["sys.exit(3)", "print('')", "import time; time.sleep(60)"])
def test_a_failing_judge_parks_and_says_so(store, store_path, run_cli, monkeypatch, tmp_path, body):
    if "sleep" in body:
        monkeypatch.setattr("zmem.maintenance.nli.TIMEOUT_S", 0.5)
    _polar_pair(store, store_path)
    monkeypatch.setenv("ZMEM_NLI_CMD", _judge(tmp_path, body))
    result = run_cli("consolidate", "--force")
    assert result.exit_code == 0 and "parked" in result.stdout
    assert "[zmem] NLI judge failed (" in result.stderr
    assert len(_live(store_path)) == 2


def test_a_missing_judge_program_parks(store, store_path, run_cli, monkeypatch, tmp_path):
    _polar_pair(store, store_path)
    monkeypatch.setenv("ZMEM_NLI_CMD", str(tmp_path / "no-such-judge"))
    result = run_cli("consolidate", "--force", "--json")
    doc = json.loads(result.stdout)
    assert doc["merged"] == 0 and any("cannot run" in w for w in doc["warnings"])


def test_merge_contested_is_the_operators_override(store, store_path, run_cli):
    _polar_pair(store, store_path)
    report = _json(run_cli, "consolidate", "--force", "--merge-contested")
    assert report["merged"] == 1 and "--merge-contested" in report["clusters"][0]["reason"]


def test_the_cosine_path_with_the_real_model(store_path, run_cli, monkeypatch):
    """MiniLM: paraphrases with few shared words cluster by cosine, and are asked about, never
    merged on it; a changed number does not cluster."""
    monkeypatch.setenv("ZMEM_EMBED_PROFILE", "minilm")
    with MemoryStore.open(store_path, create=True) as s:
        a = add_row(s, "Run the database migrations before the integration test suite.").id
        b = add_row(s, "Integration tests fail unless the DB migrations were applied first.").id
        n1 = add_row(s, "The billing API timeout in staging is 30 seconds.").id
        n2 = add_row(s, "In staging the billing API times out after 60 seconds.").id
    report = _json(run_cli, "consolidate", "--force")
    members = {m["id"]: m["action"] for c in report["clusters"] for m in c["members"]}
    assert {a, b} <= set(members) and not {n1, n2} & set(members)
    # A paraphrase is not a fold to the judge (the words differ): it stays live, asked.
    assert "asked" in (members[a], members[b]) and report["merged"] == 0


# ---- the fixed point (issue 34) -----------------------------------------------------------------

# 35 shared words C, three more before them in A and three after them in B (the same sentence
# with words added, not swapped): A and B fold (Jaccard 35/41 = 0.85). D is A's three, C without
# its first six, B's three: close to neither alone (32/41 = 0.78, under 0.80), and one the
# judge folds into the merged text A + B (35/41). A one-pass plan leaves D for the next run;
# the job plans again until nothing merges.
WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november "
    "oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu amber basalt "
    "cobalt dune ember fjord garnet harbor ivory jasper kelp lagoon marble nectar onyx"
).split()
_C, _A, _B = WORDS[:35], WORDS[35:38], WORDS[38:]
ROW_A = " ".join(_A + _C)
ROW_B = " ".join(_C + _B)
ROW_D = " ".join(_A + _C[6:] + _B)


def test_one_run_reaches_the_fixed_point(store, store_path, run_cli, tmp_path):
    a, _, _ = _ingest(run_cli, tmp_path, ROW_A, ROW_B, ROW_D)
    store.close()
    first = _json(run_cli, "consolidate", "--force")
    assert first["merged"] == 2 and first["absorbed"] == 2, first
    assert first["rounds"] == 3 and first["fixed_point"] is True  # the last round found nothing
    (survivor,) = _live(store_path)
    assert all(w in survivor[1] for w in WORDS) and survivor[0] != a
    second = _json(run_cli, "consolidate", "--force")
    assert second["merged"] == 0 and second["absorbed"] == 0 and second["rounds"] == 1


def test_a_dry_run_plans_one_round_and_says_so(store, store_path, run_cli, tmp_path):
    _ingest(run_cli, tmp_path, ROW_A, ROW_B, ROW_D)
    store.close()
    before = table_counts(store_path)
    plan = _json(run_cli, "consolidate", "--force", "--dry-run")
    assert plan["merged"] == 1 and plan["rounds"] == 1
    assert table_counts(store_path) == before


def test_a_run_that_cannot_settle_says_so(store, store_path, run_cli, monkeypatch, tmp_path):
    from zmem.maintenance import consolidate

    monkeypatch.setattr(consolidate, "MAX_ROUNDS", 1)
    _ingest(run_cli, tmp_path, ROW_A, ROW_B, ROW_D)
    store.close()
    done = _json(run_cli, "consolidate", "--force")
    assert done["fixed_point"] is False and done["rounds"] == 1
    assert any("still merging after 1 rounds" in w for w in done["warnings"])
