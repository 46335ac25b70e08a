"""Several processes writing one store at once (several agent sessions) never lose a row and
never surface "database is locked"."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from zmem import MemoryStore

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
