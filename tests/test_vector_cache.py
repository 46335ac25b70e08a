"""The resident process's in-memory copy of the vector index: the same neighbours as vec0, and
never used once the store changed under it (a capture by another process, a write here)."""

from __future__ import annotations

import json
import random
import struct
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

from zmem import MemoryStore
from zmem.db import memories, vectors
from zmem.retrieval.vector_cache import VectorCache

DIM = 16  # the fake profile's


def blob(rnd: random.Random) -> bytes:
    return struct.pack(f"<{DIM}f", *(rnd.uniform(-1, 1) for _ in range(DIM)))


@pytest.fixture
def store(store_path: Path):
    with MemoryStore.open(store_path) as s:
        for i in range(60):
            s.add(
                f"note {i}: service{i % 7} deploys need step {i * 13 % 17} first",
                namespace="project:a" if i % 3 else "user:global",
                type="fact",
                signal="user",
            )
        yield s


def test_the_copy_finds_what_vec0_finds(store):
    conn = store._conn
    assert store.keep_vectors_in_memory()
    cache = store.vectors.cache
    assert cache.rows == vectors.count(conn) == 60
    rnd = random.Random(3)
    for _ in range(25):
        q = blob(rnd)
        for namespaces in (["project:a"], ["user:global"], ["project:a", "user:global"], None):
            for k in (1, 5, 40, 100):
                want = vectors.knn(conn, q, namespaces, k)
                got = cache.knn(q, namespaces, k)
                assert [r for r, _ in got] == [r for r, _ in want]
                assert [d for _, d in got] == pytest.approx([d for _, d in want], abs=1e-5)


def test_a_write_in_this_process_makes_the_copy_stale_until_rebuilt(store):
    assert store.keep_vectors_in_memory()
    cache = store.vectors.cache
    assert cache.fresh(store._conn)
    new = store.add(
        "rotate the staging TLS cert before Friday",
        namespace="project:a",
        type="fact",
        signal="user",
    )
    assert not cache.fresh(store._conn)
    store.keep_vectors_in_memory()
    assert cache.fresh(store._conn) and cache.rows == 61
    store.invalidate(new.id, "done")
    assert not cache.fresh(store._conn)
    store.keep_vectors_in_memory()
    assert cache.rows == 60


def test_a_commit_by_another_connection_makes_the_copy_stale(store, store_path):
    assert store.keep_vectors_in_memory()
    cache = store.vectors.cache
    other = apsw.Connection(str(store_path))
    other.execute("UPDATE memory SET retrieval_count = retrieval_count WHERE rid = 1")
    other.close()
    assert not cache.fresh(store._conn)


def test_recall_answers_the_same_with_and_without_the_copy(store, store_path):
    queries = ["service3 deploys", "what must happen first for service5", "step 4"]
    before = [
        [h.id for h in store.recall(q, namespace="project:a", telemetry=False)] for q in queries
    ]
    assert store.keep_vectors_in_memory()
    calls = []
    real = VectorCache.knn

    def spy(self, *a, **k):
        calls.append(1)
        return real(self, *a, **k)

    VectorCache.knn = spy
    try:
        after = [
            [h.id for h in store.recall(q, namespace="project:a", telemetry=False)] for q in queries
        ]
    finally:
        VectorCache.knn = real
    assert calls, "the copy was not used"
    assert after == before


def test_a_store_that_reads_no_vectors_keeps_no_copy(store_path):
    with MemoryStore.open(store_path) as s:
        s.vectors.ready = False  # as when sqlite-vec is missing: recall is lexical
        assert s.keep_vectors_in_memory() is False
        assert s.vectors.cache is None


# ---- staying in step with other writers -------------------------------------------------------


def _same_as_vec0(cache: VectorCache, conn: apsw.Connection, seed: int) -> None:
    rnd = random.Random(seed)
    for _ in range(10):
        q = blob(rnd)
        for namespaces in (["project:a"], ["project:b"], ["project:a", "user:global"], None):
            for k in (1, 7, 100):
                want = vectors.knn(conn, q, namespaces, k)
                got = cache.knn(q, namespaces, k)
                assert [r for r, _ in got] == [r for r, _ in want]
                assert [d for _, d in got] == pytest.approx([d for _, d in want], abs=1e-5)


def test_the_copy_catches_up_with_another_writer_without_a_rebuild(store, store_path, monkeypatch):
    """A random run of adds, updates, invalidations and counter bumps by another connection:
    after each commit the copy, caught up on the next read, answers as vec0 does, and is never
    rebuilt."""
    assert store.keep_vectors_in_memory()
    cache = store.vectors.cache
    rebuilds = []
    real = VectorCache.rebuild
    monkeypatch.setattr(VectorCache, "rebuild", lambda self: rebuilds.append(1) or real(self))
    rnd = random.Random(7)
    with MemoryStore.open(store_path) as other:
        for step in range(40):
            live = [m.id for m in other.list(limit=500)]
            roll = rnd.random()
            if roll < 0.4 or not live:
                other.add(
                    f"step {step}: worker{rnd.randint(0, 9)} caches token{rnd.randint(0, 99)}",
                    namespace=rnd.choice(["project:a", "project:b", "user:global"]),
                    type="fact",
                    signal="user",
                )
            elif roll < 0.6:
                other.update(rnd.choice(live), f"revised in step {step}: queue{step} drains")
            elif roll < 0.8:
                other.invalidate(rnd.choice(live), "wrong")
            else:
                other.recall("worker caches token", namespace="project:a")  # counters only
            with store._conn:
                assert cache.current(store._conn)
            assert cache.rows == vectors.count(store._conn)
            _same_as_vec0(cache, store._conn, step)
    assert rebuilds == []


