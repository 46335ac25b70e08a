"""Writers beside every long job on a loaded machine: four writer processes add in a loop
(each add timed alone, a busy refusal counted) while `consolidate --force`, `organize --force`,
`ingest-jsonl` of a 2,000-row file and `backup` run through the real CLI on a fresh copy of a
10k-row store (bench/maintenance.py's corpus), and a fifth process keeps both cores busy the
whole time. Prints, per job, the slowest add, the 99th percentile, the adds made and refused,
and the job's own time; and the same writers with no job, as the control.

    .venv/bin/python bench/beside.py [--rows 10000] [--runs 3] [--profile fake|minilm]
        [--writers api|cli] [--work /tmp/beside]

--writers api times `MemoryStore.add` in a long-lived process (the lock wait, as the MCP server
and the resident process see it); --writers cli times a whole `zmem add` process, as a shell
loop or a host's command sees it (interpreter, imports and the model load included).

Run it from another tree (`cd old-tree && python /path/bench/beside.py`) to time that tree's
code: the writers and the jobs import zmem from the tree the script sits in (its src/)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "src"))

import maintenance as corpus  # noqa: E402  (the store builder and its word lists)

WRITERS = 4
ALONE_S = 8.0
WRITER = r"""
import json, os, random, subprocess, sys, time
from zmem import MemoryStore
from zmem.errors import StoreBusy
path, ready, stop, seed, mode = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[5], sys.argv[6]
pace = float(sys.argv[4])
words = sys.argv[7:]
rng = random.Random(seed)
s = MemoryStore.open(path) if mode == "api" else None
adds, i = [], 0
while not os.path.exists(stop):
    text = f"writer {seed} note {i}: " + " ".join(rng.sample(words, 9))
    began, t0 = time.time(), time.perf_counter()
    if s is not None:
        try:
            s.add(text, namespace="project:bench-writer", type="fact", signal="test")
            ok = True
        except StoreBusy:
            ok = False
    else:
        ok = subprocess.run(
            [sys.executable, "-m", "zmem", "add", "--content", text, "--namespace",
             "project:bench-writer", "--type", "fact"], capture_output=True,
        ).returncode == 0
    adds.append((began, time.perf_counter() - t0, ok))
    i += 1
    if i == 1:
        open(ready, "w").close()
    time.sleep(pace)
if s is not None:
    s.close()
print(json.dumps(adds))
"""
BURN = r"""
import os, signal, sys
children = []
for _ in range(max(1, (os.cpu_count() or 2) - 1)):
    pid = os.fork()
    if pid == 0:
        while True:
            pass
    children.append(pid)
def stop(*_):
    for pid in children:
        os.kill(pid, signal.SIGKILL)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
while True:
    pass
