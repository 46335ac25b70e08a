"""The team hub (issue 32) against a real PostgreSQL 15 server the tests start themselves (no
mock of the database): `hub init`, `hub grant`, `hub join`, `sync`, `sync --status`, `hub
leave` through the real CLI, for several data dirs standing for several machines. Credentials
come from a password file (PGPASSFILE), as libpq finds them; the URLs carry none."""

from __future__ import annotations

import json

import psycopg

from hub_fixtures import NS
from zmem import MemoryStore


def test_two_machines_share_a_namespace_and_nothing_else(machines, hub):
    a, b = machines("alice"), machines("bob")
    shared = a.add("Run make lint before every commit in the widget repo.")
    private = a.add("My editor is helix.", namespace="user:global")
    a.ok("hub", "join", "--url", a.url, "--namespace", NS)
    b.ok("hub", "join", "--url", b.url, "--namespace", NS)
    pushed = a.sync()
    assert pushed["pushed"]["memory"] == 1 and pushed["hub_changed"] == 1
    pulled = b.sync()
    assert pulled["pulled"]["memory"] == 1
    assert shared in b.rows() and b.rows("user:global") == {}
    assert private not in b.rows("user:global")
    # The hub holds it once, written by alice from a's machine.
    with psycopg.connect(hub.url()) as conn:
        rows = conn.execute("SELECT kind, key, written_by FROM zmem_hub.record").fetchall()
    assert rows == [("memory", shared, "alice")]


def test_a_sync_with_nothing_new_writes_nothing(machines):
    a = machines("alice")
    a.add("Use uv for the widget repo's virtualenvs.")
    a.ok("hub", "join", "--url", a.url, "--namespace", NS)
    a.sync()
    before = a.store.read_bytes()
    mtime = a.store.stat().st_mtime_ns
    again = a.sync()
    assert again["hub_changed"] == 0 and sum(again["pulled"].values()) == 0
    assert a.store.read_bytes() == before and a.store.stat().st_mtime_ns == mtime


def test_nothing_is_pushed_before_a_join(machines, hub):
    a = machines("alice")
    a.add("A lesson before any join.")
    done = a.cli("sync")
    assert done.exit_code == 2 and "join a hub first" in done.stderr
    with psycopg.connect(hub.url()) as conn:
        assert conn.execute("SELECT count(*) FROM zmem_hub.record").fetchone()[0] == 0


def _join(*ms, namespace: str = NS) -> None:
    for m in ms:
        m.ok("hub", "join", "--url", m.url, "--namespace", namespace)


def test_updates_and_tombstones_travel_and_lineage_stays_append_only(machines):
    a, b = machines("alice"), machines("bob")
    _join(a, b)
    old = a.add("The API dev server listens on port 8080.")
    gone = a.add("Deploys go out on Fridays.")
    a.sync()
    b.sync()
    newer = "The API dev server listens on port 9191."
    new = json.loads(b.ok("update", "--id", old, "--content", newer, "--json").stdout)["id"]
    b.ok("invalidate", "--id", gone, "--reason", "deploys moved to Tuesdays")
    b.sync()
    a.sync()
    rows = a.rows()
    assert rows[old][1] is False and rows[new] == (
        "The API dev server listens on port 9191.",
        True,
        old,
    )
    assert rows[gone][1] is False
    assert a.rows() == b.rows()
    # --as-of before the update still reads the old content on the machine that never updated.
    with MemoryStore.open(a.store) as s:
        before = s.get(old)
    assert before.content.endswith("8080.") and before.supersede_reason == "updated"


def test_a_late_push_of_the_old_row_never_undoes_a_tombstone(machines, hub):
    a, b = machines("alice"), machines("bob")
    _join(a, b)
    x = a.add("Feature flags live in flags.yaml.")
    a.sync()
    b.sync()
    b.ok("supersede", "--id", x, "--reason", "flags moved to the config service")
    b.sync()
    # a never pulled the tombstone; its bookkeeping is lost (a restored data dir), so its next
    # sync pushes the live row again.
    (a.data / "hub" / "state.sqlite").unlink()
    a.sync()
    with psycopg.connect(hub.url()) as conn:
        body = conn.execute(
            "SELECT body FROM zmem_hub.record WHERE kind = 'memory' AND key = %s", (x,)
        ).fetchone()[0]
    assert body["superseded_at"] is not None and body["supersede_reason"].startswith("flags moved")
    assert a.rows()[x][1] is False and b.rows()[x][1] is False


def test_two_machines_revise_one_memory_before_syncing_both_revisions_stay(machines):
    a, b = machines("alice"), machines("bob")
    _join(a, b)
    x = a.add("CI runs on ubuntu-22.04.")
    a.sync()
    b.sync()
    ra = json.loads(a.ok("update", "--id", x, "--content", "CI runs on ubuntu-24.04.",
                         "--json").stdout)["id"]  # fmt: skip
    rb = json.loads(b.ok("update", "--id", x, "--content", "CI runs on debian-12.",
                         "--json").stdout)["id"]  # fmt: skip
    for m in (a, b, a):
        m.sync()
    for m in (a, b):
        rows = m.rows()
        assert rows[x][1] is False
        assert rows[ra] == ("CI runs on ubuntu-24.04.", True, x)
        assert rows[rb] == ("CI runs on debian-12.", True, x)
    assert a.rows() == b.rows()


def test_links_and_episodes_travel(machines):
    a, b = machines("alice"), machines("bob")
    _join(a, b)
    one = a.add("Run pytest -x before pushing.")
    two = a.add("The CI suite takes 20 minutes.")
    a.ok("links", "--add", "--id", one, "--id", two, "--relation", "supports",
         "--reason", "why pytest first")  # fmt: skip
    episode = json.loads(a.ok("episode-open", "--namespace", NS, "--json").stdout)["id"]
    a.ok("episode-add", "--episode", episode, "--memory", one)
    a.sync()
    b.sync()
    links = json.loads(b.ok("links", "--id", one, "--json").stdout)
    assert {(k["src"], k["dst"], k["relation"]) for k in links} >= {(one, two, "supports")}
    listed = json.loads(b.ok("episode-list", "--namespace", NS, "--json").stdout)
    assert [(e["id"], e["members"], e["ended_at"]) for e in listed] == [(episode, 1, None)]
    a.ok("episode-close", "--episode", episode)
    a.sync()
    b.sync()
    listed = json.loads(b.ok("episode-list", "--namespace", NS, "--json").stdout)
    assert listed[0]["ended_at"] is not None


def test_a_near_duplicate_from_another_machine_is_resolved_the_same_way_everywhere(machines):
    a, b = machines("alice"), machines("bob")
    _join(a, b)
    first = a.add("Always run the database migrations before starting the API server.")
    second = b.add("Always run the database migrations before starting the API server!")
    a.sync()
    b.sync()
    a.sync()
    for m in (a, b):
        rows = m.rows()
        assert {i for i, r in rows.items() if r[1]} == {first}
        assert rows[second][1] is False
    with MemoryStore.open(b.store) as s:
        assert s.get(second).supersede_reason == f"duplicate of {first}"
