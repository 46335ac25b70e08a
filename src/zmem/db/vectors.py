"""The vector index: a sqlite-vec vec0 table keyed by memory rid and partitioned by namespace,
holding the vectors of LIVE rows only (a tombstone deletes its vector). Its size comes from the
embedding profile, so it is created at run time, not by a migration; `meta` records the profile
and dimension the store's vectors are committed to and which of two table names is live (a
conversion builds the other beside it, with a staging table, then flips). The extension is
loaded by path so the hot path never imports numpy (the sqlite_vec package does)."""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterator, Sequence

import apsw

from zmem.db import graph

PROFILE_KEY = "embedding_profile"
DIM_KEY = "embedding_dim"
TABLE = "memory_vec"
TABLE_KEY = "embedding_table"
# vec0 tables cannot be renamed (their shadow tables keep the old name), so a conversion builds
# its index under the other name and meta says which one is live.
TABLES = (TABLE, "memory_vec_b")
STAGE = "memory_vec_stage"
CONVERSION_KEY = "job:reembed"  # meta: an unfinished reembed's saved state (JSON)
MAX_K = 4096  # vec0 refuses a larger k
# Bumped by every vector write, replace or drop in this process: an in-memory copy of the
# index (retrieval.vector_cache) is stale once it moves. Other processes' writes show in
# PRAGMA data_version instead.
_generation = 0
# What an in-memory copy needs to catch up with any writer without re-reading every vector.
# New rows need nothing: rids only grow (no row is ever deleted), so they are the rows past the
# copy's highest rid. A tombstone appends its rid to a bounded ring in meta (total count first);
# every change to the vectors of existing rows (a re-embed, a namespace rekey, a new index)
# draws a new epoch, after which a copy rebuilds.
EPOCH_KEY = "vector_epoch"
REMOVALS_KEY = "vector_removals"
REMOVALS_KEPT = 512


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


def active(conn: apsw.Connection) -> str:
    """The live index's table name (one of a fixed pair: it is interpolated into SQL)."""
    name = graph.get_meta(conn, TABLE_KEY)
    return name if name in TABLES else TABLE


def spare(table: str) -> str:
    """The name a conversion builds its index under while `table` stays live."""
    return TABLES[1] if table == TABLES[0] else TABLES[0]


def table_exists(conn: apsw.Connection, table: str | None = None) -> bool:
    name = table or active(conn)
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone()
    return row is not None


def committed(conn: apsw.Connection) -> tuple[str | None, int | None]:
    """(profile, dimension) the store's vectors belong to, or (None, None) before the first."""
    profile = graph.get_meta(conn, PROFILE_KEY)
    dim = graph.get_meta(conn, DIM_KEY)
    return profile, int(dim) if dim else None


def create(conn: apsw.Connection, profile: str, dim: int) -> None:
    """Create the live index at `dim` and commit the store to `profile` (in a transaction)."""
    create_table(conn, active(conn), dim)
    set_committed(conn, profile, dim)


def create_table(conn: apsw.Connection, table: str, dim: int) -> None:
    assert table in TABLES
    rewritten(conn)
    conn.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING vec0("
        f"namespace text partition key, embedding float[{int(dim)}] distance_metric=cosine)"
    )


def set_committed(conn: apsw.Connection, profile: str, dim: int) -> None:
    rewritten(conn)
    _set_meta(conn, ((PROFILE_KEY, profile), (DIM_KEY, str(dim))))


def _set_meta(conn: apsw.Connection, pairs: Sequence[tuple[str, str]]) -> None:
    conn.executemany(
        "INSERT INTO meta (key, value) VALUES (?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        pairs,
    )


def rewritten(conn: apsw.Connection) -> None:
    """Existing rows' vectors changed in place: in-memory copies must rebuild."""
    _changed()
    _set_meta(conn, ((EPOCH_KEY, os.urandom(8).hex()),))


def _removed(conn: apsw.Connection, rid: int) -> None:
    held = graph.get_meta(conn, REMOVALS_KEY)
    total, *rids = (held or "0").split()
    rids.append(str(rid))
    _set_meta(conn, ((REMOVALS_KEY, " ".join([str(int(total) + 1), *rids[-REMOVALS_KEPT:]])),))


