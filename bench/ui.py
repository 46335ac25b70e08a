"""Web inspector benchmark: server time per page at 10k / 100k memories. It starts the real
`zmem ui` on recall_scale's cached synthetic store (hybrid: random 384-d row vectors, the
query embedded by the real MiniLM), marks a few hundred rows as contradictions and
injection-shaped so the overview's "needs a look" lists have work, then asks for every page
in turn, round after round, and reports the median and p95 of the server's own time (the
Server-Timing header the inspector stamps) and of the whole HTTP round trip.

    .venv/bin/python bench/ui.py [--sizes 10000,100000] [--rounds 15]
"""

from __future__ import annotations

import argparse
import http.client
import os
import platform
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from random import Random

import apsw

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import recall_scale  # noqa: E402

from ui_browser import ui_server  # noqa: E402
from zmem.models import INJECTION_TAG  # noqa: E402

TARGET_MS = 150.0
FIRST_PAGE_MS = 1000.0


def _mark(path: Path, seed: int) -> tuple[list[str], list[str]]:
    """Contradiction pairs and injection tags on a few hundred rows; returns (sample ids of
    live rows to open, queries)."""
    rng = Random(seed)
    conn = apsw.Connection(str(path))
    live = [r[0] for r in conn.execute("SELECT id FROM memory WHERE superseded_at IS NULL")]
    picked = rng.sample(live, 600)
    with conn:
        for a, b in zip(picked[:200:2], picked[1:200:2], strict=True):
            for src, dst in ((a, b), (b, a)):
                conn.execute(
                    "INSERT OR IGNORE INTO memory_link (src, dst, relation, created_at) "
                    "VALUES (?, ?, 'contradicts', '2026-11-30T00:00:00.000000Z')",
                    (src, dst),
                )
        conn.executemany(
            "UPDATE memory SET tags = ? WHERE id = ?", [(INJECTION_TAG, i) for i in picked[200:400]]
        )
    conn.close()
    return picked[400:], recall_scale.queries(path, 50, seed)


def _get(port: int, path: str, cookie: str) -> tuple[float, float, int]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    t0 = time.perf_counter()
    conn.request("GET", path, headers={"Cookie": cookie})
    resp = conn.getresponse()
    resp.read()
    wall = (time.perf_counter() - t0) * 1000
    timing = resp.getheader("server-timing") or ""
    conn.close()
    found = re.search(r"dur=([\d.]+)", timing)
    return (float(found.group(1)) if found else float("nan")), wall, resp.status


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def run_size(size: int, args: argparse.Namespace, cache: Path) -> list[dict]:
    lexical = cache / f"recall-v{recall_scale.CORPUS_VERSION}-{size}-{args.seed}.sqlite"
    if not lexical.exists():
        recall_scale.build(lexical, size, args.seed)
    hybrid = lexical.with_name(lexical.name.replace("recall-", "recall-hybrid-"))
    if not hybrid.exists():
        recall_scale.add_vectors(lexical, hybrid, args.seed)
    with tempfile.TemporaryDirectory() as work:
        store = Path(work) / "store.sqlite"
        shutil.copy(hybrid, store)
        ids, qs = _mark(store, args.seed)
        env = {k: v for k, v in os.environ.items() if not k.startswith("ZMEM_")}
        env.update(
            ZMEM_STORE=str(store),
            ZMEM_DATA=str(Path(work) / "data"),
            ZMEM_EMBED_PROFILE="minilm",
            ZMEM_HOOK_DAEMON="0",
            ZMEM_SESSION_UPKEEP="0",
        )
        pages = {
            "overview": lambda i: "/",
            "memories": lambda i: "/memories",
            "memories, filtered": lambda i: "/memories?type=fact&namespace=project:main",
            "search (explicit recall)": lambda i: (
                "/search?q="
                + qs[i % len(qs)].replace(" ", "+")
                + "&namespace=project:main&include_global=1"
            ),
            "search (passive)": lambda i: (
                "/search?q="
                + qs[(i + 7) % len(qs)].replace(" ", "+")
                + "&mode=passive&namespace=project:main"
            ),
            "memory": lambda i: f"/memory/{ids[i % len(ids)]}",
            "memory, as of": lambda i: f"/memory/{ids[i % len(ids)]}?as_of=2025-06-01",
            "entities": lambda i: "/entities",
            "queue": lambda i: "/queue",
            "health": lambda i: "/health",
        }
        timings: dict[str, tuple[list[float], list[float]]] = {n: ([], []) for n in pages}
        t0 = time.perf_counter()
        with ui_server(env=env, cwd=Path(work)) as server:
            up_ms = (time.perf_counter() - t0) * 1000
            cookie = _enter(server.port, server.token)
            # What a person waits for: the link followed, the overview drawn.
            status = _get(server.port, "/", cookie)[2]
            first_ms = (time.perf_counter() - t0) * 1000
            if status != 200:
                raise SystemExit(f"the first overview answered {status}")
            search = pages["search (explicit recall)"](0)
            status = _get(server.port, search, cookie)[2]
            first_search_ms = (time.perf_counter() - t0) * 1000
            if status != 200:
                raise SystemExit(f"the first search answered {status}")
            for round_ in range(args.rounds + 1):
                for name, make in pages.items():
                    server_ms, wall_ms, status = _get(server.port, make(round_), cookie)
                    if status != 200:
                        raise SystemExit(f"{name} answered {status}")
                    if round_:  # round 0 warms each page's code path and cache pages
                        timings[name][0].append(server_ms)
                        timings[name][1].append(wall_ms)
        print(
            f"  {size:,}: link printed {up_ms:.0f} ms, first overview {first_ms:.0f} ms, "
            f"first search {first_search_ms:.0f} ms after the spawn",
            file=sys.stderr,
        )
    return [
        {
            "rows": size,
            "page": name,
            "server_p50": statistics.median(s),
            "server_p95": _p(s, 0.95),
            "wall_p50": statistics.median(w),
            "up_ms": up_ms,
            "first_ms": first_ms,
            "first_search_ms": first_search_ms,
        }
        for name, (s, w) in timings.items()
    ]


