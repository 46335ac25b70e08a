"""Whether keeping recent query embeddings pays (issue 36, second piece): a warm PreToolUse
through Resident.handle on the store bench/hooks.py builds, the same pending edits asked with
the kept embedding (a repeat: the agent edits a file again, reruns a command) and with the memo
emptied before each request (a first ask), alternated request by request. Prints medians of the
whole answer and of the query embedding in each arm, and whether the replies are identical.

    .venv/bin/python bench/pretool_memo.py [--memories 10000] [--runs 200] [--work /tmp/hookbench]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

# Pending tool calls of a working session: files edited and commands run, as Claude Code sends
# them in tool_input.
CALLS = [
    ("Edit", {"file_path": "src/billing/migrations/0042_add_column.py"}),
    ("Edit", {"file_path": "deploy/docker/Dockerfile"}),
    ("Bash", {"command": "git push origin release/2.4"}),
    ("Bash", {"command": "pytest -x tests/test_flaky_ci.py"}),
    ("Write", {"file_path": "packages/lint-config/pyproject.toml"}),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=200, help="requests per arm")
    ap.add_argument("--work", default="/tmp/hookbench", help="store dir shared with hooks.py")
    args = ap.parse_args()
    import hooks as hook_bench  # bench/hooks.py: the same store

    data, project = hook_bench.resident_bench(args.work, "minilm", args.memories)

    from zmem.resident import wire
    from zmem.resident.daemon import Resident
    from zmem.store.vectors import StoreVectors

    embed_ms: list[float] = []
    inner = StoreVectors.query

    def timed_query(self, text, keep=False):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        try:
            return inner(self, text, keep)
        finally:
            embed_ms.append((time.perf_counter() - t0) * 1000)

    StoreVectors.query = timed_query  # type: ignore[method-assign]

    resident = Resident(data)
    resident.warm()
    vectors = resident.hooks.store.vectors

    def request(i: int) -> bytes:
        tool, tool_input = CALLS[i % len(CALLS)]
        if "file_path" in tool_input:
            tool_input = {"file_path": str(project / tool_input["file_path"])}
        body = {  # a new session each time: nothing is "seen" yet, every request recalls
            "session_id": str(uuid.uuid4()),
            "cwd": str(project),
            "hook_event_name": "PreToolUse",
            "tool_name": tool,
            "tool_input": tool_input,
        }
        return wire.encode_request("claude", "PreToolUse", resident.pkg, json.dumps(body).encode())

    def ask(i: int) -> tuple[float, float, bytes]:
        embed_ms.clear()
        t0 = time.perf_counter()
        reply = resident.handle(request(i))
        total = (time.perf_counter() - t0) * 1000
        if not reply.startswith(b"ok\t"):
            raise SystemExit(f"refused: {reply[:80]!r}")
        resident._between_requests()
        return total, sum(embed_ms), reply.split(b"\n", 1)[1]

    for i in range(len(CALLS)):
        ask(i)  # warm both arms' code paths; the memo now holds every call's query
    arms: dict[str, tuple[list[float], list[float]]] = {"first ask": ([], []), "repeat": ([], [])}
    differ = injected = 0
    for i in range(args.runs):
        for arm in ("first ask", "repeat") if i % 2 else ("repeat", "first ask"):
            if arm == "first ask":
                kept = dict(vectors._memo)
                vectors._memo.clear()
            total, embedded, body = ask(i)
            if arm == "first ask":
                vectors._memo.update(kept)
                first_body = body
            else:
                repeat_body = body
            arms[arm][0].append(total)
            arms[arm][1].append(embedded)
        differ += first_body != repeat_body
        injected += b"ZMem recalled" in repeat_body
    resident.hooks.close()

    print(
        f"\nWarm PreToolUse inside the resident process, {args.memories} memories, "
        f"{args.runs} requests per arm, alternated, median ms"
    )
    print("| arm | answer | query embedding |")
    print("|---|---:|---:|")
    for arm, (totals, embeds) in arms.items():
        print(f"| {arm} | {statistics.median(totals):.1f} | {statistics.median(embeds):.2f} |")
    saved = statistics.median(arms["first ask"][0]) - statistics.median(arms["repeat"][0])
    print(f"\nsaved by a kept embedding: {saved:.1f} ms a repeated call")
    print(f"replies that differ between the arms: {differ} of {args.runs}")
    print(f"replies that inject memories: {injected} of {args.runs}")


if __name__ == "__main__":
    main()