def change_marks(conn: apsw.Connection) -> tuple[str | None, int, list[int]]:
    """(epoch, tombstones ever counted, the newest of their rids, oldest first)."""
    marks = dict(
        conn.execute(
            "SELECT key, value FROM meta WHERE key IN (?, ?)", (EPOCH_KEY, REMOVALS_KEY)
        ).fetchall()
    )
    total, *rids = (marks.get(REMOVALS_KEY) or "0").split()
    return marks.get(EPOCH_KEY), int(total), [int(r) for r in rids]


def drop(conn: apsw.Connection, table: str) -> None:
    assert table in TABLES
    rewritten(conn)
    conn.execute(f"DROP TABLE IF EXISTS {table}")


def flip(conn: apsw.Connection, table: str, profile: str, dim: int) -> None:
    """Make `table` the live index and commit the store to its profile in one transaction's
    meta write: readers see the old index or the new one, never a mix."""
    assert table in TABLES
    rewritten(conn)
    _set_meta(conn, ((TABLE_KEY, table), (PROFILE_KEY, profile), (DIM_KEY, str(dim))))


def put(conn: apsw.Connection, rid: int, namespace: str, blob: bytes) -> bool:
    """Index a new live row's vector. False when this connection cannot (no vec0, no table,
    another dimension, a rowid already indexed: see _replace()): the row is still written, and
    `reembed` backfills the index later."""
    _changed()
    try:
        conn.execute(
            f"INSERT INTO {active(conn)} (rowid, namespace, embedding) VALUES (?, ?, ?)",
            (rid, namespace, blob),
        )
    except apsw.Error:
        return False
    return True


def _replace(conn: apsw.Connection, table: str, rows: Sequence[tuple[int, str, bytes]]) -> None:
    """(rid, namespace, vector) rows into `table`, replacing any it holds. vec0 refuses INSERT
    OR REPLACE of a rowid it already has (a UNIQUE error, not a replace), so they leave first."""
    conn.executemany(f"DELETE FROM {table} WHERE rowid = ?", [(r[0],) for r in rows])
    conn.executemany(f"INSERT INTO {table} (rowid, namespace, embedding) VALUES (?, ?, ?)", rows)


def move(conn: apsw.Connection, rid: int, namespace: str, blob: bytes) -> bool:
    """Re-index an indexed row under another namespace (False as put() says)."""
    rewritten(conn)
    try:
        _replace(conn, active(conn), [(rid, namespace, blob)])
    except apsw.Error:
        return False
    return True


def put_many(conn: apsw.Connection, rows: Sequence[tuple[int, str, bytes]]) -> bool:
    """put() for many new (rid, namespace, vector) rows in one statement (bulk ingest)."""
    if not rows:
        return True
    _changed()
    try:
        conn.executemany(
            f"INSERT INTO {active(conn)} (rowid, namespace, embedding) VALUES (?, ?, ?)", rows
        )
    except apsw.Error:
        return False
    return True


def delete(conn: apsw.Connection, memory_id: str) -> None:
    """Drop a tombstoned row's vector: the vector lane's pool is live rows only."""
    _changed()
    row = conn.execute("SELECT rid FROM memory WHERE id = ?", (memory_id,)).fetchone()
    if row is None:
        return
    _removed(conn, row[0])  # with or without an index here: copies read the rows themselves
    try:
        conn.execute(f"DELETE FROM {active(conn)} WHERE rowid = ?", (row[0],))
    except apsw.Error:
        pass  # no index in this store or connection; the lane re-checks liveness anyway


def knn(
    conn: apsw.Connection, blob: bytes, namespaces: Sequence[str] | None, k: int
) -> list[tuple[int, float]]:
    """(rid, cosine distance) nearest first, over the given namespaces (None: all). One KNN per
    partition, merged: vec0 does not merge an IN over partitions into one order."""
    k = min(k, MAX_K)
    sql = f"SELECT rowid, distance FROM {active(conn)} WHERE embedding MATCH ? AND k = ?"
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


