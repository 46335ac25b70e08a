"""The CLI as users and hosts call it: every refusal exits 2 with one stable stderr line and
writes nothing; a missing id exits 1; JSON outputs have the spec's shapes; stdin content; the
store.py shim and `python -m zmem` run the same commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import table_counts
from zmem import MemoryStore

ROOT = Path(__file__).resolve().parents[1]
MISSING = "00000000-0000-4000-8000-000000000000"
ADD = ["add", "--namespace", "project:t", "--type", "lesson", "--signal", "test"]


def add(run_cli, content: str, *extra: str) -> str:
    r = run_cli(*ADD, "--content", content, "--json", *extra)
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)["id"]


def one_error_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_help_explains_commands(run_cli):
    r = run_cli("--help")
    assert r.exit_code == 0
    for cmd in (
        "add",
        "update",
        "invalidate",
        "supersede",
        "get",
        "list",
        "stats",
        "links",
        "contradict",
        "entity-list",
        "entity-merge",
    ):
        assert cmd in r.stdout
    assert "Exit codes" in r.stdout
    assert "--signal" in run_cli("add", "--help").stdout


def test_add_json_shape(run_cli):
    r = run_cli(*ADD, "--content", "Use rg for search", "--json")
    doc = json.loads(r.stdout)
    assert set(doc) == {"id", "result", "warnings", "review"} and doc["result"] == "stored"
    again = json.loads(run_cli(*ADD, "--content", "Use rg for search", "--json").stdout)
    assert again == {"id": doc["id"], "result": "deduped", "warnings": [], "review": []}


def test_add_json_reports_redactions(run_cli):
    secret = "ghp_" + "Z9y8X7w6V5" * 3 + "u4T3s2"
    r = run_cli(*ADD, "--content", f"token {secret}", "--capture-mode", "auto", "--json")
    assert json.loads(r.stdout)["warnings"] == [{"type": "redacted", "count": 1}]


def test_add_text_output(run_cli):
    r = run_cli(*ADD, "--content", "Use rg for search")
    assert r.exit_code == 0 and r.stdout.startswith("stored ")


def test_update_json_shape_and_lineage(run_cli):
    old = add(run_cli, "Port is 5432")
    r = run_cli("update", "--id", old, "--content", "Port is 5433", "--json")
    doc = json.loads(r.stdout)
    assert set(doc) == {"id", "result", "created_new", "warnings", "review"}
    assert doc["result"] == "stored" and doc["created_new"] is True
    got = json.loads(run_cli("get", "--id", doc["id"]).stdout)
    assert got["update_of"] == old and got["content"] == "Port is 5433"


def test_content_from_stdin(run_cli):
    big = "x" * 65000 + " end"
    r = run_cli(*ADD, "--content", "-", "--json", input=big + "\n")
    got = json.loads(run_cli("get", "--id", json.loads(r.stdout)["id"]).stdout)
    assert got["content"] == big
    r = run_cli("update", "--id", got["id"], "--content", "-", "--json", input="revised\n")
    assert json.loads(run_cli("get", "--id", json.loads(r.stdout)["id"]).stdout)["content"] == (
        "revised"
    )


def test_get_is_always_json_with_links_entities_episodes(run_cli):
    a = add(run_cli, "Always squash commits before merging with rg checks")
    b = add(run_cli, "Never squash commits before merging with rg checks")
    got = json.loads(run_cli("get", "--id", a).stdout)
    for key in (
        "id",
        "content",
        "type",
        "tags",
        "namespace",
        "signal",
        "confidence",
        "taint",
        "trust_score",
        "valid_from",
        "valid_until",
        "update_of",
        "merged_from",
        "links",
        "entities",
        "episodes",
        "injection_risk",
        "stale_source",
    ):
        assert key in got
    assert got["episodes"] == []
    assert {(link["other"], link["relation"]) for link in got["links"]} == {(b, "contradicts")}
    assert any(e["name"] == "ripgrep" for e in got["entities"])


def test_list_and_stats(run_cli):
    a = add(run_cli, "Use rg for search")
    run_cli(
        "add",
        "--namespace",
        "user:global",
        "--type",
        "preference",
        "--content",
        "Prefers small commits",
        "--signal",
        "user",
    )
    run_cli("invalidate", "--id", a, "--reason", "switched tools")
    rows = json.loads(run_cli("list", "--json").stdout)
    assert [r["namespace"] for r in rows] == ["user:global"]
    rows = json.loads(run_cli("list", "--include-superseded", "--json").stdout)
    assert len(rows) == 2
    assert "SUPERSEDED" in run_cli("list", "--include-superseded").stdout
    stats = json.loads(run_cli("stats", "--json").stdout)
    assert (stats["total"], stats["live"]) == (2, 1)
    assert isinstance(stats["total"], int) and isinstance(stats["live"], int)
    assert "1 live" in run_cli("stats").stdout


def test_list_as_of(run_cli, monkeypatch):
    monkeypatch.setenv("ZMEM_TEST_NOW", "2026-01-01T00:00:00Z")
    old = add(run_cli, "Port is 5432")
    monkeypatch.setenv("ZMEM_TEST_NOW", "2026-02-01T00:00:00Z")
    run_cli("update", "--id", old, "--content", "Port is 5433")
    before = json.loads(run_cli("list", "--as-of", "2026-01-15", "--json").stdout)
    assert [r["content"] for r in before] == ["Port is 5432"]
    now = json.loads(run_cli("list", "--json").stdout)
    assert [r["content"] for r in now] == ["Port is 5433"]


def test_links_list_and_add(run_cli):
    a = add(run_cli, "Use rg for search")
    b = add(run_cli, "Deploys need two approvals")
    r = run_cli("links", "--add", "--id", a, "--id", b, "--relation", "related", "--json")
    assert json.loads(r.stdout)["created"] is True
    again = run_cli("links", "--add", "--id", a, "--id", b, "--relation", "related", "--json")
    assert json.loads(again.stdout)["created"] is False  # idempotent
    edges = json.loads(run_cli("links", "--id", a, "--json").stdout)
    assert {(e["src"], e["dst"], e["direction"], e["other"]) for e in edges} == {
        (a, b, "out", b),
        (b, a, "in", b),
    }
    typed = run_cli("links", "--add", "--id", a, "--id", b, "--relation", "derives", "--json")
    assert json.loads(typed.stdout)["created"] is True
    edges = json.loads(run_cli("links", "--id", b, "--json").stdout)
    assert sum(e["relation"] == "derives" for e in edges) == 1  # typed: one direction only


def test_contradict_moves_trust_once(run_cli):
    a = add(run_cli, "Use rg for search")
    b = add(run_cli, "Deploys need two approvals")
    for _ in range(2):
        r = run_cli("contradict", "--id", a, "--id", b, "--reason", "conflict", "--json")
        assert r.exit_code == 0
    trust = json.loads(r.stdout)["trust_score"]
    assert trust == {a: 0.9, b: 0.9}


def test_ten_contradictions_land_at_exactly_zero(run_cli):
    a = add(run_cli, "Base memory about deploys")
    for i in range(11):
        b = add(run_cli, f"Unrelated memory number {i} about {'xyzzy' * (i + 1)}")
        run_cli("contradict", "--id", a, "--id", b, "--reason", "conflict")
    assert json.loads(run_cli("get", "--id", a).stdout)["trust_score"] == 0.0


def test_entity_list_and_merge(run_cli):
    add(run_cli, "Deploy with the `deployctl` tool", "--tags", "entity:DeployCtl2")
    ents = json.loads(run_cli("entity-list", "--json").stdout)
    assert all(set(e) == {"id", "kind", "name", "aliases", "links"} for e in ents)
    by_name = {e["name"]: e for e in ents}
    src, dst = by_name["DeployCtl2"], by_name["deployctl"]
    before = ents
    dry = run_cli("entity-merge", "--from", src["id"], "--to", dst["id"])
    assert dry.exit_code == 0 and "dry run" in dry.stdout
    assert json.loads(run_cli("entity-list", "--json").stdout) == before
    done = run_cli("entity-merge", "--from", src["id"], "--to", dst["id"], "--confirm", "--json")
    plan = json.loads(done.stdout)
    assert plan["applied"] is True and plan["link_collisions"] == 1
    after = {e["name"]: e for e in json.loads(run_cli("entity-list", "--json").stdout)}
    assert "DeployCtl2" not in after
    assert "deployctl2" in after["deployctl"]["aliases"]


def test_entity_list_kind_filter(run_cli):
    add(run_cli, "Search with rg", "--tags", "entity:person:Alice")
    kinds = {
        e["kind"] for e in json.loads(run_cli("entity-list", "--kind", "person", "--json").stdout)
    }
    assert kinds == {"person"}


# ---- refusals: exit 2, one stderr line, nothing written ------------------------------------


def _refusal_cases(a: str, b: str, person: str, tool: str) -> list[list[str]]:
    return [
        [*ADD, "--content", ""],
        [*ADD, "--content", "   "],
        [*ADD, "--content", "x" * 65537],
        ["add", "--namespace", "global", "--type", "fact", "--content", "x"],
        ["add", "--namespace", "userglobal", "--type", "fact", "--content", "x"],
        ["add", "--namespace", "project:t", "--type", "episode", "--content", "x"],
        ["add", "--namespace", "project:t", "--type", "fact", "--content", "x", "--taint", "meh"],
        ["add", "--namespace", "project:t", "--type", "fact", "--content", "x", "--signal", "gut"],
        [
            "add",
            "--namespace",
            "project:t",
            "--type",
            "fact",
            "--content",
            "x",
            "--source-ref",
            "nonsense",
        ],
        ["add", "--type", "fact", "--content", "x"],
        ["update", "--id", MISSING, "--content", "x"],
        ["update", "--id", a, "--content", "   "],
        ["update", "--id", a, "--content", "x", "--confidence", "2"],
        ["invalidate", "--id", a],
        ["invalidate", "--id", a, "--reason", "  "],
        ["links", "--add", "--id", a, "--id", a, "--relation", "related"],
        ["links", "--add", "--id", a, "--id", b, "--relation", "contradicts"],
        ["links", "--add", "--id", a, "--id", b, "--relation", "supports"],
        ["links", "--add", "--id", a, "--relation", "related"],
        ["links", "--add", "--id", a, "--id", b, "--relation", "bogus"],
        ["contradict", "--id", a, "--id", b],
        ["contradict", "--id", a, "--reason", "x"],
        ["entity-merge", "--from", person, "--to", tool, "--confirm"],
        ["entity-merge", "--from", person, "--to", person, "--confirm"],
        ["entity-merge", "--from", "nope", "--to", tool, "--confirm"],
        ["list", "--as-of", "yesterday-ish"],
    ]


def test_every_refusal_exits_2_with_one_line_and_writes_nothing(run_cli, store_path):
    a = add(run_cli, "Use rg for search", "--tags", "entity:person:Alice")
    b = add(run_cli, "Deploys need two approvals", "--namespace", "project:t")
    c = json.loads(
        run_cli(
            "add",
            "--namespace",
            "project:other",
            "--type",
            "fact",
            "--content",
            "Other project row",
            "--json",
        ).stdout
    )["id"]
    ents = {e["name"]: e["id"] for e in json.loads(run_cli("entity-list", "--json").stdout)}
    cases = _refusal_cases(a, b, ents["Alice"], ents["ripgrep"])
    cases.append(["links", "--add", "--id", a, "--id", c, "--relation", "related"])
    tomb = add(run_cli, "Soon gone")
    run_cli("supersede", "--id", tomb)
    cases += [
        ["invalidate", "--id", tomb, "--reason", "again"],
        ["supersede", "--id", tomb],
        ["update", "--id", tomb, "--content", "x"],
    ]
    before = table_counts(store_path)
    for args in cases:
        r = run_cli(*args)
        assert r.exit_code == 2, (args, r.stdout, r.stderr)
        assert one_error_line(r).startswith("zmem: error:"), (args, r.stderr)
        assert table_counts(store_path) == before, args


def test_namespace_refusal_names_the_canonical_namespace(run_cli):
    r = run_cli("add", "--namespace", "users:global", "--type", "fact", "--content", "x")
    assert r.exit_code == 2 and "user:global" in one_error_line(r)


@pytest.mark.parametrize(
    "args",
    [
        ["get", "--id", MISSING],
        ["links", "--id", MISSING],
        ["invalidate", "--id", MISSING, "--reason", "x"],
        ["supersede", "--id", MISSING],
        ["contradict", "--id", MISSING, "--id", MISSING[:-1] + "1", "--reason", "x"],
    ],
)
def test_missing_id_exits_1(run_cli, store_path, args):
    add(run_cli, "Something")
    before = table_counts(store_path)
    r = run_cli(*args)
    assert r.exit_code == 1, r.stderr
    assert one_error_line(r).startswith("zmem: error: no memory with id")
    assert table_counts(store_path) == before


def test_get_and_links_share_the_missing_id_line(run_cli):
    add(run_cli, "Something")
    assert one_error_line(run_cli("get", "--id", MISSING)) == one_error_line(
        run_cli("links", "--id", MISSING)
    )


def test_invalid_capture_mode_env_is_a_usage_error(run_cli, store_path, monkeypatch):
    add(run_cli, "Something")
    before = table_counts(store_path)
    monkeypatch.setenv("ZMEM_CAPTURE_MODE", "sometimes")
    r = run_cli(*ADD, "--content", "Another")
    assert r.exit_code == 2 and "ZMEM_CAPTURE_MODE" in one_error_line(r)
    assert table_counts(store_path) == before


def test_store_option_overrides_env(run_cli, tmp_path):
    other = tmp_path / "other.sqlite"
    r = run_cli("--store", str(other), *ADD, "--content", "Elsewhere", "--json")
    assert r.exit_code == 0
    with MemoryStore.open(other) as s:
        assert s.stats()["total"] == 1


# ---- real entry points in subprocesses -----------------------------------------------------


def _env(store_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZMEM_")}
    env["ZMEM_STORE"] = str(store_path)
    env["ZMEM_DATA"] = str(store_path.parent / "data")
    return env


@pytest.mark.parametrize(
    "entry",
    [
        [sys.executable, "-m", "zmem"],
        [sys.executable, str(ROOT / "src/zmem/plugin/skills/memory/scripts/store.py")],
    ],
)
def test_entry_points_run_the_same_cli(store_path, entry):
    env = _env(store_path)
    r = subprocess.run(
        [*entry, *ADD, "--content", "Via entry point", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    mid = json.loads(r.stdout)["id"]
    r = subprocess.run(
        [*entry, "get", "--id", mid], env=env, capture_output=True, text=True, timeout=60
    )
    assert json.loads(r.stdout)["content"] == "Via entry point"
    r = subprocess.run(
        [*entry, "invalidate", "--id", mid], env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0
    r = subprocess.run(
        [*entry, "get", "--id", MISSING], env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 1


def test_unusable_store_paths_fail_with_one_line(run_cli, tmp_path):
    folder = tmp_path / "adir"
    folder.mkdir()
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not a database" * 100)
    for path in (folder, junk):
        r = run_cli("--store", str(path), "stats")
        assert r.exit_code == 2
        assert one_error_line(r).startswith("zmem: error: cannot ")
    assert junk.read_bytes() == b"this is not a database" * 100
