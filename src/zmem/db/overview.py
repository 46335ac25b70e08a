"""SQL behind the web inspector's read-only pages: the live breakdown, the daily series its
charts draw, the rows that need a look (contradictions, injection-shaped rows, file sources to
re-check), a filtered page of memories, and a memory's whole lineage. Each is one statement,
so a page at 100k rows costs a few index or table scans, never a query per row."""

from __future__ import annotations

from typing import Any

import apsw

from zmem.db.memories import select
from zmem.models import Memory

# A lineage longer than this is a loop in corrupt data, not history.
MAX_LINEAGE = 500

# The inspector's covering indexes. Columns added by later migrations (taint, trust_score,
# embedding_model) sit after the embedding BLOB in each record, so a table scan that reads them
# walks every row's overflow pages: live rows by namespace, type and taint took 160 ms at 100k
# rows, 11 ms from memory_live_facets. superseded_at is always NULL in that partial index; it
# is listed so the index covers the queries that name it (SQLite does not count a partial
# index's WHERE columns as covered). They are not a migration: `zmem ui` creates them on its
# first start, so the schema version and every other client stay as they are (SQLite maintains
# an index whoever writes, and a client that does not know it simply does not use it).
INSPECTOR_INDEXES = {
    "memory_live_facets": (
        "CREATE INDEX IF NOT EXISTS memory_live_facets ON memory "
        "(namespace, type, taint, embedding_model, confidence, tags, superseded_at) "
        "WHERE superseded_at IS NULL"
    ),
    "memory_trust": "CREATE INDEX IF NOT EXISTS memory_trust ON memory (trust_score)",
    # The live rows citing a file, for the stale-source check: a handful in most stores.
    "memory_file_sources": (
        "CREATE INDEX IF NOT EXISTS memory_file_sources ON memory (source_ref, source_hash) "
        "WHERE superseded_at IS NULL AND source_ref LIKE 'file:%'"
    ),
}


def missing_indexes(conn: apsw.Connection) -> list[str]:
    present = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'index'")}
    return [name for name in INSPECTOR_INDEXES if name not in present]


def create_indexes(conn: apsw.Connection, names: list[str]) -> None:
    for name in names:
        conn.execute(INSPECTOR_INDEXES[name])


def breakdown(conn: apsw.Connection) -> list[tuple[str, str, str, int]]:
    """(namespace, type, taint, live rows) for every combination present."""
    return list(
        conn.execute(
            "SELECT namespace, type, taint, count(*) FROM memory WHERE superseded_at IS NULL "
            "GROUP BY namespace, type, taint"
        )
    )


def totals(conn: apsw.Connection) -> tuple[int, int]:
    """(live rows, all rows), each counted from an index."""
    live = conn.execute("SELECT count(*) FROM memory WHERE superseded_at IS NULL").fetchone()[0]
    return live, conn.execute("SELECT count(*) FROM memory").fetchone()[0]


def daily_writes(conn: apsw.Connection) -> tuple[dict[str, int], dict[str, int]]:
    """Rows added per day and rows retired (tombstoned) per day, days as YYYY-MM-DD."""
    added = dict(
        conn.execute("SELECT substr(ingestion_ts, 1, 10) AS d, count(*) FROM memory GROUP BY d")
    )
    retired = dict(
        conn.execute(
            "SELECT substr(superseded_at, 1, 10) AS d, count(*) FROM memory "
            "WHERE superseded_at IS NOT NULL GROUP BY d"
        )
    )
    return added, retired


def daily_recall(conn: apsw.Connection) -> tuple[dict[str, int], dict[str, int]]:
    """Rows by the day they were last recalled, and by the day they were last injected. The
    store keeps a counter and a last time per row, not an event log, so this is what it can
    say about activity: which days the rows in use were last used."""
    retrieved: dict[str, int] = {}
    surfaced: dict[str, int] = {}
    rows = conn.execute(
        "SELECT substr(last_retrieved, 1, 10) AS r, substr(last_surfaced, 1, 10) AS s, count(*) "
        "FROM memory WHERE last_retrieved IS NOT NULL OR last_surfaced IS NOT NULL "
        "GROUP BY r, s"
    )
    for r, s, n in rows:
        if r:
            retrieved[r] = retrieved.get(r, 0) + n
        if s:
            surfaced[s] = surfaced.get(s, 0) + n
    return retrieved, surfaced


