"""Episodes through the real CLI: open prints an id, add attaches a live memory once (a
tombstoned or missing one, or a closed episode, is refused with exit 2 and nothing written),
memberships survive a later supersede, close happens once with the token count of the live
members and an optional summary memory written through the redacting add path, list is newest
first with member counts, and get shows a memory's episodes."""

from __future__ import annotations

import json

from conftest import add_row, table_counts


def _json(run_cli, *args):
    result = run_cli(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_an_episode_from_open_to_close(store, run_cli):
    a = add_row(store, "Run the migrations first. Then seed the fixtures.", signal="test").id
    b = add_row(store, "The staging deploy needs the vault token", signal="test").id
    opened = run_cli("episode-open", "--namespace", "project:t")
    episode = opened.stdout.strip()
    assert opened.exit_code == 0 and len(episode) == 36
    assert _json(run_cli, "episode-add", "--episode", episode, "--memory", a)["added"] is True
    assert _json(run_cli, "episode-add", "--episode", episode, "--memory", b[:8])["added"] is True
    again = _json(run_cli, "episode-add", "--episode", episode, "--memory", a)
    assert again["added"] is False  # idempotent per pair
    store.supersede(b)  # a tombstone never removes a membership, but is not counted at close
    closed = _json(run_cli, "episode-close", "--episode", episode, "--summary")
    assert closed["members"] == 1 and closed["ended_at"] and closed["token_count"] > 0
    summary = json.loads(run_cli("get", "--id", closed["summary_memory_id"]).stdout)
    assert summary["content"] == "Episode " + closed["started_at"][:10] + (
        " in project:t:\n- Run the migrations first."
    )
    assert summary["signal"] == "none" and summary["namespace"] == "project:t"
    got = json.loads(run_cli("get", "--id", b).stdout)
    assert [e["id"] for e in got["episodes"]] == [episode]
    listed = _json(run_cli, "episode-list", "--namespace", "project:t")
    assert [(e["id"], e["members"]) for e in listed] == [(episode, 2)]


def test_the_summary_is_redacted(store, run_cli):
    secret = "Deploy with token ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    m = store.add(secret, namespace="project:t", type="fact", signal="test",
                  capture_mode="reviewed").id  # fmt: skip
    episode = run_cli("episode-open", "--namespace", "project:t").stdout.strip()
    run_cli("episode-add", "--episode", episode, "--memory", m)
    closed = _json(run_cli, "episode-close", "--episode", episode, "--summary")
    text = json.loads(run_cli("get", "--id", closed["summary_memory_id"]).stdout)["content"]
    assert "ghp_a1B2" not in text


def test_refusals_write_nothing(store, store_path, run_cli):
    m = add_row(store, "Use uv for the venv").id
    gone = add_row(store, "Pin the node version in .nvmrc").id
    store.supersede(gone)
    episode = run_cli("episode-open", "--namespace", "project:t").stdout.strip()
    run_cli("episode-close", "--episode", episode)
    other = run_cli("episode-open", "--namespace", "project:t").stdout.strip()
    before = table_counts(store_path)
    assert run_cli("episode-add", "--episode", other, "--memory", gone).exit_code == 2
    assert run_cli("episode-add", "--episode", other, "--memory", "ffffffff").exit_code == 2
    assert run_cli("episode-add", "--episode", "nope", "--memory", m).exit_code == 2
    assert run_cli("episode-add", "--episode", episode, "--memory", m).exit_code == 2  # closed
    assert run_cli("episode-close", "--episode", episode).exit_code == 2  # write-once
    assert run_cli("episode-open", "--namespace", "global").exit_code == 2  # near-miss
    assert run_cli("episode-open").exit_code == 2
    assert table_counts(store_path) == before


def test_list_is_newest_first(store, run_cli, monkeypatch):
    monkeypatch.setenv("ZMEM_TEST_NOW", "2026-01-01T00:00:00Z")
    first = run_cli("episode-open", "--namespace", "project:a").stdout.strip()
    monkeypatch.setenv("ZMEM_TEST_NOW", "2026-01-02T00:00:00Z")
    second = run_cli("episode-open", "--namespace", "project:b").stdout.strip()
    assert [e["id"] for e in _json(run_cli, "episode-list")] == [second, first]
    text = run_cli("episode-list").stdout.splitlines()
    assert text[0].startswith(second) and "open" in text[0]
