"""Schema v15 and its migrations: a fresh store equals the expected schema, a v1 store upgrades
cleanly, migrating twice is a no-op, closed enums are enforced by CHECK constraints, and a store
newer than this client is refused unless within the ceiling or overridden."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import apsw
import pytest
from click.testing import CliRunner

from zmem import MemoryStore
from zmem.db import migrate as migrate_mod
from zmem.db.connect import connect
from zmem.db.migrate import SCHEMA_VERSION, load_migrations, migrate, schema_version
from zmem.errors import SchemaError

FIXTURES = Path(__file__).parent / "fixtures"
EXPECTED = FIXTURES / "schema_v15.sql"


def schema_dump(conn: apsw.Connection) -> str:
    rows = conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_schema "
        "WHERE name NOT LIKE 'sqlite_%' AND name NOT LIKE 'memory_vec%' ORDER BY type, name"
    )
    return "\n".join(f"-- {t} {n} on {tbl}\n{sql};" for t, n, tbl, sql in rows if sql) + "\n"


def test_fresh_schema_equals_expected(store_path):
    with MemoryStore.open(store_path) as store:
        assert store.schema_version == SCHEMA_VERSION == 15
        actual = schema_dump(store._conn)
    if os.environ.get("REGENERATE_SCHEMA_SNAPSHOT") == "1":  # deliberate schema change: review diff
        EXPECTED.write_text(actual)
    assert actual == EXPECTED.read_text()


def test_vector_index_is_created_at_the_profile_dimension_not_by_a_migration(store_path):
    # memory_vec's size depends on the embedding profile, so it is runtime state beside the
    # v13 schema: model-absent stores never have it.
    with MemoryStore.open(store_path) as store:
        assert store._conn.execute(
            "SELECT count(*) FROM sqlite_schema WHERE name = 'memory_vec'"
        ).fetchone() == (0,)  # opening writes nothing: the first vector creates the index
        store.add("a first row", namespace="project:x", type="fact", signal="test")
        sql = store._conn.execute(
            "SELECT sql FROM sqlite_schema WHERE name = 'memory_vec'"
        ).fetchone()[0]
    assert "float[16]" in sql and "partition key" in sql


def test_migrations_are_named_and_ordered():
    found = load_migrations()
    assert [m.version for m in found] == list(range(1, SCHEMA_VERSION + 1))
    assert all(m.name and m.sql.strip() for m in found)


def _v1_store(path: Path) -> None:
    conn = apsw.Connection(str(path))
    conn.execute((FIXTURES / "store_v1.sql").read_text())
    conn.close()


def test_v1_fixture_upgrades_cleanly(store_path):
    _v1_store(store_path)
    with MemoryStore.open(store_path) as store:
        assert store.schema_version == 15
        live = store.get("11111111-1111-4111-8111-111111111111")
        assert live.content.startswith("Run `pytest -x`")
        assert live.valid_from == "2025-01-10T08:00:00.000000Z"  # backfilled from ingestion_ts
        assert live.valid_until is None and live.taint == "trusted_internal"
        assert live.trust_score == 1.0 and live.retrieval_count == 3
        old = store.get("22222222-2222-4222-8222-222222222222")
        assert old.valid_until == old.superseded_at == "2025-03-01T08:00:00.000000Z"
        opinion = store.get("33333333-3333-4333-8333-333333333333")
        assert opinion.taint == "untrusted_tool"  # signal none was agent self-opinion
        # Entity links were derived on first open for pre-v10 rows.
        names = {e["name"] for e in store.describe(live.id)["entities"]}
        assert "ripgrep" in names
        # The upgraded store has exactly the fresh schema.
        upgraded = schema_dump(store._conn)
        # FTS still finds old rows and the new write path dedups against them.
        again = store.add(
            "Run `pytest -x` before pushing; search with rg instead of grep.",
            namespace="project:legacy",
            type="lesson",
            signal="test",
        )
        assert again.result == "deduped" and again.id == live.id
    assert upgraded == EXPECTED.read_text()


def test_migrating_twice_is_a_noop(store_path):
    MemoryStore.open(store_path).close()
    conn = connect(store_path)
    before = schema_dump(conn), list(conn.execute("SELECT * FROM meta ORDER BY key"))
    assert migrate(conn) == SCHEMA_VERSION
    after = schema_dump(conn), list(conn.execute("SELECT * FROM meta ORDER BY key"))
    conn.close()
    assert before == after


def _as_without_rowid_term_df(path: Path) -> list[tuple]:
    """Give a store the term_df layout migration 0008 created before it became a rowid table
    (same columns, WITHOUT ROWID); returns the table's rows."""
    conn = apsw.Connection(str(path))
    conn.execute(
        "BEGIN; ALTER TABLE term_df RENAME TO t_old; "
        "CREATE TABLE term_df (term TEXT PRIMARY KEY, df INTEGER NOT NULL, posts TEXT) "
        "WITHOUT ROWID; INSERT INTO term_df SELECT term, df, posts FROM t_old; "
        "DROP TABLE t_old; COMMIT"
    )
    rows = list(conn.execute("SELECT term, df, posts FROM term_df ORDER BY term"))
    conn.close()
    return rows