def test_rewritten_vectors_or_too_many_tombstones_send_reads_to_vec0_until_rebuilt(
    store, store_path
):
    assert store.keep_vectors_in_memory()
    cache = store.vectors.cache
    with MemoryStore.open(store_path) as other:
        other.rekey_namespace(source="project:a", to="project:b", apply=True)
    assert not cache.current(store._conn)  # partitions moved under it
    # vec0 moved them too (its INSERT OR REPLACE kept a row in its old partition)
    assert vectors.knn(store._conn, blob(random.Random(0)), ["project:a"], 5) == []
    assert store.keep_vectors_in_memory() and cache.current(store._conn)
    _same_as_vec0(cache, store._conn, 1)
    conn = apsw.Connection(str(store_path))
    vectors.load(conn)
    ids = [r[0] for r in conn.execute("SELECT id FROM memory WHERE superseded_at IS NULL")]
    with conn:
        for i in range(vectors.REMOVALS_KEPT + 1):
            conn.execute(
                "INSERT INTO memory (id, content, type, namespace, signal, confidence, "
                "ingestion_ts, valid_from) VALUES (?, 'x', 'fact', 'project:b', 'none', 0.2, "
                "'2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')",
                (f"filler-{i}",),
            )
        for i in range(vectors.REMOVALS_KEPT + 1):
            memories.tombstone(conn, f"filler-{i}", "2026-01-02T00:00:00Z", "bench")
    conn.close()
    assert not cache.current(store._conn)  # the ring no longer says which rows went
    assert store.keep_vectors_in_memory() and cache.current(store._conn)
    assert cache.rows == vectors.count(store._conn) == len(ids)


def test_no_catch_up_inside_this_connection_s_own_write(store):
    assert store.keep_vectors_in_memory()
    cache = store.vectors.cache
    conn = store._conn
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(
        "INSERT INTO memory (id, content, type, namespace, signal, confidence, ingestion_ts, "
        "valid_from, embedding, embedding_model) VALUES ('uncommitted', 'x', 'fact', "
        "'project:a', 'none', 0.2, '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', ?, ?)",
        (blob(random.Random(1)), cache.model),
    )
    vectors.put(conn, vectors.last_rid(conn), "project:a", blob(random.Random(1)))
    assert not cache.current(conn)  # a rollback would leave the copy ahead of the store
    conn.execute("ROLLBACK")
    assert cache.current(conn) and cache.rows == 60


def test_a_long_tail_makes_the_owner_rebuild(store, monkeypatch):
    from zmem.retrieval import vector_cache

    monkeypatch.setattr(vector_cache, "TAIL_ROWS", 3)
    assert store.keep_vectors_in_memory()
    cache = store.vectors.cache
    for i in range(4):
        store.add(f"tail row {i}: shard{i} owns keys", namespace="project:a", type="fact")
    assert cache.current(store._conn) and cache.worn
    store.keep_vectors_in_memory()
    assert not cache.worn and cache.rows == 64
    _same_as_vec0(cache, store._conn, 2)


def test_the_copy_catches_up_with_the_cli_in_another_process(store, monkeypatch):
    """The real entry point in another process: `zmem add`, `update`, `invalidate`."""
    assert store.keep_vectors_in_memory()
    cache = store.vectors.cache
    monkeypatch.setattr(VectorCache, "rebuild", lambda self: pytest.fail("rebuilt"))
    zmem = [sys.executable, "-m", "zmem"]

    def cli(*args: str) -> str:
        done = subprocess.run([*zmem, *args], capture_output=True, text=True, check=True)
        return done.stdout

    added = json.loads(
        cli(
            "add",
            "--namespace",
            "project:b",
            "--type",
            "fact",
            "--signal",
            "user",
            "--json",
            "--content",
            "the nightly export writes parquet to the cold bucket",
        )
    )["id"]
    assert cache.current(store._conn) and cache.rows == 61
    revised = json.loads(
        cli(
            "update",
            "--id",
            added,
            "--json",
            "--content",
            "the nightly export writes csv files to the cold bucket",
        )
    )["id"]
    assert cache.current(store._conn) and cache.rows == 61
    cli("invalidate", "--id", revised, "--reason", "moved")
    cli("invalidate", "--id", store.list(limit=1)[0].id, "--reason", "moved")
    assert cache.current(store._conn) and cache.rows == 59 == vectors.count(store._conn)
    _same_as_vec0(cache, store._conn, 5)


def test_rows_the_index_already_holds_are_replaced_not_refused(store):
    """vec0 raises on INSERT OR REPLACE of a rowid it holds: re-indexing a re-embedded row, or
    re-staging one when a conversion resumes, must replace its vector instead."""
    conn = store._conn
    rid, namespace = conn.execute("SELECT rid, namespace FROM memory LIMIT 1").fetchone()
    new = blob(random.Random(9))
    with conn:
        assert not vectors.put(conn, rid, namespace, new)  # a new-row insert: refused, no harm
        conn.execute("UPDATE memory SET embedding = ? WHERE rid = ?", (new, rid))
        assert vectors.index_rows(conn, [rid]) == 1
    assert vectors.knn(conn, new, [namespace], 1) == [(rid, pytest.approx(0.0, abs=1e-6))]
    spare = vectors.spare(vectors.active(conn))
    with conn:
        vectors.create_table(conn, spare, DIM)
        vectors.create_stage(conn)
        vectors.stage(conn, spare, [(rid, namespace, new)])
        vectors.stage(conn, spare, [(rid, namespace, new)])  # resumed: the same row again
        assert conn.execute(f"SELECT count(*) FROM {spare}").fetchone()[0] == 1
