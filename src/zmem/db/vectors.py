"""The vector index: `memory_vec`, a sqlite-vec vec0 table keyed by memory rid and partitioned
by namespace, holding the vectors of LIVE rows only (a tombstone deletes its vector). Its
dimension comes from the embedding profile, so it is created at run time, not by a migration;
`meta` records which profile and dimension the store's vectors are committed to. The extension
is loaded by path so the hot path never imports numpy (the sqlite_vec package does)."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence

import apsw

from zmem.db import graph

PROFILE_KEY = "embedding_profile"
DIM_KEY = "embedding_dim"
TABLE = "memory_vec"
MAX_K = 4096  # vec0 refuses a larger k
# Bumped by every vector write, replace or drop in this process: an in-memory copy of the
# index (retrieval.vector_cache) is stale once it moves. Other processes' writes show in
# PRAGMA data_version instead.
_generation = 0


def generation() -> int:
    return _generation


def _changed() -> None:
    global _generation
    _generation += 1


def extension_path() -> str | None:
    """The vec0 loadable library of the installed sqlite-vec wheel, found without importing it."""
    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or not spec.submodule_search_locations:
        return None
    base = os.path.join(spec.submodule_search_locations[0], "vec0")
    for suffix in ("", ".so", ".dylib", ".dll"):
        if os.path.exists(base + suffix):
            return base
    return None


def load(conn: apsw.Connection) -> bool:
    """Load vec0 into this connection; False (never an error) when it is not installed."""
    path = extension_path()
    if path is None:
        return False
    try:
        conn.enable_load_extension(True)
        conn.load_extension(path)
        conn.enable_load_extension(False)
    except apsw.Error:
        return False
    return True


def available(conn: apsw.Connection) -> bool:
    """vec0 is loaded in this connection."""
    try:
        conn.execute("SELECT vec_version()").fetchone()
    except apsw.SQLError:
        return False
    return True


def data_version(conn: apsw.Connection) -> int:
    """Changes whenever ANOTHER connection commits to the file (SQLite's own counter): a
    cheap way to know that meta read earlier may be stale."""
    return conn.execute("PRAGMA data_version").fetchone()[0]


def table_exists(conn: apsw.Connection) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (TABLE,)).fetchone()
    return row is not None


def committed(conn: apsw.Connection) -> tuple[str | None, int | None]:
    """(profile, dimension) the store's vectors belong to, or (None, None) before the first."""
    profile = graph.get_meta(conn, PROFILE_KEY)
    dim = graph.get_meta(conn, DIM_KEY)
    return profile, int(dim) if dim else None


def create(conn: apsw.Connection, profile: str, dim: int) -> None:
    """Create the index at `dim` and commit the store to `profile` (inside a transaction)."""
    _changed()
    conn.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {TABLE} USING vec0("
        f"namespace text partition key, embedding float[{int(dim)}] distance_metric=cosine)"
    )
    set_committed(conn, profile, dim)


def set_committed(conn: apsw.Connection, profile: str, dim: int) -> None:
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?), (?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (PROFILE_KEY, profile, DIM_KEY, str(dim)),
    )


def drop(conn: apsw.Connection) -> None:
    _changed()
    conn.execute(f"DROP TABLE IF EXISTS {TABLE}")


def put(conn: apsw.Connection, rid: int, namespace: str, blob: bytes) -> bool:
    """Index a live row's vector. False when this connection cannot (no vec0, no table, another
    dimension): the row is still written, and `reembed` backfills the index later."""
    _changed()
    try:
        conn.execute(
            f"INSERT OR REPLACE INTO {TABLE} (rowid, namespace, embedding) VALUES (?, ?, ?)",
            (rid, namespace, blob),
        )
    except apsw.Error:
        return False
    return True


def delete(conn: apsw.Connection, memory_id: str) -> None:
    """Drop a tombstoned row's vector: the vector lane's pool is live rows only."""
    _changed()
    try:
        conn.execute(
            f"DELETE FROM {TABLE} WHERE rowid = (SELECT rid FROM memory WHERE id = ?)",
            (memory_id,),
        )
    except apsw.Error:
        pass  # no index in this store or connection; the lane re-checks liveness anyway