def _enter(port: int, token: str) -> str:
    """The session cookie the token link sets."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", f"/?token={token}")
    resp = conn.getresponse()
    resp.read()
    conn.close()
    if resp.status != 303:
        raise SystemExit(f"the token link answered {resp.status}")
    return (resp.getheader("set-cookie") or "").split(";", 1)[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000", help="comma-separated row counts")
    ap.add_argument("--rounds", type=int, default=15, help="requests per page (after one warm)")
    ap.add_argument("--cache-dir", default=str(Path.home() / ".cache" / "zmem-bench"))
    ap.add_argument("--seed", type=int, default=20241202)
    args = ap.parse_args()
    cache = Path(args.cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("ZMEM_DATA", str(cache / "zmem-data"))
    os.environ["ZMEM_EMBED_PROFILE"] = "minilm"
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        rows += run_size(size, args, cache)
    print(
        f"\nui on {platform.machine()} / Python {platform.python_version()}, {args.rounds} "
        f"rounds per page, pages asked in turn; server = the Server-Timing the inspector "
        f"stamps, round trip = the client's\n"
    )
    print("| rows | page | server p50 ms | server p95 ms | round trip p50 ms | target |")
    print("|---|---|---:|---:|---:|---|")
    for r in rows:
        ok = "met" if r["server_p50"] <= TARGET_MS else "MISSED"
        print(
            f"| {r['rows']:,} | {r['page']} | {r['server_p50']:.1f} | {r['server_p95']:.1f} | "
            f"{r['wall_p50']:.1f} | ≤ {TARGET_MS:.0f}: {ok} |"
        )
    print(
        "\nFirst start on a store the inspector has not seen, from the spawn of `zmem ui` to: "
        "the link printed, the link followed and the overview drawn, then one explicit search "
        f"drawn (target: the first page within {FIRST_PAGE_MS:.0f} ms):\n"
    )
    print("| rows | link printed ms | first overview ms | first search ms | target |")
    print("|---|---:|---:|---:|---|")
    for r in rows:
        if r["page"] == "overview":
            ok = "met" if r["first_ms"] <= FIRST_PAGE_MS else "MISSED"
            print(
                f"| {r['rows']:,} | {r['up_ms']:.0f} | {r['first_ms']:.0f} | "
                f"{r['first_search_ms']:.0f} | ≤ {FIRST_PAGE_MS:.0f}: {ok} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
