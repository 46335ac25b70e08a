"""Who wrote a memory that came from the team hub, kept in the store beside it (issue 47): the
hub role that wrote it (the hub checked the login), the machine it named, who retired it when
that was someone else, and the roles this machine keeps out of passive injection. Two side
tables, made by the first pull that needs them: the memory table and the schema version stay
as the spec pins them (v13), and a store that never joined a hub holds neither."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import apsw

from zmem.models import Origin

_TABLES = """
CREATE TABLE IF NOT EXISTS hub_origin (
    memory_id       TEXT PRIMARY KEY,
    author          TEXT NOT NULL,    -- the hub role that wrote the row
    machine         TEXT,             -- the machine it named (the writer's claim)
    mine            INTEGER NOT NULL, -- 1: this store's own role wrote it, on another machine
    retired_by      TEXT,             -- the role that retired it, when the hub recorded one
    retired_machine TEXT,
    retired_at      TEXT,
    pulled_at       TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS hub_distrust (role TEXT PRIMARY KEY, since TEXT NOT NULL);
"""
CHUNK = 500


def present(conn: apsw.Connection) -> bool:
    """Whether this store has ever recorded an origin (no table: no row came from a hub)."""
    return (
        conn.execute(
            "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'hub_origin'"
        ).fetchone()
        is not None
    )


def ensure(conn: apsw.Connection) -> None:
    conn.execute(_TABLES)


def record(
    conn: apsw.Connection,
    rows: Iterable[tuple[str, str, str | None, bool, str | None, str | None, str | None]],
    at: str,
) -> None:
    """(memory id, author, machine, mine, retired_by, retired_machine, retired_at) of rows that
    are in the store; a later retirement fills in who retired it."""
    conn.executemany(
        "INSERT INTO hub_origin (memory_id, author, machine, mine, retired_by, retired_machine, "
        "retired_at, pulled_at) SELECT ?, ?, ?, ?, ?, ?, ?, ? "
        "WHERE EXISTS (SELECT 1 FROM memory WHERE id = ?1) "
        "ON CONFLICT (memory_id) DO UPDATE SET "
        "retired_by = coalesce(hub_origin.retired_by, excluded.retired_by), "
        "retired_machine = coalesce(hub_origin.retired_machine, excluded.retired_machine), "
        "retired_at = coalesce(hub_origin.retired_at, excluded.retired_at)",
        [(*r[:3], int(r[3]), *r[4:], at) for r in rows],
    )


def of(conn: apsw.Connection, ids: Sequence[str]) -> dict[str, Origin]:
    """id -> Origin of the rows that came from a hub; empty for a store that never pulled."""
    if not ids or not present(conn):
        return {}
    out: dict[str, Origin] = {}
    for start in range(0, len(ids), CHUNK):
        chunk = list(ids[start : start + CHUNK])
        marks = ",".join("?" * len(chunk))
        for row in conn.execute(
            "SELECT memory_id, author, machine, mine, retired_by, retired_machine, retired_at "
            f"FROM hub_origin WHERE memory_id IN ({marks})",
            chunk,
        ):
            out[row[0]] = Origin(row[1], row[2], bool(row[3]), row[4], row[5], row[6])
    return out


def distrusted(conn: apsw.Connection) -> frozenset[str]:
    if not present(conn):
        return frozenset()
    return frozenset(r[0] for r in conn.execute("SELECT role FROM hub_distrust"))


def set_distrust(conn: apsw.Connection, role: str, on: bool, at: str) -> bool:
    """Add or remove a distrusted role; whether anything changed."""
    ensure(conn)
    if on:
        conn.execute(
            "INSERT INTO hub_distrust (role, since) VALUES (?, ?) ON CONFLICT DO NOTHING",
            (role, at),
        )
    else:
        conn.execute("DELETE FROM hub_distrust WHERE role = ?", (role,))
    return conn.changes() == 1


def written_by(conn: apsw.Connection, memory_id: str, roles: frozenset[str]) -> bool:
    """Whether one of `roles` wrote this row (and not this store's own role)."""
    row = conn.execute(
        "SELECT author FROM hub_origin WHERE memory_id = ? AND mine = 0", (memory_id,)
    ).fetchone()
    return row is not None and row[0] in roles


def counts_by_author(conn: apsw.Connection) -> dict[str, int]:
    """Rows pulled per author that this store's role did not write."""
    if not present(conn):
        return {}
    return dict(
        conn.execute("SELECT author, count(*) FROM hub_origin WHERE mine = 0 GROUP BY author")
    )
