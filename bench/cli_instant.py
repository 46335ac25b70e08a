"""Whole-process times of the commands a person types (issue 49): `zmem --version`, `zmem
recall QUERY` and `zmem add TEXT` with the resident process of the data dir up and warm,
beside a bare `python -c pass`, at N memories with MiniLM (bench/hooks.py's store). With --vs
SRC, the same commands of another tree (the previous main) run against their own copy of the
store and their own resident process, alternated with ours round by round, and the table
gives both and the median paired ratio.

    .venv/bin/python bench/cli_instant.py [--memories 10000] [--runs 30] [--vs DIR/src]

Targets (issue 49), p50: --version <= 60 ms, recall <= 100 ms, add <= 150 ms.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import hooks as hook_bench  # noqa: E402

ZMEM = ROOT / ".venv" / "bin" / "zmem"
NS = "project:bench"
TARGETS = {"--version": 60, "recall": 100, "add": 150}


def start_resident(data: Path, env: dict[str, str]) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "zmem.resident.daemon", str(data)], env=env,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    sock = data / "zmem-hookd.sock"
    deadline = time.monotonic() + 120
    while not sock.exists():
        if time.monotonic() > deadline:
            raise SystemExit("the resident process did not start")
        time.sleep(0.05)
    return proc


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, stdin=subprocess.DEVNULL)
    ms = (time.perf_counter() - t0) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:3])} failed: {done.stderr.decode()[-500:]}")
    return ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--profile", default="minilm")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--work", default="/tmp/hookbench")
    ap.add_argument("--vs", default=None, help="another tree's src/, alternated with ours")
    args = ap.parse_args()
    work = Path(args.work)
    base = work / f"data-{args.profile}-{args.memories}"
    if not (base / "store.sqlite").exists():
        base.mkdir(parents=True, exist_ok=True)
        os.environ.update(ZMEM_DATA=str(base), ZMEM_EMBED_PROFILE=args.profile)
        hook_bench.build_store(base / "store.sqlite", args.memories)
    project = work / "cli-project"
    project.mkdir(parents=True, exist_ok=True)
    trees = {"this tree": str(ROOT / "src")}
    if args.vs:
        trees[args.vs] = str(Path(args.vs).resolve())
    sides = {}
    procs = []
    try:
        for n, (name, src) in enumerate(trees.items()):
            data = work / f"cli-instant-{n}"
            shutil.rmtree(data, ignore_errors=True)
            data.mkdir(parents=True)
            shutil.copy2(base / "store.sqlite", data / "store.sqlite")
            env = {k: v for k, v in os.environ.items() if not k.startswith("ZMEM_")}
            env.update(ZMEM_DATA=str(data), ZMEM_EMBED_PROFILE=args.profile, PYTHONPATH=src,
                       ZMEM_HOOK_DAEMON="1", ZMEM_HOOKD_IDLE_S="900")  # fmt: skip
            procs.append(start_resident(data, env))
            sides[name] = env
        commands = {
            "python -c pass": lambda i: [sys.executable, "-c", "pass"],
            "--version": lambda i: [str(ZMEM), "--version"],
            # The flag spellings: the previous main has no positional QUERY or TEXT.
            "recall": lambda i: [
                str(ZMEM),
                "recall",
                "--query",
                hook_bench.PROMPTS[i % len(hook_bench.PROMPTS)],
                "--namespace",
                NS,
            ],  # fmt: skip
            "add": lambda i: [
                str(ZMEM),
                "add",
                "--content",
                f"Bench note {i}: run make check before pushing build {time.time_ns()}",
                "--type",
                "lesson",
                "--signal",
                "test",
                "--namespace",
                NS,
            ],  # fmt: skip
        }
        for i in range(3):  # the resident processes warm up; page cache
            for env in sides.values():
                for make in commands.values():
                    timed(make(i), env, project)
        times: dict[tuple[str, str], list[float]] = {}
        for i in range(args.runs):
            order = list(sides.items()) if i % 2 == 0 else list(reversed(sides.items()))
            for name, env in order:
                for command, make in commands.items():
                    times.setdefault((name, command), []).append(timed(make(i), env, project))
    finally:
        for p in procs:
            p.kill()
    print(f"\nwhole process, {args.memories:,} memories, {args.profile}, resident process warm, "
          f"{args.runs} runs a cell, alternated")  # fmt: skip
    print("| tree | command | p50 ms | p95 ms | target p50 |\n|---|---|---:|---:|---:|")
    for (name, command), xs in times.items():
        target = TARGETS.get(command, "")
        print(f"| {name} | {command} | {statistics.median(xs):.1f} | "
              f"{hook_bench.pct(xs, 0.95):.1f} | {target} |")  # fmt: skip
    if len(trees) == 2:
        a, b = list(trees)
        for command in commands:
            ratio = statistics.median(
                x / y for x, y in zip(times[(a, command)], times[(b, command)], strict=True)
            )
            print(f"{command}: median paired ratio this tree / {b}: {ratio:.2f}")


if __name__ == "__main__":
    main()
