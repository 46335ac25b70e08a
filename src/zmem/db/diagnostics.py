"""Read-only inspection of a store file for `doctor`: opening it without creating, migrating or
writing anything, and the facts its schema checks report (version, lineage columns, entity,
link and episode tables with their counts, the trust_score range, committed vectors). Every
query tolerates an older schema: a table or column that is not there is reported, not used."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw

from zmem.db import graph, vectors
from zmem.db.connect import read_snapshot
from zmem.db.migrate import schema_version

LINEAGE_COLUMNS = ("valid_until", "update_of", "taint")
ENTITY_TABLES = ("entity", "entity_alias", "memory_entity")
EPISODE_TABLES = ("episode", "episode_memory")
ENTITY_BACKFILL_KEY = "backfill:entities"


@dataclass
class StoreFacts:
    """What doctor needs to know about one store, read in one snapshot."""

    version: int
    open_mode: str  # "immutable" (no WAL file: nothing can be written) or "wal-reader"
    tables: set[str] = field(default_factory=set)
    memory_columns: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=dict)
    links_by_relation: dict[str, int] = field(default_factory=dict)
    trust: dict[str, Any] = field(default_factory=dict)
    entity_backfill_pending: bool = False
    # An interrupted vector conversion: {"profile", "phase", "done"} from its saved state.
    conversion_pending: dict | None = None
    committed_profile: str | None = None
    committed_dim: int | None = None
    vectors_by_model: dict[str, int] = field(default_factory=dict)


def _uri(path: Path, immutable: bool) -> str:
    base = path.absolute().as_uri() + "?mode=ro"
    return base + "&immutable=1" if immutable else base


def open_readonly(path: Path) -> tuple[apsw.Connection, str]:
    """A connection that cannot write `path`, its WAL or anything beside it.

    SQLite opens a WAL-mode file read-only by creating `-wal` and `-shm` when they are missing
    (and leaves them behind), so when there is no WAL file the store is opened `immutable`: it
    is then complete in the main file and nothing is created or locked. When another connection
    has the WAL open (both files present) the store is read as an ordinary WAL reader, which
    sees its latest commits; the reader marks it sets live in the shared-memory index every
    reader uses, never in the database or the WAL."""
    wal = path.with_name(path.name + "-wal")
    shm = path.with_name(path.name + "-shm")
    immutable = not (wal.exists() and shm.exists())
    flags = apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
    conn = apsw.Connection(_uri(path, immutable), flags=flags)
    if wal.exists() and immutable:
        mode = "immutable (a WAL file without its index was not read)"
    else:
        mode = "immutable" if immutable else "wal-reader"
    return conn, mode


def _count(conn: apsw.Connection, table: str, where: str = "") -> int:
    # Table names come from the constants above, never from input.
    return conn.execute(f"SELECT count(*) FROM {table} {where}").fetchone()[0]


def _read(conn: apsw.Connection, mode: str) -> StoreFacts:
    facts = StoreFacts(version=schema_version(conn), open_mode=mode)
    facts.tables = {
        r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")
    }
    if "memory" not in facts.tables:
        return facts
    facts.memory_columns = {r[1] for r in conn.execute("PRAGMA table_info(memory)")}
    live = "WHERE superseded_at IS NULL" if "superseded_at" in facts.memory_columns else ""
    facts.counts["memories"] = _count(conn, "memory")
    facts.counts["live"] = _count(conn, "memory", live)
    for table in (*ENTITY_TABLES, "memory_link", *EPISODE_TABLES):
        if table in facts.tables:
            facts.counts[table] = _count(conn, table)
    if "episode" in facts.tables:
        facts.counts["episodes_open"] = _count(conn, "episode", "WHERE ended_at IS NULL")
    if "memory_link" in facts.tables:
        facts.links_by_relation = dict(
            conn.execute("SELECT relation, count(*) FROM memory_link GROUP BY relation")
        )
    if "trust_score" in facts.memory_columns:
        low, high, outside, lowered = conn.execute(
            "SELECT min(trust_score), max(trust_score), "
            "count(*) FILTER (WHERE trust_score IS NULL OR trust_score < 0.0 "
            "OR trust_score > 1.0), count(*) FILTER (WHERE trust_score < 1.0) FROM memory"
        ).fetchone()
        facts.trust = {"min": low, "max": high, "out_of_range": outside, "below_1": lowered}
    if "meta" in facts.tables:
        facts.entity_backfill_pending = graph.get_meta(conn, ENTITY_BACKFILL_KEY) == "1"
        facts.committed_profile, facts.committed_dim = vectors.committed(conn)
        facts.conversion_pending = vectors.pending_conversion(conn)
    if {"embedding_model", "superseded_at"} <= facts.memory_columns:
        facts.vectors_by_model = {
            str(model): n for model, n in vectors.embedded_models(conn).items() if model
        }
    return facts


def inspect(path: Path) -> StoreFacts:
    """Read every fact in one snapshot. Raises apsw.Error when the file is not a readable
    SQLite database (doctor reports it)."""
    conn, mode = open_readonly(path)
    try:
        conn.set_busy_timeout(2000)
        try:
            with read_snapshot(conn):  # every count from the same snapshot
                return _read(conn, mode)
        except apsw.Error:
            # Opened immutable, then a writer started and checkpointed under the read: the
            # WAL files exist now, so reading again as a WAL reader creates nothing.
            if mode != "immutable" or not path.with_name(path.name + "-shm").exists():
                raise
    finally:
        conn.close()
    conn, mode = open_readonly(path)
    try:
        conn.set_busy_timeout(2000)
        with read_snapshot(conn):
            return _read(conn, mode)
    finally:
        conn.close()
