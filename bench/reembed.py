"""reembed --all: conversion throughput and what writers beside it see. Builds one store of
--rows memories with fake (16-d) vectors, then converts copies of it to MiniLM through the real
CLI: alone (throughput; with --old, the same runs against another checkout, alternated), and with
--writers processes adding through long-lived handles (as the hooks' resident process does) for
the whole conversion (add latency, adds lost). Prints markdown tables on stdout.

    .venv/bin/python bench/reembed.py [--rows 2000] [--writers 4] [--pairs 3] [--pace 0.05]
                               [--old CHECKOUT] [--work DIR]
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
NICE = 10  # what `zmem reembed` lowers its model thread's priority by (embedding/background.py)
TOPICS = (
    "deploys go through the staging cluster first",
    "the billing worker reads its port from settings.toml",
    "pytest runs with -x before every push",
    "the nightly job compacts the search index",
    "secrets come from the vault agent sidecar",
    "feature flags reload on SIGHUP",
    "the release train leaves on thursdays",
    "ripgrep replaces grep in every script",
)

VOCAB = (
    "alembic ansible artifact backoff bazel billing branch buildkite cache canary cargo celery "
    "changelog checksum clippy codeowners compose coverage cron daemon debian deploy docker "
    "dockerfile eslint fixture flake gradle grafana helm hotfix ingress jest jenkins kafka "
    "kubectl lambda linter lockfile makefile migration mypy nginx npm openapi pipeline poetry "
    "postgres prettier prometheus protobuf pytest rabbitmq redis release rollback ruff rustfmt "
    "schema sentry sidecar snapshot sqlite staging swagger terraform timeout tokio tox trace "
    "vault vite webhook webpack worker yarn"
).split()

BUILD = r"""
import sys
from zmem import MemoryStore, config
path, rows = sys.argv[1], int(sys.argv[2])
topics = sys.argv[3:]
with MemoryStore.open(settings=config.load_settings(store_path=path)) as s:
    for i in range(rows):
        s.add(f"note {i}: {topics[i % len(topics)]} (case {i * 7919 % 100003}, v{i % 97})",
              namespace=f"project:p{i % 4}", type="fact", signal="user")
"""

# Each writer's notes are distinct word mixes: a run of near-identical notes measures the write
# path's near-duplicate handling (its cost grows with every twin), not the job beside it.
WRITER = r"""
import json, os, random, sys, time
from zmem import MemoryStore, config
path, name, stop, pace = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
words = sys.argv[5:]
rng = random.Random(name)
store = MemoryStore.open(settings=config.load_settings(store_path=path))
out, errors, i = [], [], 0
while not os.path.exists(stop):
    text = " ".join(rng.sample(words, 9))
    started = time.perf_counter()
    try:
        r = store.add(f"{name} note {i}: {text}", namespace="project:writers", type="fact",
                      signal="user")
        out.append([r.id, time.perf_counter() - started, time.time()])
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {exc}"[:200])
    i += 1
    time.sleep(pace)
store.close()
print(json.dumps({"adds": out, "errors": errors}))
"""


# The control: the model busy at the job's CPU priority for the same time, touching no store.
# Writers' latency beside it is what the CPU alone costs them on this machine.
HOG = r"""
import os, sys, time
from pathlib import Path
from zmem.embedding import get_embedder
os.nice(int(sys.argv[3]))
embedder = get_embedder("minilm", Path(sys.argv[1]))
texts = [f"note {i}: the billing worker reads its port from settings.toml ({i})" for i in range(64)]
end = time.time() + float(sys.argv[2])
while time.time() < end:
    embedder.embed(texts)
