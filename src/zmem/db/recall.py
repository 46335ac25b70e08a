"""SQL of the read path: the lexical and entity lanes, candidate fetches, link neighbours, update
lineage and the recent list. Every lane applies the namespace set, the validity predicate and the
confidence pre-floor inside its query, so a filtered row can never take a slot in a lane."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import apsw

from zmem.db.memories import _COLUMNS, _row_to_memory
from zmem.models import Memory

# bm25() column weights for (content, tags). Tags are few, chosen words: a tag hit counts as
# much as a content hit rather than being drowned by long contents.
BM25_WEIGHTS = (1.0, 1.0)


@dataclass(frozen=True)
class Scope:
    """Where and when a lane may look: the tier's namespace set (None = every namespace), the
    point-in-time instant (None = live rows only) and the SQL-side confidence pre-floor."""

    namespaces: tuple[str, ...] | None
    as_of: str | None
    floor: float = 0.0

    def clause(self, alias: str = "m") -> tuple[str, list[Any]]:
        parts: list[str] = []
        params: list[Any] = []
        if self.as_of is not None:
            # valid_from inclusive, valid_until exclusive, empty valid_until = never expires.
            parts.append(
                f"{alias}.valid_from <= ? AND ({alias}.valid_until IS NULL "
                f"OR {alias}.valid_until > ?)"
            )
            params += [self.as_of, self.as_of]
        else:
            parts.append(f"{alias}.superseded_at IS NULL")
        if self.namespaces is not None:
            parts.append(f"{alias}.namespace IN ({','.join('?' * len(self.namespaces))})")
            params += list(self.namespaces)
        if self.floor > 0:
            # Stale-source halving only lowers confidence, so this is a safe pre-filter; the
            # exact effective-confidence floor is applied after the fetch.
            parts.append(f"{alias}.confidence >= ?")
            params.append(self.floor)
        return " AND ".join(parts), params


def fts_lane(
    conn: apsw.Connection, match: str, scope: Scope, limit: int
) -> list[tuple[int, float]]:
    """(rid, bm25) best first; bm25 is negative, more negative is better. CROSS JOIN pins FTS as
    the outer loop: the MATCH drives, each hit costs one rowid lookup."""
    where, params = scope.clause()
    sql = (
        f"SELECT m.rid, bm25(memory_fts, {BM25_WEIGHTS[0]}, {BM25_WEIGHTS[1]}) AS s "
        "FROM memory_fts CROSS JOIN memory AS m ON m.rid = memory_fts.rowid "
        f"WHERE memory_fts MATCH ? AND {where} ORDER BY s, m.rid DESC LIMIT ?"
    )
    return [(r[0], r[1]) for r in conn.execute(sql, [match, *params, limit])]


def fts_newest_top(conn: apsw.Connection, match: str, newest: int) -> list[tuple[int, float]]:
    """(rid, bm25) best first over only the `newest` matching rows (highest rid), filters left
    to the caller: FTS5 hands its matches out in rowid order without scoring them, so bm25()
    runs on at most `newest` rows however many hold the terms. fts_top's ranking when no more
    rows match."""
    sql = (
        "SELECT rowid, s FROM ("
        f"  SELECT rowid, bm25(memory_fts, {BM25_WEIGHTS[0]}, {BM25_WEIGHTS[1]}) AS s "
        "  FROM memory_fts WHERE memory_fts MATCH ? ORDER BY rowid DESC LIMIT ?"
        ") ORDER BY s, rowid DESC"
    )
    return [(r[0], r[1]) for r in conn.execute(sql, (match, newest))]


def fts_newest_scoped(
    conn: apsw.Connection, match: str, scope: Scope, newest: int
) -> list[tuple[int, float]]:
    """fts_newest_top inside a scope: (rid, bm25) best first over the `newest` matching rows
    the scope admits. FTS5 hands out matches newest first, each checked against its row; bm25()
    runs only on the rows kept."""
    where, params = scope.clause()
    sql = (
        "SELECT rid, s FROM ("
        f"  SELECT m.rid AS rid, bm25(memory_fts, {BM25_WEIGHTS[0]}, {BM25_WEIGHTS[1]}) AS s "
        "  FROM memory_fts CROSS JOIN memory AS m ON m.rid = memory_fts.rowid "
        f"  WHERE memory_fts MATCH ? AND {where} ORDER BY memory_fts.rowid DESC LIMIT ?"
        ") ORDER BY s, rid DESC"
    )
    return [(r[0], r[1]) for r in conn.execute(sql, [match, *params, newest])]


def fts_top(conn: apsw.Connection, match: str, limit: int) -> list[tuple[int, float]]:
    """(rid, bm25) best first over every row, filters left to the caller: FTS5 ranks without
    touching the memory table, ~3x cheaper per matched row than the scoped join."""
    sql = (
        f"SELECT rowid, bm25(memory_fts, {BM25_WEIGHTS[0]}, {BM25_WEIGHTS[1]}) AS s "
        "FROM memory_fts WHERE memory_fts MATCH ? ORDER BY s, rowid DESC LIMIT ?"
    )
    return [(r[0], r[1]) for r in conn.execute(sql, (match, limit))]


def term_rows(conn: apsw.Connection, terms: Sequence[str]) -> dict[str, int]:
    """How many rows the FTS index holds each term in (absent terms are left out), read from an
    fts5vocab view in the connection's temp schema: it counts a term's doclist, ~20x cheaper
    per row than ranking the same rows with bm25()."""
    if not terms:
        return {}
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.zmem_fts_terms "
        "USING fts5vocab(main, memory_fts, row)"
    )
    marks = ",".join("?" * len(terms))
    rows = conn.execute(f"SELECT term, doc FROM temp.zmem_fts_terms WHERE term IN ({marks})", terms)
    return {term: doc for term, doc in rows}


def indexed_rows_bound(conn: apsw.Connection) -> int:
    """At least the number of rows FTS5 indexes (every memory row; rows leave only by purge),
    in one index probe where count(*) would scan the table."""
    (n,) = conn.execute("SELECT coalesce(max(rid), 0) FROM memory").fetchone()
    return n


def in_scope(conn: apsw.Connection, rids: Sequence[int], scope: Scope) -> set[int]:
    """The subset of rids the scope admits."""
    if not rids:
        return set()
    where, params = scope.clause()
    marks = ",".join("?" * len(rids))
    sql = f"SELECT m.rid FROM memory AS m WHERE m.rid IN ({marks}) AND {where}"
    return {r[0] for r in conn.execute(sql, [*rids, *params])}


def entity_breadth(conn: apsw.Connection, entity_ids: Sequence[str], cap: int) -> dict[str, int]:
    """How many memories each entity links, counted no further than cap + 1 (an index probe
    whose cost is bounded by the cap, not by the entity's popularity)."""
    out = {}
    for entity_id in entity_ids:
        (n,) = conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM memory_entity WHERE entity_id = ? LIMIT ?)",
            (entity_id, cap + 1),
        ).fetchone()
        out[entity_id] = n
    return out


