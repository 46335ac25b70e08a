"""SQL for the maintenance jobs that rewrite the live set (consolidate, organize): the rows they
read to cluster, the merged state they write onto a keeper, the links they carry over, and the
queries behind prune, the idle gate and organize's working set."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import apsw

from zmem.db import memories
from zmem.db.memories import _COLUMNS, _row_to_memory, join_tags
from zmem.db.vectors import live_count  # noqa: F401 - the live-row count, one definition
from zmem.models import Memory

# The structural mark of organize's own output rows (topic summaries): never the tags column,
# which a person can edit.
ORGANIZE_SOURCE_PREFIX = "organize:"
_MAX_VARIABLES = 500


@dataclass(frozen=True)
class Row:
    """A live row as clustering sees it: the memory, its similarity tokens, its vector."""

    memory: Memory
    norm: str
    embedding: bytes | None


def _rows(conn: apsw.Connection, where: str, params: Sequence[Any]) -> list[Row]:
    sql = f"SELECT {_COLUMNS}, content_norm, embedding FROM memory WHERE {where}"
    n = len(_COLUMNS.split(","))
    return [Row(_row_to_memory(r[:n]), r[n] or "", r[n + 1]) for r in conn.execute(sql, params)]


def live_namespaces(conn: apsw.Connection) -> list[str]:
    return sorted(memories.live_namespace_counts(conn))


def newest_live(conn: apsw.Connection, namespace: str, limit: int) -> tuple[list[Row], int]:
    """The `limit` newest live rows of a namespace (organize's summaries excluded), and how many
    live rows the namespace holds in all."""
    total = conn.execute(
        "SELECT count(*) FROM memory WHERE superseded_at IS NULL AND namespace = ?", (namespace,)
    ).fetchone()[0]
    rows = _rows(
        conn,
        "superseded_at IS NULL AND namespace = ? "
        "AND (source_ref IS NULL OR source_ref NOT LIKE ?) ORDER BY rid DESC LIMIT ?",
        (namespace, ORGANIZE_SOURCE_PREFIX + "%", max(limit, 0)),
    )
    return rows, total


def rows_by_id(conn: apsw.Connection, ids: Sequence[str]) -> list[Row]:
    out: list[Row] = []
    for i in range(0, len(ids), _MAX_VARIABLES):
        chunk = list(ids[i : i + _MAX_VARIABLES])
        out += _rows(conn, f"id IN ({','.join('?' * len(chunk))})", chunk)
    order = {m: k for k, m in enumerate(ids)}
    out.sort(key=lambda r: order[r.memory.id])
    return out


def episode_ids(conn: apsw.Connection, bound: int) -> list[str]:
    """organize's working set: the `bound` most recent live rows, box-wide, without its own
    summary rows (keyed on the reserved source_ref prefix)."""
    if bound <= 0:
        return []
    rows = conn.execute(
        "SELECT id FROM memory WHERE superseded_at IS NULL "
        "AND (source_ref IS NULL OR source_ref NOT LIKE ?) ORDER BY rid DESC LIMIT ?",
        (ORGANIZE_SOURCE_PREFIX + "%", bound),
    )
    return [r[0] for r in rows]


def _chunks(ids: Sequence[str]) -> list[list[str]]:
    # SQLite caps bound parameters per statement; a working set can hold 20,000 ids.
    return [list(ids[i : i + _MAX_VARIABLES]) for i in range(0, len(ids), _MAX_VARIABLES)]


def contradicting_pairs(conn: apsw.Connection, ids: Sequence[str]) -> set[frozenset[str]]:
    """Pairs among `ids` joined by a contradicts link (a recorded disagreement)."""
    wanted = set(ids)
    out: set[frozenset[str]] = set()
    for chunk in _chunks(ids):
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            f"SELECT src, dst FROM memory_link WHERE relation = 'contradicts' AND src IN ({marks})",
            chunk,
        )
        out |= {frozenset(r) for r in rows if r[1] in wanted}
    return out


def write_merge_state(
    conn: apsw.Connection,
    memory_id: str,
    *,
    tags: Sequence[str],
    taint: str,
    confidence: float,
    signal: str,
    trust_score: float,
    merged_from: Sequence[str],
    counters: dict[str, Any],
    refreshed_at: str | None,
) -> None:
    """A keeper's merged metadata: what the dedup refresh writes, plus provenance and the usage
    counters the absorbed rows brought with them."""
    conn.execute(
        "UPDATE memory SET tags = ?, taint = ?, confidence = ?, signal = ?, trust_score = ?, "
        "merged_from = ?, retrieval_count = ?, last_retrieved = ?, surfaced_count = ?, "
        "last_surfaced = ?, applied_count = ?, violated_count = ?, refreshed_at = ? "
        "WHERE id = ?",
        (
            join_tags(tags),
            taint,
            confidence,
            signal,
            trust_score,
            json.dumps(list(merged_from)),
            counters["retrieval_count"],
            counters["last_retrieved"],
            counters["surfaced_count"],
            counters["last_surfaced"],
            counters["applied_count"],
            counters["violated_count"],
            refreshed_at,
            memory_id,
        ),
    )


def carry_links(conn: apsw.Connection, sources: Sequence[str], target: str) -> int:
    """Give `target` the links of `sources` (rows it replaces), both directions, skipping links
    among the sources and target themselves. Returns the edges added."""
    group = [*sources, target]
    marks = ",".join("?" * len(sources))
    gmarks = ",".join("?" * len(group))
    before = conn.total_changes()
    conn.execute(
        "INSERT INTO memory_link (src, dst, relation, score, created_at) "
        f"SELECT ?, dst, relation, score, created_at FROM memory_link WHERE src IN ({marks}) "
        f"AND dst NOT IN ({gmarks}) ON CONFLICT (src, dst, relation) DO NOTHING",
        (target, *sources, *group),
    )
    conn.execute(
        "INSERT INTO memory_link (src, dst, relation, score, created_at) "
        f"SELECT src, ?, relation, score, created_at FROM memory_link WHERE dst IN ({marks}) "
        f"AND src NOT IN ({gmarks}) AND relation != 'updates' "
        "ON CONFLICT (src, dst, relation) DO NOTHING",
        (target, *sources, *group),
    )
    return conn.total_changes() - before


def prune_candidates(
    conn: apsw.Connection,
    *,
    namespaces: Sequence[str] | None,
    ids: Sequence[str] | None,
    max_confidence: float,
    older_than: str,
    stale_surface_before: str,
) -> list[str]:
    """Live rows with no evidence of use: ungrounded (signal none), low confidence, older than
    `older_than`, never retrieved or applied, and either never surfaced or last surfaced before
    `stale_surface_before` (a surface that has itself gone stale protects nothing)."""
    clauses = [
        "superseded_at IS NULL",
        "signal = 'none'",
        "confidence < ?",
        "ingestion_ts < ?",
        "retrieval_count = 0",
        "applied_count = 0",
        "(surfaced_count = 0 OR (last_surfaced IS NOT NULL AND last_surfaced < ?))",
        "(source_ref IS NULL OR source_ref NOT LIKE ?)",
    ]
    params: list[Any] = [max_confidence, older_than, stale_surface_before]
    params.append(ORGANIZE_SOURCE_PREFIX + "%")
    if namespaces is not None:
        clauses.append(f"namespace IN ({','.join('?' * len(namespaces))})")
        params += namespaces
    rows = conn.execute(
        f"SELECT id FROM memory WHERE {' AND '.join(clauses)} ORDER BY rid", params
    ).fetchall()
    found = [r[0] for r in rows]
    if ids is not None:
        keep = set(ids)
        found = [i for i in found if i in keep]
    return found


def last_activity(conn: apsw.Connection) -> str | None:
    """The latest write, retrieval or surface of any live row (the idle gate's clock)."""
    row = conn.execute(
        "SELECT max(max(ingestion_ts, coalesce(last_retrieved, ''), coalesce(last_surfaced, '')))"
        " FROM memory WHERE superseded_at IS NULL"
    ).fetchone()
    return row[0] or None


def without_entities(conn: apsw.Connection, ids: Sequence[str]) -> list[str]:
    have: set[str] = set()
    for chunk in _chunks(ids):
        marks = ",".join("?" * len(chunk))
        have |= {
            r[0]
            for r in conn.execute(
                f"SELECT DISTINCT memory_id FROM memory_entity WHERE memory_id IN ({marks})", chunk
            )
        }
    return [i for i in ids if i not in have]


def without_links(conn: apsw.Connection, ids: Sequence[str]) -> list[str]:
    """Rows with no related/supports/contradicts edge in either direction."""
    have: set[str] = set()
    for chunk in _chunks(ids):
        marks = ",".join("?" * len(chunk))
        have |= {
            r[0]
            for r in conn.execute(
                f"SELECT src FROM memory_link WHERE relation != 'updates' AND src IN ({marks}) "
                f"UNION SELECT dst FROM memory_link WHERE relation != 'updates' "
                f"AND dst IN ({marks})",
                (*chunk, *chunk),
            )
        }
    return [i for i in ids if i not in have]


def live_with_source_prefix(conn: apsw.Connection, prefix: str) -> list[Memory]:
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM memory WHERE superseded_at IS NULL AND source_ref LIKE ? "
        "ORDER BY rid",
        (prefix + "%",),
    )
    return [_row_to_memory(r) for r in rows]


def touched_topics(
    conn: apsw.Connection, ids: Sequence[str]
) -> list[tuple[str, str, str, str, int]]:
    """(entity id, kind, name, namespace, how many of `ids` link to it) for every entity
    linked to one of `ids`, by the namespace of the rows that link it, in entity order."""
    found: dict[tuple[str, str, str, str], int] = {}
    for chunk in _chunks(ids):
        marks = ",".join("?" * len(chunk))
        for eid, kind, name, namespace, n in conn.execute(
            "SELECT e.id, e.kind, e.name, t.namespace, count(*) FROM memory_entity me "
            "JOIN memory t ON t.id = me.memory_id JOIN entity e ON e.id = me.entity_id "
            f"WHERE me.memory_id IN ({marks}) GROUP BY e.id, t.namespace",
            chunk,
        ):
            key = (eid, kind, name, namespace)
            found[key] = found.get(key, 0) + n
    return [(*key, n) for key, n in sorted(found.items())]


def topic_members(
    conn: apsw.Connection, entity_id: str, namespace: str, limit: int
) -> tuple[int, list[Memory]]:
    """How many live rows of `namespace` (summaries excluded) link to the entity, and the
    `limit` most confident of them, newest first among equals."""
    where = (
        "FROM memory_entity me JOIN memory m ON m.id = me.memory_id "
        # "+m.namespace": not the namespace index, which walked the whole namespace per topic
        # (24 ms at 100k rows); by entity it is the entity's members only.
        "WHERE me.entity_id = ? AND +m.namespace = ? AND m.superseded_at IS NULL "
        "AND (m.source_ref IS NULL OR m.source_ref NOT LIKE ?)"
    )
    params = (entity_id, namespace, ORGANIZE_SOURCE_PREFIX + "%")
    count = conn.execute(f"SELECT count(*) {where}", params).fetchone()[0]
    columns = ", ".join("m." + c.strip() for c in _COLUMNS.split(",")[:-1])
    rows = conn.execute(
        f"SELECT {columns}, m.embedding IS NOT NULL {where} "
        "ORDER BY m.confidence DESC, m.rid DESC LIMIT ?",
        (*params, limit),
    )
    return count, [_row_to_memory(r) for r in rows]
