"""CLI recall latency as a user sees it: `zmem recall` wall time, process start included, hybrid
and lexical (--no-hybrid), cold (ZMEM_HOOK_DAEMON=0: everything in the process) and warm (the
resident process up and answering), next to a bare interpreter start, in one run with the
cases interleaved round by round. The store is built once with MiniLM from bench/write_path.py's
corpus through `zmem ingest-jsonl`.

    .venv/bin/python bench/cli.py [--rows 2000] [--runs 15] [--work DIR]

Target (issue 20): with the resident process up, hybrid <= lexical + 150 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from random import Random

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from write_path import Corpus  # noqa: E402

ZMEM = ROOT / ".venv" / "bin" / "zmem"
PYTHON = ROOT / ".venv" / "bin" / "python"
NS = "project:atlas"


def build(work: Path, rows: int, env: dict[str, str]) -> list[str]:
    """The store, and queries drawn from rows of NS (their first words)."""
    rng = Random(20)
    source = work / f"rows-{rows}.jsonl"
    texts = []
    with source.open("w", encoding="utf-8") as out:
        for row in Corpus(20).rows(rows):
            ns = NS if rng.random() < 0.5 else row.namespace
            out.write(json.dumps({"id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                                  "content": row.content, "type": row.type,
                                  "namespace": ns, "signal": "test"}) + "\n")  # fmt: skip
            if ns == NS:
                texts.append(row.content)
    subprocess.run([str(ZMEM), "ingest-jsonl", "--in", str(source)], env=env, check=True,
                   capture_output=True)  # fmt: skip
    return [" ".join(t.split()[:6]) for t in rng.sample(texts, 10)]


def timed(cmd: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, check=False)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {done.stderr.decode()[-500:]}")
    return took * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="zmem-bench-cli-"))
    work.mkdir(parents=True, exist_ok=True)
    data = work / "data"
    base = {k: v for k, v in os.environ.items() if not k.startswith("ZMEM_")}
    env = dict(base, ZMEM_DATA=str(data), ZMEM_EMBED_PROFILE="minilm",
               ZMEM_SESSION_UPKEEP="0", ZMEM_HOOKD_IDLE_S="600")  # fmt: skip
    if not (data / "store.sqlite").exists():
        print(f"[bench] building {args.rows} rows with MiniLM in {data}", file=sys.stderr)
        queries = build(work, args.rows, env)
        (work / "queries.json").write_text(json.dumps(queries))
    queries = json.loads((work / "queries.json").read_text())
    cold = dict(env, ZMEM_HOOK_DAEMON="0")
    warm = dict(env, ZMEM_HOOK_DAEMON="1")
    daemon = subprocess.Popen([str(PYTHON), "-m", "zmem.resident.daemon", str(data)], env=warm,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        for _ in range(100):
            if (data / "zmem-hookd.sock").exists():
                break
            time.sleep(0.1)
        recall = [str(ZMEM), "recall", "--namespace", NS, "--query"]
        cases = {
            "bare interpreter (python -c pass)": lambda q: timed([str(PYTHON), "-c", "pass"], env),
            "lexical, cold (--no-hybrid, in-process)": lambda q: timed(
                [*recall, q, "--no-hybrid"], cold),
            "hybrid, cold (in-process, model loads)": lambda q: timed([*recall, q], cold),
            "lexical, warm (resident process)": lambda q: timed([*recall, q, "--no-hybrid"], warm),
            "hybrid, warm (resident process)": lambda q: timed([*recall, q], warm),
        }  # fmt: skip
        for run in cases.values():  # one unmeasured round: page cache, the resident's first read
            run(queries[0])
        times: dict[str, list[float]] = {name: [] for name in cases}
        for i in range(args.runs):
            for name, run in cases.items():
                times[name].append(run(queries[i % len(queries)]))
    finally:
        daemon.kill()
    p50 = {name: statistics.median(v) for name, v in times.items()}
    bare = p50["bare interpreter (python -c pass)"]
    print(f"| case ({args.rows:,} rows, MiniLM, {args.runs} runs) | p50 ms | p90 ms | minus bare |")
    print("|---|---:|---:|---:|")
    for name, values in times.items():
        p90 = statistics.quantiles(values, n=10)[-1] if len(values) > 1 else values[0]
        print(f"| {name} | {p50[name]:.0f} | {p90:.0f} | {p50[name] - bare:.0f} |")
    hybrid = p50["hybrid, warm (resident process)"]
    gap = hybrid - p50["lexical, warm (resident process)"]
    gap_cold = hybrid - p50["lexical, cold (--no-hybrid, in-process)"]
    verdict = "met" if max(gap, gap_cold) <= 150 else "NOT met"
    print(
        f"\nhybrid warm - lexical warm: {gap:.0f} ms; hybrid warm - lexical cold: "
        f"{gap_cold:.0f} ms (target <= 150): {verdict}"
    )


if __name__ == "__main__":
    main()