# (rid, namespace, matched entity count, matched entity ids)
EntityRow = tuple[int, str, int, tuple[str, ...]]


def entity_lane(
    conn: apsw.Connection,
    entity_ids: Sequence[str],
    scope: Scope,
    limit: int | None,
    breadth: Mapping[str, int] | None = None,
) -> list[EntityRow]:
    """(rid, namespace, matched entity count, matched entity ids) ranked by count, then
    recency (valid_from, then rid); every row when limit is None. An entity linked to more
    rows than the window no longer costs a memory-row read per link (v15: each link carries
    its row's date, indexed per entity): one entity hands over its newest rows the scope
    admits, in index order; several are grouped and ordered from their links alone, and rows
    are read in that order only until the window is full. Either way the ranking is the one
    joining every link gives. `breadth`: entity_breadth of these ids counted at least as far
    as `limit`, when the caller has it (a recall counts once, for its broad-entity cut)."""
    if not entity_ids or (limit is not None and limit <= 0):
        return []
    ids = list(dict.fromkeys(entity_ids))
    if limit is None:
        return _entity_lane_every_row(conn, ids, scope, None)
    if breadth is None:
        breadth = entity_breadth(conn, ids, limit)
    if all(breadth[e] <= limit for e in ids):
        # No entity is wider than the window: joining every link costs no more than it.
        return _entity_lane_every_row(conn, ids, scope, limit)
    if len(ids) == 1:
        return _entity_lane_newest(conn, ids[0], scope, limit)
    return _entity_lane_by_links(conn, ids, scope, limit)