def knn(
    conn: apsw.Connection, blob: bytes, namespaces: Sequence[str] | None, k: int
) -> list[tuple[int, float]]:
    """(rid, cosine distance) nearest first, over the given namespaces (None: all). One KNN per
    partition, merged: vec0 does not merge an IN over partitions into one order."""
    k = min(k, MAX_K)
    sql = f"SELECT rowid, distance FROM {TABLE} WHERE embedding MATCH ? AND k = ?"
    if namespaces is None:
        rows = list(conn.execute(sql, (blob, k)))
    else:
        rows = []
        for ns in namespaces:
            rows += conn.execute(sql + " AND namespace = ?", (blob, k, ns)).fetchall()
    rows.sort(key=lambda r: (r[1], -r[0]))
    return [(r[0], r[1]) for r in rows[:k]]


def nearest_ids(
    conn: apsw.Connection, blob: bytes, namespace: str, k: int, exclude: Sequence[str] = ()
) -> list[tuple[str, float]]:
    """(memory id, cosine similarity) of the live rows of one namespace nearest to `blob`; empty
    when this connection or store has no index (the write path then compares tokens only)."""
    try:
        near = knn(conn, blob, [namespace], k + len(exclude))
    except apsw.Error:
        return []
    if not near:
        return []
    marks = ",".join("?" * len(near))
    ids = dict(
        conn.execute(
            f"SELECT rid, id FROM memory WHERE rid IN ({marks}) AND superseded_at IS NULL",
            [rid for rid, _ in near],
        )
    )
    out = [(ids[rid], 1.0 - d) for rid, d in near if rid in ids and ids[rid] not in exclude]
    return out[:k]


def indexed_rows(conn: apsw.Connection, model: str, dim: int) -> list[tuple[int, str, bytes]]:
    """(rid, namespace, vector) of the rows the index is meant to hold: live, embedded by `model`
    at `dim`. Read from the memory table, ~5x faster than a vec0 scan (it also holds vectors
    written by a process without sqlite-vec, which `reembed` would index)."""
    return conn.execute(
        "SELECT rid, namespace, embedding FROM memory WHERE superseded_at IS NULL "
        "AND embedding IS NOT NULL AND embedding_model = ? AND length(embedding) = ?",
        (model, dim * 4),
    ).fetchall()


def count(conn: apsw.Connection) -> int:
    try:
        return conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0]
    except apsw.Error:
        return 0


def live_rows(conn: apsw.Connection) -> list[tuple[int, str, bytes | None, str | None]]:
    """(rid, content, embedding, embedding_model) of every live row."""
    return list(
        conn.execute(
            "SELECT rid, content, embedding, embedding_model FROM memory "
            "WHERE superseded_at IS NULL ORDER BY rid"
        )
    )


def reindex(conn: apsw.Connection, model: str) -> int:
    """Make memory_vec hold exactly the live rows' vectors of `model` (rows written by a process
    without sqlite-vec, or tombstoned there, are caught up here). Returns rows indexed."""
    if not table_exists(conn):
        return 0
    _changed()
    conn.execute(f"DELETE FROM {TABLE}")
    rows = conn.execute(
        "SELECT rid, namespace, embedding FROM memory WHERE superseded_at IS NULL "
        "AND embedding IS NOT NULL AND embedding_model = ?",
        (model,),
    ).fetchall()
    conn.executemany(f"INSERT INTO {TABLE} (rowid, namespace, embedding) VALUES (?, ?, ?)", rows)
    return len(rows)


def set_embedding(conn: apsw.Connection, rid: int, blob: bytes, model: str, at: str) -> None:
    conn.execute(
        "UPDATE memory SET embedding = ?, embedding_model = ?, embedded_at = ? WHERE rid = ?",
        (blob, model, at, rid),
    )


def embedded_models(conn: apsw.Connection) -> dict[str, int]:
    """Live rows per embedding model (None = no vector)."""
    rows = conn.execute(
        "SELECT embedding_model, count(*) FROM memory WHERE superseded_at IS NULL "
        "GROUP BY embedding_model"
    )
    return {r[0]: r[1] for r in rows}
