"""Is one consolidate a fixed point? Runs `zmem consolidate --force --json` twice through the
real CLI on a fresh copy of a 10k-row store (bench/maintenance.py's corpus, the store
bench/beside.py uses) and prints what each run merged, in how many rounds, and how long it
took. On a fixed point the second run merges nothing.

    .venv/bin/python bench/fixed_point.py [--rows 10000] [--profile fake|minilm]
        [--seed 7] [--work /tmp/zmem-beside]

Run it from another tree (`cd old-tree && python /path/bench/fixed_point.py`) to time that
tree's code: the CLI runs from the tree the script sits in (its src/)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "src"))

import maintenance as corpus  # noqa: E402  (the store builder and its word lists)


def consolidate(store: Path, data: Path, profile: str) -> tuple[dict, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZMEM_")}
    env.update(
        ZMEM_STORE=str(store), ZMEM_DATA=str(data), ZMEM_EMBED_PROFILE=profile,
        ZMEM_SESSION_UPKEEP="0", ZMEM_HOOK_DAEMON="0", PYTHONPATH=str(ROOT / "src"),
    )  # fmt: skip
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "zmem", "consolidate", "--force", "--json"],
        env=env, capture_output=True, text=True,
    )  # fmt: skip
    took = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"consolidate failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    return json.loads(done.stdout), took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--profile", choices=("fake", "minilm"), default="fake")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--work", type=Path, default=Path("/tmp/zmem-beside"))
    opts = ap.parse_args()
    work = opts.work
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("ZMEM_DATA", str(work / "build-data"))  # the model cache is shared
    source = work / f"source-{opts.profile}-{opts.rows}-{opts.seed}.sqlite"
    if not source.exists():
        os.environ["ZMEM_EMBED_PROFILE"] = opts.profile
        corpus.build(source, opts.rows, opts.profile, opts.seed)
    store, data = work / "fixed-point.sqlite", work / "fixed-point-data"
    corpus.fresh_copy(source, store)
    rows = []
    for run in (1, 2):
        report, took = consolidate(store, data, opts.profile)
        rows.append((run, report, took))
        print(f"  run {run}: merged {report.get('merged')} in {report.get('rounds', 1)} round(s), "
              f"{took:.1f} s", file=sys.stderr)  # fmt: skip
    print(f"\nconsolidate --force twice on one store: {opts.rows:,} rows ({opts.profile} "
          f"profile, seed {opts.seed})\n")  # fmt: skip
    print("| run | clusters merged | rows absorbed | rounds | fixed point | live after | s |")
    print("|---|---|---|---|---|---|---|")
    for run, r, took in rows:
        fixed = r.get("fixed_point", "(not reported)")
        print(f"| {run} | {r.get('merged')} | {r.get('absorbed')} | {r.get('rounds', 1)} | "
              f"{fixed} | {r.get('live_after')} | {took:.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()