def indexed_rows(
    conn: apsw.Connection, model: str, dim: int, after: int = 0
) -> Iterator[tuple[int, str, bytes | None]]:
    """(rid, namespace, vector) of the live rows past rid `after`, in rid order; the vector is
    None unless embedded by `model` at `dim` (such a row is outside the index). Streamed: at 100k
    rows a list of them all held ~300 MB at once. Read from the memory table, ~5x faster than a
    vec0 scan (it also holds vectors written by a process without sqlite-vec, which `reembed`
    would index)."""
    return conn.execute(
        "SELECT rid, namespace, CASE WHEN embedding_model = ? AND length(embedding) = ? "
        "THEN embedding END FROM memory WHERE rid > ? AND superseded_at IS NULL ORDER BY rid",
        (model, dim * 4, after),
    )


def count(conn: apsw.Connection) -> int:
    try:
        return conn.execute(f"SELECT count(*) FROM {active(conn)}").fetchone()[0]
    except apsw.Error:
        return 0


def live_count(conn: apsw.Connection) -> int:
    return conn.execute("SELECT count(*) FROM memory WHERE superseded_at IS NULL").fetchone()[0]


def needing(conn: apsw.Connection, model: str | None, dim: int) -> list[tuple[int, str]]:
    """(rid, content) of live rows without a `dim`-sized vector, or (model given) without one
    of `model`, in rid order."""
    sql = (
        "SELECT rid, content FROM memory WHERE superseded_at IS NULL AND (embedding IS NULL "
        "OR length(embedding) != ?"
    )
    args: list[object] = [dim * 4]
    if model is not None:
        sql += " OR embedding_model IS NOT ?"
        args.append(model)
    return conn.execute(sql + ") ORDER BY rid", args).fetchall()


def indexed_rids(conn: apsw.Connection) -> set[int]:
    """Every rid the live index holds (a vec0 scan, for maintenance only)."""
    table = active(conn)
    if not table_exists(conn, table):
        return set()
    return {r[0] for r in conn.execute(f"SELECT rowid FROM {table}")}


def meant_rids(conn: apsw.Connection, model: str, dim: int) -> set[int]:
    """The rids the index is meant to hold: live, embedded by `model` at `dim`."""
    rows = conn.execute(
        "SELECT rid FROM memory WHERE superseded_at IS NULL AND embedding IS NOT NULL "
        "AND embedding_model = ? AND length(embedding) = ?",
        (model, dim * 4),
    )
    return {r[0] for r in rows}


def index_rows(conn: apsw.Connection, rids: Sequence[int]) -> int:
    """Index these rows from their stored vectors (live ones only); returns rows indexed."""
    rewritten(conn)
    marks = ",".join("?" * len(rids))
    rows = conn.execute(
        f"SELECT rid, namespace, embedding FROM memory WHERE rid IN ({marks}) "
        "AND superseded_at IS NULL AND embedding IS NOT NULL",
        tuple(rids),
    ).fetchall()
    _replace(conn, active(conn), rows)  # a row re-embedded in place leaves its old vector
    return len(rows)


def unindex(conn: apsw.Connection, rids: Sequence[int], table: str | None = None) -> None:
    rewritten(conn)
    name = table or active(conn)
    assert name in TABLES
    conn.executemany(f"DELETE FROM {name} WHERE rowid = ?", [(r,) for r in rids])


def set_embedding(conn: apsw.Connection, rid: int, blob: bytes, model: str, at: str) -> bool:
    """Replace a LIVE row's vector (a row tombstoned meanwhile keeps its own); True if set."""
    rewritten(conn)
    conn.execute(
        "UPDATE memory SET embedding = ?, embedding_model = ?, embedded_at = ? "
        "WHERE rid = ? AND superseded_at IS NULL",
        (blob, model, at, rid),
    )
    return conn.changes() == 1


def embedded_models(conn: apsw.Connection) -> dict[str, int]:
    """Live rows per embedding model (None = no vector)."""
    rows = conn.execute(
        "SELECT embedding_model, count(*) FROM memory WHERE superseded_at IS NULL "
        "GROUP BY embedding_model"
    )
    return {r[0]: r[1] for r in rows}