_ENTITY_READ = (
    "SELECT m.rid, m.namespace, m.valid_from FROM memory_entity AS me "
    "CROSS JOIN memory AS m ON m.id = me.memory_id WHERE me.entity_id = ? "
)


def _entity_lane_newest(
    conn: apsw.Connection, entity_id: str, scope: Scope, limit: int
) -> list[EntityRow]:
    """One entity's rows: its newest `limit` the scope admits, read in (entity_id, valid_from)
    index order, and any tied in valid_from with the last one read (the ranking breaks such a
    tie by rid, the index by memory id)."""
    where, params = scope.clause()
    # Under --as-of the link's own date skips, in the index, the rows written since.
    dated, dated_params = ("AND me.valid_from <= ? ", [scope.as_of]) if scope.as_of else ("", [])
    found = conn.execute(
        f"{_ENTITY_READ}{dated}AND {where} ORDER BY me.valid_from DESC LIMIT ?",
        [entity_id, *dated_params, *params, limit],
    ).fetchall()
    if len(found) == limit:
        found += conn.execute(
            f"{_ENTITY_READ}AND me.valid_from IS ? AND {where}", [entity_id, found[-1][2], *params]
        )
    rows = {rid: (namespace, valid_from, (entity_id,)) for rid, namespace, valid_from in found}
    return _ranked(rows, limit)


def _entity_lane_by_links(
    conn: apsw.Connection, ids: list[str], scope: Scope, limit: int
) -> list[EntityRow]:
    """Several entities' rows: every link read from the index alone (no memory row), grouped
    by row and ordered by (entity count, valid_from); memory rows are then read in that order,
    a growing batch at a time, until `limit` of them pass the scope and every row tied with
    the last of those is read too (the ranking breaks ties by rid)."""
    linked: dict[str, list[str]] = {}
    dated: dict[str, str] = {}
    as_of = scope.as_of
    for memory_id, entity_id, valid_from in conn.execute(
        "SELECT memory_id, entity_id, valid_from FROM memory_entity "
        f"WHERE entity_id IN ({','.join('?' * len(ids))})",
        ids,
    ):
        if as_of is not None and valid_from is not None and valid_from > as_of:
            continue  # the row's clause would refuse it (valid_from <= as_of)
        entities = linked.get(memory_id)
        if entities is None:
            linked[memory_id] = [entity_id]
            dated[memory_id] = valid_from or ""
        else:
            entities.append(entity_id)
    order = sorted(linked, key=lambda mid: (len(linked[mid]), dated[mid]), reverse=True)
    where, params = scope.clause()
    rows: dict[int, tuple[str, str, tuple[str, ...]]] = {}

    def read(memory_ids: list[str]) -> None:
        for start in range(0, len(memory_ids), 500):
            part = memory_ids[start : start + 500]
            for rid, namespace, valid_from, memory_id in conn.execute(
                "SELECT m.rid, m.namespace, m.valid_from, m.id FROM memory AS m "
                f"WHERE m.id IN ({','.join('?' * len(part))}) AND {where}",
                [*part, *params],
            ):
                rows[rid] = (namespace, valid_from, tuple(sorted(linked[memory_id])))

    walked, batch = 0, limit
    while walked < len(order):
        chunk = order[walked : walked + batch]
        walked += len(chunk)
        batch *= 2
        read(chunk)
        if len(rows) >= limit:
            keys = sorted(((len(r[2]), r[1] or "") for r in rows.values()), reverse=True)
            cut = keys[limit - 1]
            # Rows not yet read rank at or below the last read; those tied with the cut
            # could still win on rid: read them, then stop.
            tied = []
            while walked < len(order):
                mid = order[walked]
                if (len(linked[mid]), dated[mid]) < cut:
                    break
                tied.append(mid)
                walked += 1
            read(tied)
            break
    return _ranked(rows, limit)