def test_a_without_rowid_term_df_is_converted_on_open_and_keeps_deduping(store_path):
    lesson = "Pin `ruff` in pyproject.toml before the CI lint step runs on every branch"
    with MemoryStore.open(store_path) as store:
        first = store.add(lesson, namespace="project:t", type="lesson", signal="test")
        store.add("Rebuild the docker image after bumping uv", namespace="project:t", type="fact")
    rows = _as_without_rowid_term_df(store_path)
    assert rows
    with MemoryStore.open(store_path) as store:
        assert schema_dump(store._conn) == EXPECTED.read_text()  # exactly the fresh layout
        conn = store._conn
        assert list(conn.execute("SELECT term, df, posts FROM term_df ORDER BY term")) == rows
        again = store.add(lesson + ".", namespace="project:t", type="lesson", signal="test")
        assert (again.result, again.id) == ("deduped", first.id)
    conn = connect(store_path)
    before = list(conn.execute("SELECT * FROM meta ORDER BY key"))
    assert migrate(conn) == SCHEMA_VERSION  # converted once: opening again writes nothing
    assert list(conn.execute("SELECT * FROM meta ORDER BY key")) == before
    assert schema_dump(conn) == EXPECTED.read_text()
    conn.close()


@pytest.mark.parametrize(
    "column,value",
    [
        ("type", "episode"),
        ("signal", "vibes"),
        ("taint", "semi_trusted"),
        ("confidence", 1.5),
        ("trust_score", -0.1),
    ],
)
def test_check_constraints_reject_values_outside_closed_enums(store, column, value):
    r = store.add("Use rg for search", namespace="project:t", type="fact", signal="test")
    with pytest.raises(apsw.ConstraintError):
        store._conn.execute(f"UPDATE memory SET {column} = ? WHERE id = ?", (value, r.id))


def test_tombstone_write_once_is_enforced_by_the_schema(store):
    r = store.add("Use rg for search", namespace="project:t", type="fact", signal="test")
    store.supersede(r.id)
    with pytest.raises(apsw.ConstraintError, match="write-once"):
        store._conn.execute("UPDATE memory SET valid_until = '2099-01-01' WHERE id = ?", (r.id,))


def _stamp(path: Path, version: int) -> None:
    MemoryStore.open(path).close()
    conn = apsw.Connection(str(path))
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))
    conn.close()


def test_newer_schema_above_ceiling_is_refused(store_path):
    _stamp(store_path, SCHEMA_VERSION + 1)
    with pytest.raises(SchemaError, match="ZMEM_ALLOW_NEWER_SCHEMA=1"):
        MemoryStore.open(store_path)


def test_newer_schema_override(store_path, monkeypatch, capsys):
    _stamp(store_path, SCHEMA_VERSION + 1)
    monkeypatch.setenv("ZMEM_ALLOW_NEWER_SCHEMA", "1")
    with MemoryStore.open(store_path) as store:
        assert store.schema_version == SCHEMA_VERSION + 1
        store.add("Still usable", namespace="project:t", type="fact", signal="test")
        assert any("NOTICE" in w for w in store.warnings)
    assert capsys.readouterr().err == ""  # the library never prints; front ends do


