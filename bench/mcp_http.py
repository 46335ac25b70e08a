"""The MCP server over streamable HTTP, really started (`zmem mcp --http`, bearer token, the
minilm profile) on a store of N memories (default 10k), driven by the official SDK client:

- warm recall: one client session, sequential `recall` calls after a warm-up; p50 and p95 of
  the client-side round trip (HTTP, JSON-RPC, the tool, the reply). Target: p50 <= 30 ms.
- the same recall as plain JSON-RPC POSTs (httpx2, the older handshake a host's client speaks):
  the server's share of the round trip, without the SDK client's own Python work.
- load: C concurrent client sessions (default 16) x M mixed calls each (default 200: recall,
  search, recent, get, add, stats, session_start); errors must be 0.

    .venv/bin/python bench/mcp_http.py [--memories 10000] [--runs 200] [--clients 16] [--calls 200]
        [--work DIR]   # DIR keeps the built store between runs

(Named mcp_http, not mcp: a script's directory comes first on sys.path, and a bench/mcp.py
would shadow the SDK.)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from hooks import NS, PROMPTS, TOPICS, build_store, pct  # noqa: E402

TOKEN = "bench-token-5c1d0e7a9b"


def start_server(env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    zmem = Path(sys.executable).with_name("zmem")
    proc = subprocess.Popen(
        [str(zmem), "mcp", "--http", "--port", "0"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if "listening on" in line:
            return proc, line.rsplit(" ", 1)[1].strip()
    raise SystemExit(f"the server did not start (exit {proc.wait()})")


def mixed_call(rnd: random.Random, ids: list[str]) -> tuple[str, dict]:
    roll = rnd.random()
    topic = rnd.choice(TOPICS)
    if roll < 0.4:
        return "recall", {"query": rnd.choice(PROMPTS), "namespace": NS, "include_global": True}
    if roll < 0.6:
        return "search", {"text": topic, "namespace": NS}
    if roll < 0.7:
        return "recent", {"namespace": NS}
    if roll < 0.8 and ids:
        return "get", {"id": rnd.choice(ids)}
    if roll < 0.9:
        return "add", {
            "content": f"Check {topic} in bench client note {rnd.randint(1, 10**9)}",
            "namespace": NS,
            "type": "lesson",
            "signal": "test",
        }
    if roll < 0.95:
        return "stats", {}
    return "session_start", {"namespace": NS}


async def session(url: str):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    return http, Client(streamable_http_client(url, http_client=http))


async def warm_recall(url: str, runs: int) -> list[float]:
    http, client = await session(url)
    times = []
    async with http, client as c:
        for i in range(runs + 10):
            t0 = time.perf_counter()
            r = await c.call_tool("recall", {"query": PROMPTS[i % len(PROMPTS)], "namespace": NS})
            dt = (time.perf_counter() - t0) * 1000
            assert not r.is_error, r.content[0].text
            if i >= 10:  # warm-up calls left out
                times.append(dt)
    return times


def raw_recall(url: str, runs: int) -> list[float]:
    import httpx2

    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-06-18",
    }
    times = []
    with httpx2.Client(headers=headers, timeout=60) as http:
        init = {"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "bench", "version": "0"}}  # fmt: skip
        http.post(url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        for i in range(runs + 10):
            args = {"query": PROMPTS[i % len(PROMPTS)], "namespace": NS}
            body = {"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                    "params": {"name": "recall", "arguments": args}}  # fmt: skip
            t0 = time.perf_counter()
            reply = http.post(url, json=body)
            dt = (time.perf_counter() - t0) * 1000
            assert reply.status_code == 200 and '"isError":true' not in reply.text, reply.text
            if i >= 10:
                times.append(dt)
    return times


async def load(
    url: str, clients: int, calls: int, ids: list[str]
) -> tuple[list[float], int, float]:
    errors = 0
    times: list[float] = []

    async def one(k: int) -> None:
        nonlocal errors
        rnd = random.Random(k)
        http, client = await session(url)
        async with http, client as c:
            for _ in range(calls):
                name, args = mixed_call(rnd, ids)
                t0 = time.perf_counter()
                try:
                    r = await c.call_tool(name, args)
                    errors += bool(r.is_error)
                except Exception:
                    errors += 1
                times.append((time.perf_counter() - t0) * 1000)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(k) for k in range(clients)))
    return times, errors, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--profile", default="minilm")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--work", type=Path, default=None)
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="zmem-mcp-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    base = work / f"store-{args.profile}-{args.memories}.sqlite"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZMEM_")}
    env.update(ZMEM_DATA=str(work / "data"), ZMEM_EMBED_PROFILE=args.profile)
    os.environ.update(ZMEM_DATA=env["ZMEM_DATA"], ZMEM_EMBED_PROFILE=args.profile)
    if not base.exists():
        print(f"building {args.memories} memories ({args.profile}) in {base} ...", file=sys.stderr)
        build_store(base, args.memories)
    # Every run starts from the same store: the load phase adds rows.
    store = work / "run.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(str(store) + suffix).unlink(missing_ok=True)
    shutil.copy2(base, store)
    env.update(ZMEM_STORE=str(store), ZMEM_MCP_TOKEN=TOKEN)
    from zmem import MemoryStore

    with MemoryStore.open(store) as s:
        ids = [m.id for m in s.list(namespace=NS, limit=500)]
    proc, url = start_server(env)
    try:
        warm = asyncio.run(warm_recall(url, args.runs))
        raw = raw_recall(url, args.runs)
        times, errors, wall = asyncio.run(load(url, args.clients, args.calls, ids))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    total = args.clients * args.calls
    print(f"\nMCP over HTTP, {args.memories} memories, profile {args.profile}\n")
    print("| phase | calls | p50 ms | p95 ms | errors | throughput |")
    print("|---|---|---|---|---|---|")
    rate = len(warm) / (sum(warm) / 1000)
    print(f"| warm recall, SDK client session | {len(warm)} | {statistics.median(warm):.1f} | "
          f"{pct(warm, 0.95):.1f} | 0 | {rate:.0f} calls/s |")  # fmt: skip
    print(f"| warm recall, plain JSON-RPC POSTs | {len(raw)} | {statistics.median(raw):.1f} | "
          f"{pct(raw, 0.95):.1f} | 0 | {len(raw) / (sum(raw) / 1000):.0f} calls/s |")  # fmt: skip
    print(f"| {args.clients} clients x {args.calls} mixed | {total} | "
          f"{statistics.median(times):.1f} | {pct(times, 0.95):.1f} | {errors} | "
          f"{total / wall:.0f} calls/s |")  # fmt: skip
    if errors:
        sys.exit(1)


if __name__ == "__main__":
    main()