# ---- conversion staging --------------------------------------------------------------------
# A conversion embeds every live row into the staging table and the spare index in bounded
# batches while the live index and the rows' own vectors stay as they were; then it flips the
# index in one short transaction and copies the staged vectors onto the rows in chunks.


def live_after(conn: apsw.Connection, cursor: int, limit: int) -> list[tuple[int, str, str]]:
    """(rid, namespace, content) of live rows past `cursor`, in rid order. A row added later
    gets a larger rid than any existing one (rows are never deleted), so a cursor misses none."""
    return conn.execute(
        "SELECT rid, namespace, content FROM memory WHERE rid > ? AND superseded_at IS NULL "
        "ORDER BY rid LIMIT ?",
        (cursor, limit),
    ).fetchall()


def pending_conversion(conn: apsw.Connection) -> dict | None:
    """What doctor shows of an unfinished conversion: target profile, phase, rows staged."""
    raw = graph.get_meta(conn, CONVERSION_KEY)
    try:
        state = json.loads(raw) if raw else None
    except ValueError:
        return {"profile": None, "phase": "unreadable", "done": 0}
    if not isinstance(state, dict):
        return None
    return {k: state.get(k) for k in ("profile", "phase", "done")}


def last_rid(conn: apsw.Connection) -> int:
    """The highest rid ever written (0 for none): rows are never deleted, so rids only grow."""
    return conn.execute("SELECT coalesce(max(rid), 0) FROM memory").fetchone()[0]


def stage_exists(conn: apsw.Connection) -> bool:
    row = conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (STAGE,)).fetchone()
    return row is not None


def create_stage(conn: apsw.Connection) -> None:
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {STAGE} (rid INTEGER PRIMARY KEY, embedding BLOB NOT NULL)"
    )


def drop_stage(conn: apsw.Connection) -> None:
    conn.execute(f"DROP TABLE IF EXISTS {STAGE}")


def stage(conn: apsw.Connection, table: str | None, rows: Sequence[tuple[int, str, bytes]]) -> None:
    """Keep (rid, namespace, vector) for the copy and index it in the spare `table` (None: no
    sqlite-vec in this connection; the rows' own vectors are still converted)."""
    conn.executemany(
        f"INSERT OR REPLACE INTO {STAGE} (rid, embedding) VALUES (?, ?)",
        [(rid, blob) for rid, _, blob in rows],
    )
    if table is not None:
        assert table in TABLES
        _changed()
        _replace(conn, table, rows)  # a resumed conversion may stage a row again


def staged_dead(conn: apsw.Connection) -> list[int]:
    """Staged rows tombstoned since they were staged: they must leave the spare index."""
    rows = conn.execute(
        f"SELECT s.rid FROM {STAGE} AS s JOIN memory AS m ON m.rid = s.rid "
        "WHERE m.superseded_at IS NOT NULL"
    )
    return [r[0] for r in rows]


def unstage(conn: apsw.Connection, rids: Sequence[int]) -> None:
    conn.executemany(f"DELETE FROM {STAGE} WHERE rid = ?", [(r,) for r in rids])


def staged_span(conn: apsw.Connection, cursor: int, limit: int) -> tuple[int, int] | None:
    """(first, last) rid of the next `limit` staged rows past `cursor`; None when none are."""
    row = conn.execute(
        f"SELECT min(rid), max(rid) FROM (SELECT rid FROM {STAGE} WHERE rid > ? "
        "ORDER BY rid LIMIT ?)",
        (cursor, limit),
    ).fetchone()
    return None if row[0] is None else (row[0], row[1])


def copy_staged(conn: apsw.Connection, first: int, last: int, model: str, at: str) -> int:
    """Move the staged vectors of rids first..last onto their rows; returns rows updated."""
    rewritten(conn)
    conn.execute(
        "UPDATE memory SET embedding = s.embedding, embedding_model = ?, embedded_at = ? "
        f"FROM {STAGE} AS s WHERE memory.rid = s.rid AND s.rid BETWEEN ? AND ?",
        (model, at, first, last),
    )
    done = conn.changes()
    conn.execute(f"DELETE FROM {STAGE} WHERE rid BETWEEN ? AND ?", (first, last))
    return done
