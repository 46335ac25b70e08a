"""How soon a freshly started `zmem mcp` answers: from the spawn to the `initialize` reply and
the `tools/list` reply over stdio, to the `tools/list` reply over HTTP, and to the first
`recall` (which needs the model) over stdio. A client that starts the server per session waits
this long every time. MiniLM profile (the model's load is what the handshake used to wait for).

    .venv/bin/python bench/mcp_start.py [--rows 1000] [--runs 7] [--work /tmp/zmem-mcp-start]

Run it from another tree (`cd old-tree && python /path/bench/mcp_start.py`) to time that
tree's code: the server runs from the tree the script sits in (its src/)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "src"))

import maintenance as corpus  # noqa: E402  (the store builder and its word lists)

INIT = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "bench", "version": "0"}},
}  # fmt: skip
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
RECALL = {
    "jsonrpc": "2.0", "id": 3, "method": "tools/call",
    "params": {"name": "recall", "arguments": {"query": "retry policy for the service"}},
}  # fmt: skip


def env_for(store: Path, data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZMEM_")}
    env.update(
        ZMEM_STORE=str(store), ZMEM_DATA=str(data), ZMEM_EMBED_PROFILE="minilm",
        ZMEM_SESSION_UPKEEP="0", ZMEM_HOOK_DAEMON="0", PYTHONPATH=str(ROOT / "src"),
    )  # fmt: skip
    return env


def stdio_once(env: dict[str, str]) -> tuple[float, float, float]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "zmem", "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, env=env, text=True,
    )  # fmt: skip

    def ask(message: dict) -> float:
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()
        reply = json.loads(proc.stdout.readline())
        if "error" in reply:
            raise SystemExit(f"{message['method']} failed: {reply['error']}")
        return time.perf_counter() - t0

    init = ask(INIT)
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    listed = ask(LIST)
    recalled = ask(RECALL)
    proc.stdin.close()
    proc.wait(30)
    return init, listed, recalled


def http_once(env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "zmem", "mcp", "--http", "--port", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True,
    )  # fmt: skip
    try:
        url = None
        while url is None:
            line = proc.stderr.readline()
            if not line:
                raise SystemExit("zmem mcp --http ended before it listened")
            if "listening on" in line:
                url = line.rsplit(" ", 1)[1].strip()
        request = urllib.request.Request(
            url, data=json.dumps(LIST).encode(), method="POST",
            headers={"Content-Type": "application/json",
                     "Accept": "application/json, text/event-stream",
                     "MCP-Protocol-Version": "2025-06-18"},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=60) as reply:
            doc = json.loads(reply.read())
        if "result" not in doc:
            raise SystemExit(f"tools/list over HTTP failed: {doc}")
        return time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--work", type=Path, default=Path("/tmp/zmem-mcp-start"))
    opts = ap.parse_args()
    opts.work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("ZMEM_DATA", str(opts.work / "build-data"))  # the model cache is shared
    store = opts.work / f"store-minilm-{opts.rows}-{opts.seed}.sqlite"
    if not store.exists():
        os.environ["ZMEM_EMBED_PROFILE"] = "minilm"
        corpus.build(store, opts.rows, "minilm", opts.seed)
    env = env_for(store, Path(os.environ["ZMEM_DATA"]))
    stdio_once(env)  # one unmeasured start: the page cache and the model file are warm after it
    rows: dict[str, list[float]] = {
        "stdio initialize": [], "stdio tools/list": [], "stdio first recall": [],
        "http tools/list": [],
    }  # fmt: skip
    for run in range(opts.runs):
        init, listed, recalled = stdio_once(env)
        rows["stdio initialize"].append(init)
        rows["stdio tools/list"].append(listed)
        rows["stdio first recall"].append(recalled)
        rows["http tools/list"].append(http_once(env))
        print(f"  run {run + 1}: " + ", ".join(f"{k} {v[-1] * 1000:.0f} ms" for k, v in
              rows.items()), file=sys.stderr)  # fmt: skip
    print(f"\nzmem mcp from spawn to reply, {opts.rows:,} rows (minilm), {opts.runs} runs\n")
    print("| reply | median ms | min | max |")
    print("|---|---|---|---|")
    for name, values in rows.items():
        ms = [v * 1000 for v in values]
        print(f"| {name} | {statistics.median(ms):.0f} | {min(ms):.0f} | {max(ms):.0f} |")


if __name__ == "__main__":
    main()