"""


def _env(tree: Path, data: Path, profile: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZMEM_")}
    env.update(PYTHONPATH=str(tree / "src"), ZMEM_DATA=str(data), ZMEM_EMBED_PROFILE=profile)
    return env


def _convert(tree: Path, data: Path, store: Path) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "zmem", "--store", str(store), "reembed", "--all",
           "--profile", "minilm", "--json"]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(cmd, env=_env(tree, data, "minilm"), capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"reembed failed in {tree}: {done.stderr.strip()}")
    return wall, json.loads(done.stdout)


def _beside(
    tree: Path,
    data: Path,
    store: Path,
    writers: int,
    work: Path,
    pace: float,
    alone: float = 0.0,
    hog: bool = False,
) -> dict:
    """Writers adding for the whole conversion by `tree`; with alone > 0, no conversion: the
    writers by themselves for that many seconds (the machine's own add latency), or (hog) beside
    the model embedding at the job's priority without touching the store."""
    stop = work / "stop"
    stop.unlink(missing_ok=True)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(store), f"w{n}", str(stop), str(pace), *VOCAB],
            env=_env(tree, data, "fake"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for n in range(writers)
    ]
    time.sleep(1.0)  # writers warm (imports, first add) before the conversion starts
    began = time.time()
    if alone and hog:
        subprocess.run(
            [sys.executable, "-c", HOG, str(data), str(alone), str(NICE)],
            env=_env(tree, data, "minilm"), check=True,
        )  # fmt: skip
        wall, report = alone, {}
    elif alone:
        time.sleep(alone)
        wall, report = alone, {}
    else:
        wall, report = _convert(tree, data, store)
    ended = time.time()
    time.sleep(0.5)
    stop.write_text("")
    adds, errors = [], []
    for p in procs:
        out, err = p.communicate(timeout=120)
        if p.returncode != 0:
            raise SystemExit(f"writer failed: {err.strip()[-300:]}")
        got = json.loads(out)
        adds += got["adds"]
        errors += got["errors"]
    during = [a for a in adds if began <= a[2] <= ended]
    lat = sorted(a[1] * 1000 for a in during) or [0.0]
    check = subprocess.run(
        [sys.executable, "-c", "import sys, apsw; c = apsw.Connection(sys.argv[1]); "
         "print(c.execute(\"SELECT count(*) FROM memory WHERE namespace = 'project:writers'\")"
         ".fetchone()[0])", str(store)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    stored = int(check.stdout)
    return {
        "wall": wall,
        "adds_during": len(during),
        "p50": statistics.median(lat),
        "p99": lat[min(len(lat) - 1, int(len(lat) * 0.99))],
        "max": lat[-1],
        "errors": len(errors),
        "lost": len(adds) + len(errors) - stored,
        "first_error": errors[0] if errors else "",
        "longest_txn": report.get("longest_transaction_ms"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--pace", type=float, default=0.05, help="seconds between a writer's adds")
    ap.add_argument("--pairs", type=int, default=3, help="alternated old/new throughput runs")
    ap.add_argument("--old", type=Path, help="another checkout to compare with (e.g. main~1)")
    ap.add_argument("--work", type=Path, help="keep stores here (default: a temp dir)")
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="zmem-reembed-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    data = work / "data"
    base = work / "base.sqlite"
    if not base.exists():
        print(f"building a {args.rows}-row fake-profile store ...", file=sys.stderr)
        partial = work / "base.partial.sqlite"
        subprocess.run(
            [sys.executable, "-c", BUILD, str(partial), str(args.rows), *TOPICS],
            env=_env(ROOT, data, "fake"), check=True,
        )  # fmt: skip
        partial.rename(base)  # a failed build is never reused
    trees = [("new", ROOT)] + ([("old", args.old.resolve())] if args.old else [])
    warm = work / "warm.sqlite"  # builds and verifies the model copy outside the timings
    shutil.copy(base, warm)
    _convert(ROOT, data, warm)
    rates: dict[str, list[float]] = {name: [] for name, _ in trees}
    for pair in range(args.pairs):
        order = trees if pair % 2 == 0 else trees[::-1]
        for name, tree in order:
            copy = work / f"t-{name}.sqlite"
            shutil.copy(base, copy)
            wall, report = _convert(tree, data, copy)
            rates[name].append(report["rows_changed"] / wall)
            print(f"pair {pair + 1} {name}: {rates[name][-1]:.1f} rows/s", file=sys.stderr)
    print(
        f"\n### reembed --all --profile minilm, {args.rows} rows, alone (rows/s, whole command)\n"
    )
    print("| tree | runs | median rows/s | min | max |")
    print("|---|---|---|---|---|")
    for name, _ in trees:
        r = rates[name]
        print(f"| {name} | {len(r)} | {statistics.median(r):.1f} | {min(r):.1f} | {max(r):.1f} |")
    if args.old:
        ratios = [n / o for n, o in zip(rates["new"], rates["old"], strict=True)]
        print(f"\nnew/old throughput, per pair: median {statistics.median(ratios):.3f} "
              f"({min(ratios):.3f}-{max(ratios):.3f})")  # fmt: skip
    print(
        f"\n### {args.writers} writers (long-lived handles, an add each "
        f"{args.pace * 1000:.0f} ms) beside the conversion\n"
    )
    print("| tree | conversion s | adds during | add p50 ms | p99 ms | max ms | errors | lost "
          "| longest txn ms |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    runs = [(name, tree, 0.0, False) for name, tree in trees]
    runs.append(("none (writers alone)", ROOT, 10.0, False))
    runs.append((f"model only, nice {NICE}, no store (control)", ROOT, 20.0, True))
    for name, tree, alone, hog in runs:
        copy = work / f"w-{name.split()[0]}.sqlite"
        shutil.copy(base, copy)
        r = _beside(tree, data, copy, args.writers, work, args.pace, alone, hog)
        print(f"| {name} | {r['wall']:.1f} | {r['adds_during']} | {r['p50']:.1f} | "
              f"{r['p99']:.1f} | {r['max']:.1f} | {r['errors']} | {r['lost']} | "
              f"{r['longest_txn'] if r['longest_txn'] is not None else 'n/a'} |")  # fmt: skip
        if r["first_error"]:
            print(f"\n{name}: first error: `{r['first_error']}`")


if __name__ == "__main__":
    main()
