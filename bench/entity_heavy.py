"""An entity-heavy store and prompts for the hook benches (issue 51, "latency on hard queries"):
templated notes about modules, services and clients, each name shared by 50-100 memories
("Module mod17 calls service42 through client9; retry 3 times on HTTP 502."), plus ordinary
rows as bench/hooks.py writes them. Most notes write the names as code spans, so that they are
entities too (each linked to ~70 rows); the issue's sentence is 60% of the store, so its
ordinary words ("calls", "retry") are held by more than half the rows, as a team's recurring
phrasing is. The prompts name one to three such entities; the last two are ordinary prompts
asked of the same store, for contrast.

Run as a script, it times the stages of each prompt inside the resident process (Resident.handle
with timers around the lanes and the SQL under them, as bench/hook_stages.py does for its
store), medians per prompt; --src times another tree on the same store.

    .venv/bin/python bench/prompt_http.py --entity-heavy [--vs /tmp/head51/src]
    .venv/bin/python bench/entity_heavy.py [--runs 180] [--src /tmp/head51/src]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import hooks as hook_bench

# 90 names of each kind over ~8,000 templated rows: each name in ~89 rows (binomial: 50-100
# but for a rare few just over), in ~67 of them as an entity.
NAMES = 90
TEMPLATED_SHARE = 0.8
ISSUE_SHARE = 0.75  # of the templated rows: the issue's sentence, a third of them in plain prose
ISSUE = [
    "Module {m} calls {s} through {c}; retry {n} times on HTTP {code}.",
    "Module `{m}` calls `{s}` through `{c}`; retry {n} times on HTTP {code}.",
    "Module `{m}` calls `{s}` through `{c}`; retry {n} times on HTTP {code}.",
]
TEMPLATES = [
    "`{s}` rate-limits `{m}` at {rps} requests per second; back off with jitter before retry.",
    "When `{c}` times out against `{s}`, `{m}` falls back to the cached config from step {n}.",
    "Deploy `{m}` only after `{s}` migration {mig} is applied; `{c}` pins version 1.{n}.",
    "`{m}` logs every call to `{s}` via `{c}`; keep the log level at {level} in production.",
    "The owner of `{s}` is team {team}; page them when `{m}` sees HTTP {code} from `{c}`.",
    "`{c}` caches `{s}` responses for {n} minutes; `{m}` must invalidate after writes.",
]
LEVELS = ["info", "warn", "error", "debug"]
TEAMS = ["atlas", "borealis", "cobalt", "delta", "ember", "fjord", "granite", "harbor"]
CODES = [429, 500, 502, 503, 504]

PROMPTS = [
    "why does mod17 retry service42 so often",
    "what calls service42 through client9",
    "mod3 keeps timing out against service7 via client12, what is the fallback",
    "who owns service55",
    "can I deploy mod8 before the service31 migration",
    "how long does client20 cache responses",
    "which module retries calls to service42 on HTTP 502",
    "e2e tests fail in CI, browsers missing",
    "I'm about to git push the release branch, anything to check first?",
]


def templated(rnd: random.Random) -> str:
    template = rnd.choice(ISSUE if rnd.random() < ISSUE_SHARE else TEMPLATES)
    return template.format(
        m=f"mod{rnd.randrange(NAMES)}",
        s=f"service{rnd.randrange(NAMES)}",
        c=f"client{rnd.randrange(NAMES)}",
        n=rnd.randint(2, 9),
        code=rnd.choice(CODES),
        rps=rnd.choice([10, 20, 50, 100, 200]),
        mig=rnd.randint(1, 400),
        level=rnd.choice(LEVELS),
        team=rnd.choice(TEAMS),
    )


def build_store(path: Path, n: int) -> None:
    from zmem import MemoryStore

    rnd = random.Random(51)
    with MemoryStore.open(path) as store:
        for i in range(n):
            if rnd.random() < TEMPLATED_SHARE:
                text = templated(rnd)
            else:
                topic = rnd.choice(hook_bench.TOPICS)
                text = (
                    f"{rnd.choice(hook_bench.VERBS).capitalize()} {topic} in service{i % 97} "
                    f"before step {i}: it broke build {rnd.randint(1, 10**6)} last time."
                )
            ns = hook_bench.NS if i % 5 else "user:global"
            store.add(text, namespace=ns, type="lesson", signal=rnd.choice(["test", "user"]))


STAGES = ("handle", "embed", "fts", "fts_top", "newest", "entity", "vector", "fetch", "links")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=180)
    ap.add_argument("--work", default="/tmp/hookbench", help="store dir shared with hooks.py")
    ap.add_argument("--src", default=str(hook_bench.ROOT / "src"), help="zmem tree to time")
    args = ap.parse_args()
    sys.path.insert(0, args.src)  # ahead of the checkout's src/, which hooks.py put first
    data = Path(args.work) / f"data-minilm-entity-{args.memories}"
    for key in [k for k in os.environ if k.startswith("ZMEM_")]:
        del os.environ[key]
    os.environ.update(ZMEM_DATA=str(data), ZMEM_EMBED_PROFILE="minilm")
    if not (data / "store.sqlite").exists():
        data.mkdir(parents=True, exist_ok=True)
        build_store(data / "store.sqlite", args.memories)
    data = hook_bench.data_for_tree(args.src, data, "entity_heavy:build_store", args.memories)
    os.environ["ZMEM_DATA"] = str(data)
    project = Path(args.work) / "bench"
    project.mkdir(parents=True, exist_ok=True)

    from zmem.db import recall as db
    from zmem.resident import wire
    from zmem.resident.daemon import Resident
    from zmem.retrieval import lanes, links
    from zmem.store.vectors import StoreVectors

    spent: dict[str, float] = defaultdict(float)

    timed = hook_bench.stage_timer(spent)

    timed(StoreVectors, "query", "embed")
    timed(lanes.FtsLane, "run", "fts")
    timed(db, "fts_top", "fts_top")
    timed(db, "fts_newest_top", "newest")
    timed(lanes.EntityLane, "run", "entity")
    timed(lanes.VectorLane, "run", "vector")
    timed(db, "fetch", "fetch")
    timed(links, "expand", "links")
    resident = Resident(data)
    resident.warm()

    def request(prompt: str) -> bytes:
        body = {"session_id": hook_bench._session(), "cwd": str(project), "prompt": prompt}
        return wire.encode_request(
            "claude", "UserPromptSubmit", resident.pkg, json.dumps(body).encode()
        )

    for prompt in PROMPTS:
        resident.handle(request(prompt))
    per_prompt: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for i in range(args.runs):
        prompt = PROMPTS[i % len(PROMPTS)]
        spent.clear()
        t0 = time.perf_counter()
        reply = resident.handle(request(prompt))
        spent["handle"] = (time.perf_counter() - t0) * 1000
        if not reply.startswith(b"ok\t"):
            raise SystemExit(f"refused: {reply[:80]!r}")
        resident._between_requests()
        for stage in STAGES:
            per_prompt[prompt][stage].append(spent.get(stage, 0.0))
    resident.hooks.close()
    print(
        f"\nWarm UserPromptSubmit in the resident process, {args.memories:,} entity-heavy rows, "
        f"{args.src}, {args.runs} requests, median ms"
    )
    print("| prompt | " + " | ".join(STAGES) + " |")
    print("|---" + "|---:" * len(STAGES) + "|")
    for prompt, stages in per_prompt.items():
        cells = " | ".join(f"{statistics.median(stages[s]):.1f}" for s in STAGES)
        print(f"| {prompt[:44]} | {cells} |")


if __name__ == "__main__":
    main()