def _entity_lane_every_row(
    conn: apsw.Connection, entity_ids: Sequence[str], scope: Scope, limit: int | None
) -> list[EntityRow]:
    """entity_lane by joining every link to its row. Grouped and ranked here rather than by
    GROUP BY and ORDER BY: SQLite's two temp B-trees cost more than the join itself (~4 us a
    row)."""
    where, params = scope.clause()
    sql = (
        "SELECT m.rid, m.namespace, m.valid_from, me.entity_id "
        "FROM memory_entity AS me CROSS JOIN memory AS m ON m.id = me.memory_id "
        f"WHERE me.entity_id IN ({','.join('?' * len(entity_ids))}) AND {where}"
    )
    rows: dict[int, tuple[str, str, list[str]]] = {}
    for rid, namespace, valid_from, entity_id in conn.execute(sql, [*entity_ids, *params]):
        row = rows.get(rid)
        if row is None:
            rows[rid] = (namespace, valid_from, [entity_id])
        else:
            row[2].append(entity_id)
    return _ranked({rid: (ns, vf, tuple(sorted(e))) for rid, (ns, vf, e) in rows.items()}, limit)


def _ranked(
    rows: dict[int, tuple[str, str, tuple[str, ...]]], limit: int | None
) -> list[EntityRow]:
    # An empty date ranks oldest, as NULL does in ORDER BY ... DESC (no writer leaves one).
    ranked = sorted(
        rows, key=lambda rid: (len(rows[rid][2]), rows[rid][1] or "", rid), reverse=True
    )
    if limit is not None:
        ranked = ranked[:limit]
    return [(rid, rows[rid][0], len(rows[rid][2]), rows[rid][2]) for rid in ranked]


def matched_entities(conn: apsw.Connection, aliases: Sequence[str]) -> list[str]:
    """The entities these normalized aliases resolve to."""
    if not aliases:
        return []
    marks = ",".join("?" * len(aliases))
    rows = conn.execute(
        f"SELECT DISTINCT entity_id FROM entity_alias WHERE alias IN ({marks})", tuple(aliases)
    )
    return [r[0] for r in rows]


@dataclass(frozen=True)
class Candidate:
    memory: Memory
    content_norm: str
    embedding: bytes | None


def fetch(conn: apsw.Connection, rids: Sequence[int]) -> dict[int, Candidate]:
    """The full rows of a candidate pool, with what MMR compares (tokens, vector)."""
    out: dict[int, Candidate] = {}
    for start in range(0, len(rids), 500):
        chunk = tuple(rids[start : start + 500])
        rows = conn.execute(
            f"SELECT {_COLUMNS}, content_norm, embedding FROM memory "
            f"WHERE rid IN ({','.join('?' * len(chunk))})",
            chunk,
        )
        for r in rows:
            m = _row_to_memory(r[:-2])
            out[m.rowid] = Candidate(m, r[-2] or "", r[-1])
    return out