def test_newer_schema_notice_reaches_the_cli_user(store_path, monkeypatch):
    from zmem.cli import cli

    _stamp(store_path, SCHEMA_VERSION + 1)
    monkeypatch.setenv("ZMEM_ALLOW_NEWER_SCHEMA", "1")
    result = CliRunner().invoke(cli, ["--store", str(store_path), "stats", "--json"])
    assert result.exit_code == 0, result.output
    assert f"[zmem] NOTICE: store schema v{SCHEMA_VERSION + 1}" in result.stderr


def test_forward_compatible_schema_prints_the_notice_once(store_path, monkeypatch, capsys):
    _stamp(store_path, SCHEMA_VERSION + 1)
    monkeypatch.setattr(migrate_mod, "FORWARD_COMPAT_SCHEMA_VERSION", SCHEMA_VERSION + 1)
    with MemoryStore.open(store_path) as store:
        first = " ".join(store.warnings)
    with MemoryStore.open(store_path) as store:
        second = " ".join(store.warnings)
    assert first.count("NOTICE") == 1 and f"v{SCHEMA_VERSION + 1}" in first
    assert "NOTICE" not in second


def test_concurrent_first_open_migrates_once(store_path):
    code = (
        "import sys; from zmem import MemoryStore\n"
        "s = MemoryStore.open(sys.argv[1]); print(s.schema_version); s.close()\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(store_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert all(o.strip() == str(SCHEMA_VERSION) for o, _ in outs)
    conn = apsw.Connection(str(store_path))
    assert schema_version(conn) == SCHEMA_VERSION
    conn.close()


def test_a_v14_store_gains_dated_entity_links(store_path):
    """v15 copies each row's valid_from onto its entity links (the entity lane's per-entity
    window is ordered by it): a store written at v14 is backfilled on open, and a link written
    afterwards, or a row whose date moves, carries the row's date."""
    with MemoryStore.open(store_path) as store:
        old = store.add("Run `docker` builds with `buildx`", namespace="project:x", type="fact",
                        signal="test")  # fmt: skip
    conn = apsw.Connection(str(store_path))
    conn.execute(
        "DROP TRIGGER memory_entity_valid_from; DROP TRIGGER memory_entity_dated; "
        "DROP INDEX memory_entity_recent; "
        "ALTER TABLE memory_entity DROP COLUMN valid_from; "
        "CREATE INDEX memory_entity_entity ON memory_entity (entity_id); "
        "UPDATE meta SET value = '14' WHERE key = 'schema_version'"
    )
    conn.close()
    with MemoryStore.open(store_path) as store:
        assert store.schema_version == 15
        new = store.add("`docker` layer cache lives in the registry", namespace="project:x",
                        type="fact", signal="test")  # fmt: skip
        c = store._conn
        backfilled = dict(c.execute("SELECT memory_id, valid_from FROM memory_entity"))
        assert backfilled[old.id] == store.get(old.id).valid_from  # the v14 link, dated on open
        c.execute("UPDATE memory SET valid_from = '2020-01-01T00:00:00.000000Z' WHERE id = ?",
                  (old.id,))  # fmt: skip
        dated = dict(c.execute("SELECT memory_id, valid_from FROM memory_entity"))
        assert set(dated) == {old.id, new.id}
        assert dated[old.id] == "2020-01-01T00:00:00.000000Z"
        assert dated[new.id] == store.get(new.id).valid_from
        # A writer that leaves the date out (a v14 client under ZMEM_ALLOW_NEWER_SCHEMA) still
        # gets the row's.
        c.execute("DELETE FROM memory_entity WHERE memory_id = ?", (new.id,))
        c.execute("INSERT INTO memory_entity (memory_id, entity_id) SELECT ?, id FROM entity",
                  (new.id,))  # fmt: skip
        assert {d for m, d in c.execute("SELECT memory_id, valid_from FROM memory_entity")
                if m == new.id} == {store.get(new.id).valid_from}  # fmt: skip
        assert "memory_entity_recent" in {
            r[0] for r in c.execute("SELECT name FROM sqlite_schema WHERE type = 'index'")
        }
