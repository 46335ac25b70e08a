"""The resident process's in-memory copy of the vector index: the same neighbours as vec0, and
never used once the store changed under it (a capture by another process, a write here)."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import apsw
import pytest

from zmem import MemoryStore
from zmem.db import vectors
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
