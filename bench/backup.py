"""backup and restore on a large store, through the real CLI: the time of a verified backup
(copy + integrity_check + counts), the longest wait of a writer adding beside it, and the time
of a restore (verify, prerestore copy, swap, verify again). Medians of --runs.

    .venv/bin/python bench/backup.py [--store PATH | --rows 100000] [--runs 3] [--work DIR]

With --store, a copy of that store is used (the original is never touched); otherwise --rows
rows are built with the fake profile into DIR (kept for the next run).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

WRITER = """
import sys, time
from zmem import MemoryStore
s = MemoryStore.open(sys.argv[1])
worst, n, stop = 0.0, 0, time.monotonic() + float(sys.argv[2])
while time.monotonic() < stop:
    t0 = time.monotonic()
    s.add(f"bench writer note {n} {time.time_ns()}", namespace="project:bench-writer",
          type="fact", signal="test")
    worst, n = max(worst, time.monotonic() - t0), n + 1
print(worst * 1000, n)
"""


def build(path: Path, rows: int) -> None:
    from zmem import MemoryStore

    with MemoryStore.open(path, create=True) as s:
        for i in range(rows):
            s.add(f"Lesson {i}: check service{i % 211} before step {i * 7 % 1009}",
                  namespace=f"project:p{i % 7}", type="lesson", signal="test")  # fmt: skip


def profile_of(path: Path) -> str:
    import apsw

    from zmem.db import vectors

    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return vectors.committed(conn)[0] or "fake"
    finally:
        conn.close()


def zmem(env: dict[str, str], *args: str) -> tuple[float, dict]:
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "zmem", *args, "--json"], env=env,
                          capture_output=True, text=True)  # fmt: skip
    elapsed = time.monotonic() - t0
    if done.returncode != 0:
        raise SystemExit(f"zmem {' '.join(args)} failed: {done.stderr.strip()}")
    return elapsed, json.loads(done.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", type=Path, default=None)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", type=Path, default=None)
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="zmem-backup-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    source = args.store or work / f"built-{args.rows}.sqlite"
    if args.store is None and not source.exists():
        os.environ.update(ZMEM_EMBED_PROFILE="fake", ZMEM_DATA=str(work / "data"))
        print(f"building {args.rows} rows in {source} ...", file=sys.stderr)
        build(source, args.rows)
    store = work / "bench.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(str(store) + suffix).unlink(missing_ok=True)
    shutil.copy2(source, store)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZMEM_")}
    env.update(ZMEM_STORE=str(store), ZMEM_DATA=str(work / "data"),
               ZMEM_EMBED_PROFILE=profile_of(store))  # fmt: skip
    out = work / "backups"
    backups, waits, restores = [], [], []
    size = store.stat().st_size
    for _ in range(args.runs):
        elapsed, doc = zmem(env, "backup", "--out-dir", str(out), "--retention", "1")
        backups.append(elapsed)
        # The same backup again, a writer adding beside it for as long as the backup took.
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(store), str(elapsed * 1.2)],
                                  env=env, stdout=subprocess.PIPE, text=True)  # fmt: skip
        time.sleep(0.3)  # the writer's process start and store open
        # (retention 1: this one replaces the first, and is what restore reads back)
        _, doc = zmem(env, "backup", "--out-dir", str(out), "--retention", "1")
        worst, adds = writer.communicate(timeout=600)[0].split()
        waits.append((float(worst), int(adds)))
        elapsed, _ = zmem(env, "restore", "--from", doc["path"], "--force", "--out-dir",
                          str(work / "prerestore"))  # fmt: skip
        restores.append(elapsed)
        shutil.rmtree(work / "prerestore", ignore_errors=True)
    print(f"\nbackup and restore, {doc['total']} rows, store {size / 2**20:.0f} MB\n")
    print("| step | median s | runs |")
    print("|---|---|---|")
    print(f"| backup (copy, integrity_check, counts) | {statistics.median(backups):.2f} | "
          f"{', '.join(f'{b:.2f}' for b in backups)} |")  # fmt: skip
    print(f"| restore (verify, prerestore copy, swap, verify) | {statistics.median(restores):.2f}"
          f" | {', '.join(f'{r:.2f}' for r in restores)} |")  # fmt: skip
    print(f"\nwriter beside a backup: longest add {max(w for w, _ in waits):.0f} ms "
          f"({sum(n for _, n in waits)} adds)")  # fmt: skip


if __name__ == "__main__":
    main()
