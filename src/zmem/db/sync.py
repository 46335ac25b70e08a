"""SQL for box-to-box sync: reading the rows, outgoing links, episodes and memberships an
export-jsonl writes, and restoring them verbatim on ingest (ids, timestamps, counters, trust),
which no other write path does: everything else mints its own id and clock."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import apsw

from zmem.db import memories, vectors
from zmem.models import Episode, Link, Memory

CHUNK = 500  # ids per IN (...) statement


def export_rows(
    conn: apsw.Connection, namespace: str | None, include_superseded: bool
) -> Iterator[Memory]:
    """Rows in insertion order, so an ingest into an empty store keeps the same order."""
    where, params = [], []
    if namespace is not None:
        where.append("namespace = ?")
        params.append(namespace)
    if not include_superseded:
        where.append("superseded_at IS NULL")
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    yield from memories.select(conn, f"{clause} ORDER BY rid", params)


def outgoing_links(conn: apsw.Connection, ids: Sequence[str]) -> dict[str, list[Link]]:
    out: dict[str, list[Link]] = {}
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            "SELECT src, dst, relation, score, created_at FROM memory_link "
            f"WHERE src IN ({marks}) ORDER BY src, dst, relation",
            chunk,
        )
        for row in rows:
            out.setdefault(row[0], []).append(Link(*row))
    return out


def export_episodes(conn: apsw.Connection, namespace: str | None) -> list[Episode]:
    where, params = ("WHERE namespace = ?", (namespace,)) if namespace else ("", ())
    rows = conn.execute(
        "SELECT id, namespace, started_at, ended_at, token_count, summary_memory_id "
        f"FROM episode {where} ORDER BY started_at, id",
        params,
    )
    return [Episode(*r) for r in rows]


def memberships(conn: apsw.Connection, episode_ids: Sequence[str]) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    for start in range(0, len(episode_ids), CHUNK):
        chunk = episode_ids[start : start + CHUNK]
        marks = ",".join("?" * len(chunk))
        out.extend(
            conn.execute(
                "SELECT episode_id, memory_id, added_at FROM episode_memory "
                f"WHERE episode_id IN ({marks}) ORDER BY episode_id, memory_id",
                chunk,
            )
        )
    return out


def namespaces_of(conn: apsw.Connection, ids: Sequence[str]) -> dict[str, str]:
    """id -> namespace of the ids this store holds."""
    found: dict[str, str] = {}
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        marks = ",".join("?" * len(chunk))
        found.update(conn.execute(f"SELECT id, namespace FROM memory WHERE id IN ({marks})", chunk))
    return found


def episode_namespaces(conn: apsw.Connection, ids: Sequence[str]) -> dict[str, str]:
    """id -> namespace of the episode ids this store holds."""
    found: dict[str, str] = {}
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        marks = ",".join("?" * len(chunk))
        found.update(
            conn.execute(f"SELECT id, namespace FROM episode WHERE id IN ({marks})", chunk)
        )
    return found


def present_ids(conn: apsw.Connection, ids: Sequence[str]) -> set[str]:
    return set(namespaces_of(conn, ids))


def restore_many(
    conn: apsw.Connection,
    rows: Sequence[tuple[dict[str, Any], str, tuple[bytes, str] | None]],
    at: str,
) -> None:
    """Insert rows exactly as another store held them, given (fields, dedup norm, vector): one
    statement per table for the whole batch. Live rows also get their vector and their dedup
    term counts; a tombstoned one is out of both pools, as tombstone() leaves it. Row ids are
    assigned here, after the largest, as SQLite would."""
    if not rows:
        return
    first = conn.execute("SELECT coalesce(max(rid), 0) + 1 FROM memory").fetchone()[0]
    values = []
    vecs: list[tuple[int, str, bytes]] = []
    terms: list[tuple[int, str, str]] = []
    for rid, (f, norm, embedding) in enumerate(rows, first):
        blob, model = embedding if embedding is not None else (None, None)
        values.append((
            rid, f["id"], f["content"], norm, f["type"], memories.join_tags(f["tags"]),
            f["namespace"], f["signal"], f["confidence"], f["taint"], f["trust_score"],
            f["source_ref"], f["source_hash"], f["ingestion_ts"], f["refreshed_at"],
            f["valid_from"], f["valid_until"], f["superseded_at"], f["supersede_reason"],
            f["update_of"], json.dumps(list(f["merged_from"])), f["retrieval_count"],
            f["last_retrieved"], f["surfaced_count"], f["last_surfaced"], f["applied_count"],
            f["violated_count"], blob, model, at if blob is not None else None,
        ))  # fmt: skip
        if f["superseded_at"] is None:
            terms.append((rid, f["namespace"], norm))
            if blob is not None:
                vecs.append((rid, f["namespace"], blob))
    conn.executemany(
        "INSERT INTO memory (rid, id, content, content_norm, type, tags, namespace, signal, "
        "confidence, taint, trust_score, source_ref, source_hash, ingestion_ts, refreshed_at, "
        "valid_from, valid_until, superseded_at, supersede_reason, update_of, merged_from, "
        "retrieval_count, last_retrieved, surfaced_count, last_surfaced, applied_count, "
        "violated_count, embedding, embedding_model, embedded_at) "
        f"VALUES ({', '.join('?' * 30)})",
        values,
    )
    vectors.put_many(conn, vecs)
    memories.add_terms_many(conn, terms)


def fold(conn: apsw.Connection, memory_id: str, tags: Sequence[str], taint: str) -> None:
    """A remote duplicate folded into a live local keeper: its tags and worse taint only (sync
    applies no trust deltas and leaves the keeper's clock alone)."""
    conn.execute(
        "UPDATE memory SET tags = ?, taint = ? WHERE id = ?",
        (memories.join_tags(tags), taint, memory_id),
    )


def restore_episode(conn: apsw.Connection, e: Episode) -> bool:
    conn.execute(
        "INSERT INTO episode (id, namespace, started_at, ended_at, token_count, "
        "summary_memory_id) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
        (e.id, e.namespace, e.started_at, e.ended_at, e.token_count, e.summary_memory_id),
    )
    return conn.changes() == 1


def episode_ids_present(conn: apsw.Connection, ids: Sequence[str]) -> set[str]:
    found: set[str] = set()
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start : start + CHUNK]
        marks = ",".join("?" * len(chunk))
        found.update(
            r[0] for r in conn.execute(f"SELECT id FROM episode WHERE id IN ({marks})", chunk)
        )
    return found


