"""Where a warm UserPromptSubmit's time goes inside the resident process: each request through
Resident.handle (what the socket would carry), with timers around the stages (embedding,
lanes, candidate fetch, link expansion), medians per prompt over the store bench/hooks.py
builds. No process start and no socket: this is the part of "warm" the resident process owns.

    .venv/bin/python bench/hook_stages.py [--memories 10000] [--runs 100] [--work /tmp/hookbench]
    .venv/bin/python bench/hook_stages.py --src /tmp/base/src   # another version, same store
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

STAGES = ("handle", "embed", "pipeline", "fts", "entity", "vector", "fetch", "links")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--profile", default="minilm")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--work", default="/tmp/hookbench", help="store dir shared with hooks.py")
    ap.add_argument("--src", default=str(ROOT / "src"), help="zmem source tree (A/B runs)")
    args = ap.parse_args()
    import hooks as hook_bench  # bench/hooks.py: the same store and prompts

    sys.path.insert(0, args.src)  # ahead of the checkout's src/, which hooks.py put first
    # After the insert: a store built here is built by the tree under test.
    data, project = hook_bench.resident_bench(args.work, args.profile, args.memories)
    data = hook_bench.data_for_tree(args.src, data, "hooks:build_store", args.memories)
    os.environ["ZMEM_DATA"] = str(data)

    from zmem.db import recall as db
    from zmem.retrieval import lanes, links, pipeline

    try:  # the layout since the read path became the store's Reader (issue 14)
        from zmem.resident import wire
        from zmem.resident.daemon import Resident
        from zmem.store.vectors import StoreVectors as embed_owner

        embed_name = "query"
    except ImportError:  # an older tree, for alternated runs against it (--src)
        from zmem.hosts.daemon import Resident
        from zmem.reading import RecallMixin as embed_owner

        from zmem.hosts import wire

        embed_name = "_query_vector"

    spent: dict[str, float] = defaultdict(float)

    timed = hook_bench.stage_timer(spent)

    timed(embed_owner, embed_name, "embed")
    timed(pipeline, "run", "pipeline")
    timed(lanes.FtsLane, "run", "fts")
    timed(lanes.EntityLane, "run", "entity")
    timed(lanes.VectorLane, "run", "vector")
    timed(db, "fetch", "fetch")
    timed(links, "expand", "links")

    resident = Resident(data)
    resident.warm()

    def request(prompt: str) -> bytes:
        body = {"session_id": "bench", "cwd": str(project), "prompt": prompt}
        return wire.encode_request(
            "claude", "UserPromptSubmit", resident.pkg, json.dumps(body).encode()
        )

    for prompt in hook_bench.PROMPTS:
        resident.handle(request(prompt))
    per_prompt: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for i in range(args.runs):
        spent.clear()
        t0 = time.perf_counter()
        reply = resident.handle(request(hook_bench.PROMPTS[i % len(hook_bench.PROMPTS)]))
        spent["handle"] = (time.perf_counter() - t0) * 1000
        if not reply.startswith(b"ok\t"):
            raise SystemExit(f"refused: {reply[:80]!r}")
        resident._between_requests()
        for stage in STAGES:
            per_prompt[i % len(hook_bench.PROMPTS)][stage].append(spent.get(stage, 0.0))
    resident.hooks.close()

    print(
        f"\nWarm UserPromptSubmit inside the resident process, {args.memories} memories, "
        f"{args.runs} requests, median ms"
    )
    print("| prompt | " + " | ".join(STAGES) + " |")
    print("|---" * (len(STAGES) + 1) + "|")
    everything: dict[str, list[float]] = defaultdict(list)
    for p, stages in sorted(per_prompt.items()):
        for stage, xs in stages.items():
            everything[stage] += xs
        cells = " | ".join(f"{statistics.median(stages[s]):.1f}" for s in STAGES)
        print(f"| {hook_bench.PROMPTS[p][:40]} | {cells} |")
    cells = " | ".join(f"**{statistics.median(everything[s]):.1f}**" for s in STAGES)
    print(f"| all | {cells} |")


if __name__ == "__main__":
    main()