def entity_cards(
    conn: apsw.Connection, ids: Sequence[str]
) -> dict[str, list[tuple[str, str, str]]]:
    """memory id -> [(entity id, kind, name)] in name order."""
    if not ids:
        return {}
    rows = conn.execute(
        "SELECT me.memory_id, e.id, e.kind, e.name FROM memory_entity AS me "
        "JOIN entity AS e ON e.id = me.entity_id "
        f"WHERE me.memory_id IN ({','.join('?' * len(ids))}) ORDER BY e.name, e.id",
        tuple(ids),
    )
    out: dict[str, list[tuple[str, str, str]]] = {}
    for mid, eid, kind, name in rows:
        out.setdefault(mid, []).append((eid, kind, name))
    return out


def neighbours(
    conn: apsw.Connection,
    memory_id: str,
    relations: Sequence[str],
    scope: Scope,
    limit: int | None = None,
) -> list[tuple[Memory, str, float | None]]:
    """Rows one link away (either direction) that the scope admits, strongest link first; the
    first `limit` of them (None: all). The order is total (a row linked both ways comes
    twice, alike), so a shorter list is a prefix of a longer one: a row linked to a hundred
    near-duplicates builds the few that link expansion reads, not all of them."""
    where, params = scope.clause()
    marks = ",".join("?" * len(relations))
    sql = (
        f"SELECT {_COLUMNS.replace('rid, ', 'm.rid, ', 1)}, l.relation, l.score FROM ("
        f"  SELECT dst AS other, relation, score FROM memory_link WHERE src = ? "
        f"    AND relation IN ({marks})"
        f"  UNION ALL SELECT src, relation, score FROM memory_link WHERE dst = ? "
        f"    AND relation IN ({marks})"
        f") AS l CROSS JOIN memory AS m ON m.id = l.other WHERE {where} "
        "ORDER BY l.score DESC NULLS LAST, m.rid DESC, l.relation LIMIT ?"
    )
    args = [memory_id, *relations, memory_id, *relations, *params, -1 if limit is None else limit]
    return [(_row_to_memory(r[:-2]), r[-2], r[-1]) for r in conn.execute(sql, args)]


def by_id(conn: apsw.Connection, memory_id: str) -> Memory | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM memory WHERE id = ?", (memory_id,)).fetchone()
    return _row_to_memory(row) if row else None


def recent(conn: apsw.Connection, scope: Scope, limit: int, offset: int = 0) -> list[Memory]:
    """Newest valid rows first (by when they became valid), a page at a time."""
    where, params = scope.clause()
    sql = (
        f"SELECT {_COLUMNS.replace('rid, ', 'm.rid, ', 1)} FROM memory AS m WHERE {where} "
        "ORDER BY m.valid_from DESC, m.rid DESC LIMIT ? OFFSET ?"
    )
    return [_row_to_memory(r) for r in conn.execute(sql, [*params, limit, offset])]


def ids_containing(conn: apsw.Connection, fragment: str, limit: int = 50) -> list[str]:
    """Ids whose content holds the fragment, case-insensitively (a diagnostic scan: --target)."""
    rows = conn.execute(
        "SELECT id FROM memory WHERE instr(lower(content), lower(?)) > 0 "
        "ORDER BY superseded_at IS NOT NULL, rid DESC LIMIT ?",
        (fragment, limit),
    )
    return [r[0] for r in rows]


def fts_any(
    conn: apsw.Connection, match: str, live_only: bool, limit: int
) -> list[tuple[str, str]]:
    """(id, content) of rows matching any term, best first, regardless of namespace: the
    --target fallback and the not_in_db neighbour list."""
    live = "AND m.superseded_at IS NULL" if live_only else ""
    sql = (
        "SELECT m.id, m.content FROM memory_fts CROSS JOIN memory AS m "
        f"ON m.rid = memory_fts.rowid WHERE memory_fts MATCH ? {live} "
        "ORDER BY bm25(memory_fts) LIMIT ?"
    )
    return [(r[0], r[1]) for r in conn.execute(sql, (match, limit))]