def close_episode(conn: apsw.Connection, e: Episode) -> bool:
    """A closed episode that arrived from the hub closes the local open one (episodes close
    once; a closed one is never reopened)."""
    conn.execute(
        "UPDATE episode SET ended_at = ?, token_count = ?, summary_memory_id = "
        "coalesce(?, summary_memory_id) WHERE id = ? AND ended_at IS NULL",
        (e.ended_at, e.token_count, e.summary_memory_id, e.id),
    )
    return conn.changes() == 1


# ---- what a hub push reads (issue 32) --------------------------------------------------------


def _in(namespaces: Sequence[str]) -> str:
    return ",".join("?" * len(namespaces))


def rows_after(
    conn: apsw.Connection, after_rid: int, namespaces: Sequence[str], limit: int
) -> list[tuple[int, Memory]]:
    """Rows of these namespaces past `after_rid` (live or not), in rid order: what this store
    wrote since its last push, and what it pulled (the caller tells them apart)."""
    if not namespaces:
        return []
    rows = conn.execute(
        "SELECT rid FROM memory WHERE rid > ? AND namespace IN "
        f"({_in(namespaces)}) ORDER BY rid LIMIT ?",
        (after_rid, *namespaces, limit),
    ).fetchall()
    rids = [r[0] for r in rows]
    if not rids:
        return []
    found = {m.rowid: m for m in memories.select(
        conn, f"WHERE rid IN ({','.join('?' * len(rids))})", rids
    )}  # fmt: skip
    return [(rid, found[rid]) for rid in rids]


def max_rid(conn: apsw.Connection) -> int:
    return conn.execute("SELECT coalesce(max(rid), 0) FROM memory").fetchone()[0]


def tombstoned(conn: apsw.Connection, namespaces: Sequence[str]) -> dict[str, str]:
    """id -> namespace of every tombstoned row of these namespaces."""
    if not namespaces:
        return {}
    return dict(conn.execute(
        f"SELECT id, namespace FROM memory WHERE namespace IN ({_in(namespaces)}) "
        "AND superseded_at IS NOT NULL",
        tuple(namespaces),
    ))  # fmt: skip


def links_in(conn: apsw.Connection, namespaces: Sequence[str]) -> list[tuple[str, Link]]:
    """(namespace, link) of every link whose ends are both in one of these namespaces."""
    if not namespaces:
        return []
    rows = conn.execute(
        "SELECT s.namespace, l.src, l.dst, l.relation, l.score, l.created_at FROM memory_link l "
        "JOIN memory s ON s.id = l.src JOIN memory d ON d.id = l.dst "
        f"WHERE s.namespace IN ({_in(namespaces)}) AND d.namespace = s.namespace",
        tuple(namespaces),
    )
    return [(r[0], Link(*r[1:])) for r in rows]


def episodes_in(conn: apsw.Connection, namespaces: Sequence[str]) -> list[Episode]:
    if not namespaces:
        return []
    rows = conn.execute(
        "SELECT id, namespace, started_at, ended_at, token_count, summary_memory_id FROM episode "
        f"WHERE namespace IN ({_in(namespaces)}) ORDER BY started_at, id",
        tuple(namespaces),
    )
    return [Episode(*r) for r in rows]


def memberships_in(conn: apsw.Connection, namespaces: Sequence[str]) -> list[tuple[str, ...]]:
    """(namespace, episode_id, memory_id, added_at) of the episodes of these namespaces."""
    if not namespaces:
        return []
    return [tuple(r) for r in conn.execute(
        "SELECT e.namespace, m.episode_id, m.memory_id, m.added_at FROM episode_memory m "
        f"JOIN episode e ON e.id = m.episode_id WHERE e.namespace IN ({_in(namespaces)})",
        tuple(namespaces),
    )]  # fmt: skip