def live_contradictions(conn: apsw.Connection, limit: int) -> tuple[int, list[tuple[str, str]]]:
    """How many contradicts edges join two live rows, and the newest `limit` of them. The edge
    is stored both ways; src < dst keeps one of each pair."""
    base = (
        "FROM memory_link l JOIN memory a ON a.id = l.src JOIN memory b ON b.id = l.dst "
        "WHERE l.relation = 'contradicts' AND l.src < l.dst "
        "AND a.superseded_at IS NULL AND b.superseded_at IS NULL"
    )
    total = conn.execute(f"SELECT count(*) {base}").fetchone()[0]
    rows = conn.execute(f"SELECT l.src, l.dst {base} ORDER BY l.created_at DESC LIMIT ?", (limit,))
    return total, [(a, b) for a, b in rows]


def tagged_live(conn: apsw.Connection, tag: str, limit: int) -> tuple[int, list[Memory]]:
    """Live rows carrying `tag`: how many, and the newest `limit`. One scan of the covering
    live-facets index finds them all; only the newest are read from the table."""
    rids = [
        r[0]
        for r in conn.execute(
            "SELECT rid FROM memory WHERE superseded_at IS NULL AND ',' || tags || ',' LIKE ?",
            (f"%,{tag},%",),
        )
    ]
    newest = sorted(rids, reverse=True)[:limit]
    if not newest:
        return len(rids), []
    marks = ",".join("?" * len(newest))
    return len(rids), list(select(conn, f"WHERE rid IN ({marks}) ORDER BY rid DESC", newest))


def file_sources(conn: apsw.Connection, limit: int) -> list[tuple[str, str | None, int, str]]:
    """(source_ref, hash at capture, live rows citing it, newest such row's id) for the
    `limit` most recently cited file: sources. The caller hashes each file once. `id` is a
    bare column beside max(rid): SQLite takes it from the row holding that maximum."""
    rows = conn.execute(
        "SELECT source_ref, source_hash, count(*), id, max(rid) FROM memory "
        "WHERE superseded_at IS NULL AND source_ref LIKE 'file:%' "
        "GROUP BY source_ref, source_hash ORDER BY max(rid) DESC LIMIT ?",
        (limit,),
    )
    return [(ref, digest, n, newest) for ref, digest, n, newest, _ in rows]


def page(
    conn: apsw.Connection,
    *,
    namespace: str | None,
    type_: str | None,
    taint: str | None,
    tag: str | None,
    include_superseded: bool,
    before_rid: int | None,
    limit: int,
) -> list[Memory]:
    """Newest first, filtered; `before_rid` continues from the previous page's last row."""
    clauses: list[str] = [] if include_superseded else ["superseded_at IS NULL"]
    params: list[Any] = []
    for column, value in (("namespace", namespace), ("type", type_), ("taint", taint)):
        if value:
            clauses.append(f"{column} = ?")
            params.append(value)
    if tag:
        clauses.append("',' || tags || ',' LIKE ?")
        params.append(f"%,{tag},%")
    if before_rid is not None:
        clauses.append("rid < ?")
        params.append(before_rid)
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    params.append(limit)
    return list(select(conn, f"{where} ORDER BY rid DESC LIMIT ?", params))


def lineage(conn: apsw.Connection, memory_id: str) -> list[Memory]:
    """Every version of the memory `memory_id` belongs to: its update_of ancestors, itself and
    every row that revised it (transitively), oldest first."""
    clause = (
        "WHERE id IN (WITH RECURSIVE "
        "back(id, hop) AS (SELECT ?1, 0 UNION SELECT m.update_of, back.hop + 1 "
        "  FROM memory m JOIN back ON m.id = back.id "
        "  WHERE m.update_of IS NOT NULL AND back.hop < ?2), "
        "fwd(id, hop) AS (SELECT ?1, 0 UNION SELECT m.id, fwd.hop + 1 "
        "  FROM memory m JOIN fwd ON m.update_of = fwd.id WHERE fwd.hop < ?2) "
        "SELECT id FROM back UNION SELECT id FROM fwd) ORDER BY valid_from, rid"
    )
    return list(select(conn, clause, (memory_id, MAX_LINEAGE)))
