"""MiniLM embedding speed: texts/s for short (~25-token) and ~128-token texts, warm single-query
latency, and cold start (a fresh process: import + model load + first embed). Uses the offline
build in a throwaway data dir unless --data-dir is given; prints a markdown table on stdout.

    .venv/bin/python bench/embed.py [--quick] [--threads N] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Memory-like vocabulary: the texts are word salad, but with the subword make-up of real notes.
WORDS = (
    "run the migrations with alembic before starting billing worker deploy target is staging "
    "use ripgrep instead of grep pytest fails when database port changes to 5433 always pin "
    "dependencies never push directly main branch review required config lives in settings "
    "toml cache invalidation happens after each release tokenizer pads sequences embedding "
    "vector index rebuild nightly backup retention thirty days kubernetes namespace owner "
    "team prefers small commits with clear messages lint errors block merge request timeout"
).split()

CHILD = r"""
import sys, time, json
t0 = time.perf_counter()
from pathlib import Path
from zmem.embedding import get_embedder
import numpy, onnxruntime, tokenizers  # what get_embedder will import, counted as import time
t1 = time.perf_counter()
emb = get_embedder("minilm", Path(sys.argv[1]))
t2 = time.perf_counter()
emb.embed(["where does the billing worker get its database port from?"])
t3 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "load": t2 - t1, "first": t3 - t2}))
"""


def _texts(rng: random.Random, n: int, words: int) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(words)) for _ in range(n)]


def _throughput(emb, texts: list[str], rounds: int) -> float:
    emb.embed(texts[:32])  # warm the shapes
    rates = []
    for _ in range(rounds):
        started = time.perf_counter()
        emb.embed(texts)
        rates.append(len(texts) / (time.perf_counter() - started))
    return statistics.median(rates)


def _latency(emb, queries: list[str]) -> tuple[float, float]:
    for q in queries[:5]:
        emb.embed([q])
    times = []
    for q in queries:
        started = time.perf_counter()
        emb.embed([q])
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1]


def _cold_start(data_dir: Path, runs: int) -> dict[str, float]:
    walls, parts = [], []
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(data_dir)],
            capture_output=True,
            text=True,
            check=True,
        )
        walls.append(time.perf_counter() - started)
        parts.append(json.loads(done.stdout))
    out = {k: statistics.median(p[k] for p in parts) for k in ("import", "load", "first")}
    out["wall"] = statistics.median(walls)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds and cold starts")
    ap.add_argument("--threads", type=int, default=0, help="ORT intra-op threads (0: default)")
    ap.add_argument("--data-dir", type=Path, help="data dir holding (or to hold) the model")
    args = ap.parse_args()

    from zmem.embedding import model_files
    from zmem.embedding.minilm import MiniLMEmbedder

    with tempfile.TemporaryDirectory(prefix="zmem-embed-bench-") as tmp:
        data_dir = args.data_dir or Path(tmp)
        started = time.perf_counter()
        blobs = model_files.resolve(data_dir)
        prepare = time.perf_counter() - started
        emb = MiniLMEmbedder(blobs, threads=args.threads or None)
        tok = emb._tokenizer
        rng = random.Random(7)
        short = _texts(rng, 256, 18)
        long = _texts(rng, 128, 100)
        queries = _texts(rng, 60, 16)
        avg = {
            name: statistics.mean(len(e.ids) for e in tok.encode_batch(texts))
            for name, texts in (("short", short), ("long", long), ("query", queries))
        }
        rounds = 3 if args.quick else 7
        short_rate = _throughput(emb, short, rounds)
        long_rate = _throughput(emb, long, rounds)
        p50, p95 = _latency(emb, queries if not args.quick else queries[:30])
        cold = _cold_start(data_dir, 3 if args.quick else 7)

    threads = args.threads or "default"
    print(f"MiniLM ({blobs.source}), onnxruntime fp32, {os.cpu_count()} CPUs, threads {threads}")
    print()
    print("| measure | result | target |")
    print("|---|---|---|")
    print(
        f"| short texts ({avg['short']:.0f} tokens avg), batch 32 | {short_rate:.0f} texts/s "
        "| >= 300 |"
    )
    print(f"| long texts ({avg['long']:.0f} tokens avg), batch 32 | {long_rate:.0f} texts/s | |")
    print(
        f"| single query ({avg['query']:.0f} tokens), warm p50 / p95 | {p50:.2f} / {p95:.2f} ms"
        " | p50 <= 5 ms |"
    )
    print(f"| cold start, fresh process (wall, median) | {cold['wall'] * 1000:.0f} ms | |")
    print(
        f"| ... in-process: import / load / first embed | {cold['import'] * 1000:.0f} / "
        f"{cold['load'] * 1000:.0f} / {cold['first'] * 1000:.0f} ms | |"
    )
    print(f"| model ready in the data dir (build or verify) | {prepare * 1000:.0f} ms | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