"""


def env_for(store: Path, data: Path, profile: str = "fake") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZMEM_")}
    env.update(
        ZMEM_STORE=str(store), ZMEM_DATA=str(data), ZMEM_EMBED_PROFILE=profile,
        ZMEM_SESSION_UPKEEP="0", ZMEM_HOOK_DAEMON="0", PYTHONPATH=str(ROOT / "src"),
    )  # fmt: skip
    return env


def run_job(env: dict[str, str], args: list[str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "zmem", *args], env=env, capture_output=True,
                          text=True)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {done.stderr.strip()[-400:]}")
    return time.perf_counter() - t0


def beside(env: dict[str, str], store: Path, work: Path, args: list[str] | None, mode: str) -> dict:
    """Writers (and the load) around one job; what the writers saw while it ran."""
    stop = work / "stop"
    stop.unlink(missing_ok=True)
    burner = subprocess.Popen([sys.executable, "-c", BURN])
    writers = []
    for n in range(WRITERS):
        ready = work / f"ready{n}"
        ready.unlink(missing_ok=True)
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(store), str(ready), str(stop), "0.01", str(n),
             mode, *(corpus.VERBS + corpus.NOUNS)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        writers.append((proc, ready))
    try:
        for proc, ready in writers:
            while not ready.exists():
                if proc.poll() is not None:
                    raise SystemExit(f"writer failed: {proc.stderr.read()[-400:]}")
                time.sleep(0.05)
        time.sleep(0.3)
        began = time.time()
        if args is None:
            time.sleep(ALONE_S)
            took = ALONE_S
        else:
            took = run_job(env, args)
        ended = time.time()
    finally:
        stop.write_text("")
        burner.terminate()
        burner.wait(timeout=30)
    during: list[tuple[float, bool]] = []
    for proc, _ in writers:
        out, err = proc.communicate(timeout=600)
        if proc.returncode != 0:
            raise SystemExit(f"writer failed: {err.strip()[-400:]}")
        during += [(lat, ok) for at, lat, ok in json.loads(out) if began <= at <= ended]
    lats = sorted(lat for lat, _ in during)
    p99 = lats[min(len(lats) - 1, int(0.99 * len(lats)))] if lats else 0.0
    return {
        "worst_ms": (lats[-1] if lats else 0.0) * 1000,
        "p99_ms": p99 * 1000,
        "adds": len(lats),
        "refused": sum(not ok for _, ok in during),
        "job_s": took,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/tmp/zmem-beside"))
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--profile", choices=("fake", "minilm"), default="fake")
    ap.add_argument("--writers", choices=("api", "cli"), default="api")
    opts = ap.parse_args()
    work = opts.work
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("ZMEM_DATA", str(work / "build-data"))  # the model cache is shared
    source = work / f"source-{opts.profile}-{opts.rows}-{opts.seed}.sqlite"
    feed = work / f"feed-{opts.seed}.jsonl"
    if not source.exists():
        os.environ["ZMEM_EMBED_PROFILE"] = opts.profile
        corpus.build(source, opts.rows, opts.profile, opts.seed)
    if not feed.exists():
        other = work / "feed.sqlite"
        other.unlink(missing_ok=True)
        os.environ["ZMEM_EMBED_PROFILE"] = "fake"
        corpus.build(other, 2000, "fake", opts.seed + 1)
        run_job(env_for(other, work / "feed-data"), ["export-jsonl", "--out", str(feed)])
    store, data = work / "run.sqlite", work / "data"
    env = env_for(store, data, opts.profile)
    jobs = {
        "consolidate --force": ["consolidate", "--force"],
        "organize --force": ["organize", "--force"],
        "ingest-jsonl (2,000 rows)": ["ingest-jsonl", "--in", str(feed)],
        "backup": ["backup", "--out-dir", str(work / "backups"), "--retention", "1"],
        "none (the writers alone, 8 s)": None,
    }
    results: dict[str, list[dict]] = {name: [] for name in jobs}
    for run in range(opts.runs):
        for name, args in jobs.items():
            corpus.fresh_copy(source, store)
            shutil.rmtree(data, ignore_errors=True)
            got = beside(env, store, work, args, opts.writers)
            results[name].append(got)
            print(f"  run {run + 1} {name}: worst {got['worst_ms']:.0f} ms, p99 "
                  f"{got['p99_ms']:.0f} ms, {got['adds']} adds, {got['refused']} refused, "
                  f"job {got['job_s']:.1f} s", file=sys.stderr)  # fmt: skip
    print(f"\n{WRITERS} writers beside each job, both cores kept busy by a fifth process; "
          f"{opts.rows:,} rows ({opts.profile} profile), {opts.writers} writers, {opts.runs} runs; "
          "medians (worst of runs)\n")  # fmt: skip
    print("| job | slowest add ms | p99 add ms | adds | refused | job s |")
    print("|---|---|---|---|---|---|")
    for name, rows in results.items():
        worst = [r["worst_ms"] for r in rows]
        print(
            f"| {name} | {statistics.median(worst):.0f} ({max(worst):.0f}) | "
            f"{statistics.median(r['p99_ms'] for r in rows):.0f} | "
            f"{statistics.median(r['adds'] for r in rows):.0f} | "
            f"{sum(r['refused'] for r in rows)} | "
            f"{statistics.median(r['job_s'] for r in rows):.1f} |"
        )


if __name__ == "__main__":
    main()
