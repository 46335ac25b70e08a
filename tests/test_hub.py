"""The team hub (issue 32) against a real PostgreSQL 15 server the tests start themselves (no
mock of the database): `hub init`, `hub grant`, `hub join`, `sync`, `sync --status`, `hub
leave` through the real CLI, for several data dirs standing for several machines. Credentials
come from a password file (PGPASSFILE), as libpq finds them; the URLs carry none."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from hub_fixtures import NS, ROLES, Machine
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


# ---- access: row level security, credentials, a hub that is not there -----------------------


def test_a_role_scoped_to_one_namespace_cannot_reach_another_through_zmem(machines):
    a, c = machines("alice"), machines("carol")
    _join(a)
    a.add("Widget's release checklist lives in RELEASE.md.")
    a.sync()
    refused = c.cli("hub", "join", "--url", c.url, "--namespace", NS)
    assert refused.exit_code == 2 and refused.stderr.count("\n") == 1
    assert "not granted project:github.com/acme/widget" in refused.stderr
    assert not (c.data / "hub").exists() and not c.store.exists()
    c.ok("hub", "join", "--url", c.url, "--namespace", "project:github.com/acme/gadget")
    c.add("Gadget builds with bazel.", namespace="project:github.com/acme/gadget")
    pulled = c.sync()
    assert pulled["pulled"]["memory"] == 0 and c.rows() == {}


def test_row_level_security_holds_in_plain_sql(machines, hub):
    a = machines("alice")
    _join(a)
    secret_plan = a.add("Widget's acquisition closes in March.")
    a.sync()
    carol = hub.url(user="carol", password=None)
    with psycopg.connect(carol, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM zmem_hub.record").fetchone()[0] == 0
        assert (
            conn.execute(
                "SELECT count(*) FROM zmem_hub.record WHERE key = %s", (secret_plan,)
            ).fetchone()[0]
            == 0
        )
        assert conn.execute("SELECT namespace FROM zmem_hub.access").fetchall() == [
            ("project:github.com/acme/gadget",)
        ]
        for sql, args in (
            ("INSERT INTO zmem_hub.record (kind, key, namespace, seq, body, machine) "
             "VALUES ('memory', 'x', %s, 999999, '{}', 'psql')", (NS,)),
            ("UPDATE zmem_hub.record SET body = '{}' WHERE namespace = %s", (NS,)),
        ):  # fmt: skip
            try:
                cur = conn.execute(sql, args)
            except psycopg.errors.InsufficientPrivilege:
                continue
            assert cur.rowcount == 0  # an UPDATE sees no row it may not read
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO zmem_hub.access VALUES ('carol', %s, true)", (NS,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DELETE FROM zmem_hub.record")
    with psycopg.connect(hub.url()) as conn:
        assert conn.execute("SELECT count(*) FROM zmem_hub.record").fetchone()[0] == 1
        assert conn.execute("SELECT body->>'content' FROM zmem_hub.record").fetchone()[0] == (
            "Widget's acquisition closes in March."
        )


def test_a_wrong_password_is_one_line_exit_2_and_nothing_written(
    machines, hub, tmp_path, monkeypatch
):
    a = machines("alice")
    wrong = tmp_path / "wrong-pgpass"
    wrong.write_text(f"127.0.0.1:{hub.port}:*:alice:not-the-password\n")
    wrong.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(wrong))
    done = a.cli("hub", "join", "--url", a.url, "--namespace", NS)
    assert done.exit_code == 2 and done.stdout == "" and done.stderr.count("\n") == 1
    assert "refused the connection" in done.stderr and "password" in done.stderr
    assert "not-the-password" not in done.stderr
    assert not a.data.exists()
    monkeypatch.setenv("PGPASSFILE", str(hub.pgpass))
    _join(a)
    a.add("Widget uses semantic versioning.")
    before = a.store.read_bytes()
    monkeypatch.setenv("PGPASSFILE", str(wrong))
    done = a.cli("sync")
    assert done.exit_code == 2 and done.stderr.count("\n") == 1 and "refused" in done.stderr
    assert a.store.read_bytes() == before
    status = json.loads(a.ok("sync", "--status", "--json").stdout)
    assert status["reachable"] is False and "refused" in status["last_error"]


def test_an_unreachable_hub_is_exit_3_and_nothing_written(machines, hub):
    a = machines("alice")
    _join(a)
    a.add("Widget's staging URL is staging.widget.dev.")
    config = a.data / "hub" / "hub.json"
    doc = json.loads(config.read_text())
    doc["url"] = doc["url"].replace(str(hub.port), "9")  # nobody listens on port 9
    config.write_text(json.dumps(doc))
    before = a.store.read_bytes()
    done = a.cli("sync")
    assert done.exit_code == 3 and done.stderr.count("\n") == 1
    assert "unreachable" in done.stderr and a.store.read_bytes() == before
    status = a.ok("sync", "--status")
    assert "behind      unknown" in status.stdout and "last error" in status.stdout


def test_a_password_in_the_url_is_never_kept(machines, hub):
    a = machines("alice")
    with_password = hub.url(user="alice", password=ROLES["alice"])
    done = a.cli("hub", "join", "--url", with_password, "--namespace", NS)
    assert done.exit_code == 2 and ".pgpass" in done.stderr and ROLES["alice"] not in done.stderr
    assert not a.data.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("hub", "join", "--url", "postgresql://alice@127.0.0.1/x"), "name the namespaces"),
        (("hub", "join", "--url", "postgresql://alice@127.0.0.1/x", "--namespace", "global"),
         "user:global"),
        (("hub", "join", "--url", "not a url at all", "--namespace", NS), "not a PostgreSQL"),
        (("sync", "--status"), "shares nothing"),
        (("sync", "--status", "--batch", "5"), "--batch goes with a sync"),
        (("hub", "grant", "--url", "postgresql://x@127.0.0.1/x", "--role", "r"), "--namespace"),
    ],
)  # fmt: skip
def test_bad_hub_arguments_are_one_line(machines, args, message):
    a = machines("alice")
    done = a.cli(*args)
    assert done.exit_code == 2 and done.stdout == "" and done.stderr.count("\n") == 1
    assert message in done.stderr, done.stderr
    assert not a.data.exists()


# ---- secrets --------------------------------------------------------------------------------

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def test_in_auto_mode_a_secret_is_redacted_before_it_reaches_the_hub(machines, hub, monkeypatch):
    a = machines("alice")
    _join(a)
    x = a.add(f"The deploy bot authenticates with {TOKEN}.")  # manual mode: kept verbatim here
    monkeypatch.setenv("ZMEM_CAPTURE_MODE", "auto")
    report = a.sync()
    assert report["redacted"] == 1
    with psycopg.connect(hub.url()) as conn:
        content = conn.execute(
            "SELECT body->>'content' FROM zmem_hub.record WHERE key = %s", (x,)
        ).fetchone()[0]
    assert TOKEN not in content and "REDACTED" in content.upper()


def test_a_row_from_the_hub_is_redacted_before_it_reaches_the_local_store(machines, monkeypatch):
    a, b = machines("alice"), machines("bob")
    _join(a, b)
    x = a.add(f"The deploy bot authenticates with {TOKEN}.")
    a.sync()  # manual mode on a: pushed verbatim, and the report says so
    monkeypatch.setenv("ZMEM_CAPTURE_MODE", "auto")
    pulled = b.sync()
    assert pulled["ingest"]["redacted"] == 1
    assert TOKEN not in b.rows()[x][0] and TOKEN not in b.store.read_bytes().decode("latin-1")


def test_status_leave_and_who_wrote_what(machines):
    a, b = machines("alice"), machines("bob")
    _join(a, b)
    a.add("Widget's on-call rota is in PagerDuty.")
    a.sync()
    b.sync()
    st = json.loads(b.ok("sync", "--status", "--json").stdout)
    assert st["reachable"] is True and st["behind"] == 0 and st["last_error"] is None
    assert st["last_push"] and st["last_pull"] and st["role"] == "bob"
    writers = {(w["writer"], w["kind"]): w["objects"] for w in st["writers"]}
    assert writers == {("alice", "memory"): 1}
    a.add("Widget's docs build with mkdocs.")
    a.sync()
    assert json.loads(b.ok("sync", "--status", "--json").stdout)["behind"] == 1
    left = json.loads(b.ok("hub", "leave", "--json").stdout)
    assert left["left"] and not (b.data / "hub").exists()
    assert b.cli("sync").exit_code == 2
    assert len([r for r in b.rows().values() if r[1]]) == 1  # the store keeps what it pulled


# ---- never on the hot path: the session start's detached upkeep syncs ---------------------


def _upkeep_lines(data: Path, want: int = 1, timeout: float = 60) -> list[str]:
    log = data / "zmem-bg.log"
    deadline = time.time() + timeout
    lines: list[str] = []
    while time.time() < deadline:
        lines = [x for x in (log.read_text().splitlines() if log.exists() else [])
                 if "host=upkeep" in x]  # fmt: skip
        if len(lines) >= want:
            break
        time.sleep(0.1)
    return lines


def _session_start(m: Machine, tmp_path: Path, monkeypatch) -> tuple[int, float]:
    monkeypatch.setenv("ZMEM_SESSION_UPKEEP", "1")
    payload = {"session_id": "s-hub", "cwd": str(tmp_path), "hook_event_name": "SessionStart",
               "source": "startup"}  # fmt: skip
    t0 = time.monotonic()
    done = m.cli("hook", "SessionStart", "--host", "claude", input=json.dumps(payload))
    return done.exit_code, time.monotonic() - t0


def test_the_session_start_syncs_in_its_detached_child_when_due(machines, tmp_path, monkeypatch):
    from zmem.maintenance import session_task

    a, b = machines("alice"), machines("bob")
    _join(a, b)
    x = a.add("Widget's feature flags are read at startup only.")
    code, _ = _session_start(a, tmp_path, monkeypatch)
    assert code == 0
    lines = _upkeep_lines(a.data)
    assert lines and "sync" in lines[0].split("reason=")[1].split()[0], lines
    b.sync()
    assert x in b.rows()
    settings = __import__("zmem").config.load_settings(
        env={"ZMEM_DATA": str(a.data), "ZMEM_STORE": str(a.store)}
    )
    assert "sync" not in session_task.due(settings)  # not again until ZMEM_HUB_SYNC_MINUTES


def test_a_hub_that_is_down_costs_the_session_start_nothing_and_is_reported(
    machines, hub, tmp_path, monkeypatch
):
    a = machines("alice")
    _join(a)
    a.add("Widget's cache TTL is 300 seconds.")
    config = a.data / "hub" / "hub.json"
    doc = json.loads(config.read_text())
    doc["url"] = doc["url"].replace(str(hub.port), "9")
    config.write_text(json.dumps(doc))
    code, took = _session_start(a, tmp_path, monkeypatch)
    assert code == 0 and took < 5  # the hook never waits on the network
    lines = _upkeep_lines(a.data)
    assert lines and "error=sync:" in lines[0] and "unreachable" in lines[0], lines
    status = json.loads(a.ok("sync", "--status", "--json").stdout)
    assert status["reachable"] is False and "unreachable" in status["last_error"]
    checks = {
        c["check"]: c for c in json.loads(a.ok("doctor", "--format", "json").stdout)["checks"]
    }
    assert checks["hub"]["status"] == "warn" and "unreachable" in checks["hub"]["detail"]


def test_the_inspector_shows_the_hub_and_who_wrote_what(machines):
    from test_ui import Client
    from ui_browser import ui_server

    a, b = machines("alice"), machines("bob")
    _join(a, b)
    a.add("Widget's changelog is generated by towncrier.")
    a.sync()
    b.sync()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZMEM_")}
    env.update(ZMEM_DATA=str(b.data), ZMEM_STORE=str(b.store), ZMEM_EMBED_PROFILE="fake")
    with ui_server(env=env, cwd=b.data) as server:
        client = Client(server.port)
        client.enter(server.token)
        status, _, page = client.request("GET", "/health")
    assert status == 200 and 'id="hub-writers"' in page
    assert "as <code>bob</code>" in page and "<td>alice</td>" in page
    assert f"<code>{NS}</code>" in page


def test_the_hub_schema_version_is_the_newest_migration():
    from zmem.db import hub as hubdb

    assert hubdb.SCHEMA_VERSION == max(v for v, _, _ in hubdb._migrations())


# ---- a sync with nothing new (issue 47): no store library, no driver ------------------------


def _sync_process(m: Machine, *args: str) -> subprocess.CompletedProcess:
    """`zmem sync` as its own process, reporting which heavy modules it loaded."""
    code = (
        "import sys, json\n"
        "from zmem.cli import main\n"
        "try:\n    main(['sync', *sys.argv[1:]])\n"
        "except SystemExit as exc:\n    code = exc.code or 0\nelse:\n    code = 0\n"
        "heavy = [m for m in ('psycopg', 'zmem.store.memory_store') if m in sys.modules]\n"
        "print(json.dumps({'heavy': heavy}), file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    env = {**os.environ, "ZMEM_DATA": str(m.data), "ZMEM_STORE": str(m.store)}
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True,
                          text=True)  # fmt: skip


def test_a_sync_with_nothing_new_loads_neither_the_store_library_nor_the_driver(machines):
    a, b = machines("alice"), machines("bob")
    _join(a, b)
    a.add("Widget's first lesson.")
    a.sync()
    b.sync()
    done = _sync_process(b, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["behind"] == 0 and sum(report["pulled"].values()) == 0
    assert json.loads(done.stderr.strip().splitlines()[-1])["heavy"] == []
    status = json.loads(b.ok("sync", "--status", "--json").stdout)
    assert status["last_error"] is None and status["last_pull"]
    # Something new on the hub: the whole sync runs and pulls it.
    x = a.add("Widget's second lesson.")
    a.sync()
    done = _sync_process(b, "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["pulled"]["memory"] == 1
    assert "psycopg" in json.loads(done.stderr.strip().splitlines()[-1])["heavy"]
    assert x in b.rows()
    # Something new here: the whole sync pushes it.
    y = b.add("Bob's lesson.")
    done = _sync_process(b, "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["pushed"]["memory"] == 1
    a.sync()
    assert y in a.rows()


def test_a_quick_sync_against_a_hub_that_went_away_is_exit_3_once(machines, hub):
    a = machines("alice")
    _join(a)
    a.add("Widget's staging URL is staging.widget.dev.")
    a.sync()
    config = a.data / "hub" / "hub.json"
    doc = json.loads(config.read_text())
    doc["url"] = doc["url"].replace(str(hub.port), "9")
    config.write_text(json.dumps(doc))
    before = a.store.read_bytes()
    done = _sync_process(a)
    assert done.returncode == 3 and "unreachable" in done.stderr
    assert done.stderr.count("zmem: error:") == 1
    assert a.store.read_bytes() == before
    status = json.loads(a.ok("sync", "--status", "--json").stdout)
    assert "unreachable" in status["last_error"]
