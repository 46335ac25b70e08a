"""Several processes writing one store at once (several agent sessions) never lose a row and
never surface "database is locked"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import apsw
import pytest

from zmem import MemoryStore
from zmem.db import connect

WRITER = r"""
import json, sys
from zmem import MemoryStore
path, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
ids = []
with MemoryStore.open(path) as store:
    for i in range(n):
        # Distinct vocab per row so nothing dedups: every add must become a row.
        r = store.add(f"writer {tag} lesson {i} token{tag}x{i} about module{i % 7}",
                      namespace="project:race", type="lesson", signal="test")
        ids.append(r.id)
print(json.dumps(ids))
"""


def test_parallel_writers_lose_nothing(store_path):
    MemoryStore.open(store_path).close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZMEM_")}
    env["ZMEM_EMBED_PROFILE"] = "fake"  # the store below was created under the fake profile
    env["ZMEM_DATA"] = os.environ["ZMEM_DATA"]
    per_writer = 150
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(store_path), tag, str(per_writer)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for tag in ("a", "b", "c")
    ]
    results = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err
        assert "locked" not in err.lower()
    ids = [i for out, _ in results for i in json.loads(out)]
    assert len(ids) == len(set(ids)) == 3 * per_writer
    with MemoryStore.open(store_path) as store:
        assert store.stats()["live"] == 3 * per_writer
        assert {m.id for m in store.list(namespace="project:race")} == set(ids)


def test_parallel_cli_adds(store_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZMEM_")}
    env["ZMEM_STORE"] = str(store_path)
    env["ZMEM_DATA"] = os.environ["ZMEM_DATA"]  # never the developer's ~/.zmem
    env["ZMEM_EMBED_PROFILE"] = "fake"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "zmem",
                "add",
                "--namespace",
                "project:cli",
                "--type",
                "fact",
                "--signal",
                "test",
                "--content",
                f"fact number {i} uniqueword{i}",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(8)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    with MemoryStore.open(store_path) as store:
        assert store.stats()["live"] == 8


def _hold_lock(path, release: threading.Event, held: threading.Event) -> None:
    conn = connect.connect(path)
    conn.execute("BEGIN IMMEDIATE")
    held.set()
    release.wait(10)
    conn.execute("COMMIT")
    conn.close()


def test_a_waiting_writer_tries_at_a_steady_pace_and_gets_the_lock(store_path, monkeypatch):
    """The writer that has waited longest must not try least often (SQLite's own handler
    sleeps up to 100 ms between tries, so newcomers took every free moment first): each try
    sleeps BUSY_POLL_S, and the waiter gets the lock once the holder lets go."""
    MemoryStore.open(store_path).close()
    release, held = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_lock, args=(store_path, release, held))
    holder.start()
    held.wait(10)
    sleeps: list[float] = []
    real_sleep = time.sleep

    def counting_sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 40:
            release.set()
        real_sleep(seconds)

    monkeypatch.setattr(connect.time, "sleep", counting_sleep)
    waiter = connect.connect(store_path)
    with connect.transaction(waiter):
        waiter.execute("INSERT INTO meta(key, value) VALUES ('waited', '1')")
    holder.join(10)
    waiter.close()
    assert len(sleeps) >= 40
    assert set(sleeps) == {connect.BUSY_POLL_S}
    with MemoryStore.open(store_path) as store:
        assert store._conn.execute("SELECT value FROM meta WHERE key = 'waited'").fetchone() == (
            "1",
        )


def test_a_writer_gives_up_after_the_timeout_with_nothing_written(store_path):
    MemoryStore.open(store_path).close()
    release, held = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_lock, args=(store_path, release, held))
    holder.start()
    held.wait(10)
    waiter = connect.connect(store_path)
    connect.wait_when_busy(waiter, 200)
    began = time.monotonic()
    try:
        with pytest.raises(apsw.BusyError):
            with connect.transaction(waiter):
                waiter.execute("INSERT INTO meta(key, value) VALUES ('late', '1')")
        assert time.monotonic() - began >= 0.2
    finally:
        release.set()
        holder.join(10)
    assert waiter.execute("SELECT count(*) FROM meta WHERE key = 'late'").fetchone() == (0,)
    waiter.close()
