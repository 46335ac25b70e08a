"""The entity lane alone, on entities far wider than a prompt's window (issue 51, schema v15):
db.entity_lane against joining every link to its row (the lane before v15, which the lane
still uses within the window), on the same store, checking both give the same ranking.

The store (fake profile, built once in --work) holds --rows notes; 2 % of them in a small
namespace. Two families of entities are linked by hand: "wide" ones, each linked to 2,000
random rows (so several of them share many rows), and "small" disjoint ones of 300 rows each.
Reads: every namespace (a prompt's shared window, 400 rows), the small namespace (a tier's
fallback, 50 rows), and an --as-of instant before every row.

    .venv/bin/python bench/entity_lane.py [--rows 20000] [--repeat 9]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

WIDE_LINKS = 2000
SMALL_LINKS = 300


def build(path: Path, rows: int, wide: int, small: int) -> None:
    from zmem import MemoryStore
    from zmem.db import graph
    from zmem.db.connect import transaction

    rng = random.Random(5)
    with MemoryStore.open(path) as store:
        ids = []
        for i in range(rows):
            ns = "project:minor" if i % 50 == 0 else f"project:big{i % 3}"
            text = f"note {i} about item{i} w{rng.randint(0, 10**9)}"
            ids.append(store.add(text, namespace=ns, type="fact", signal="test").id)
        conn = store._conn
        at = "2026-01-01T00:00:00.000000Z"
        names = [f"W{i}" for i in range(wide)] + [f"S{i}" for i in range(small)]
        with transaction(conn):
            graph.insert_entities(conn, [(n, "tool", n, at) for n in names])
            for n in names[:wide]:
                graph.link_pairs(conn, [(m, n) for m in rng.sample(ids, WIDE_LINKS)])
            shuffled = rng.sample(ids, small * SMALL_LINKS)
            for k, n in enumerate(names[wide:]):
                chunk = shuffled[k * SMALL_LINKS : (k + 1) * SMALL_LINKS]
                graph.link_pairs(conn, [(m, n) for m in chunk])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=9, help="timed reads per case (median)")
    ap.add_argument("--work", default="/tmp/entity-lane-bench")
    args = ap.parse_args()
    os.environ["ZMEM_EMBED_PROFILE"] = "fake"
    os.environ["ZMEM_DATA"] = args.work
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    path = work / f"store-{args.rows}.sqlite"
    if not path.exists():
        print(f"building {path} ...", file=sys.stderr)
        build(path, args.rows, wide=38, small=30)

    import apsw

    from zmem.db import recall as db
    from zmem.db.recall import Scope

    conn = apsw.Connection(str(path))
    live = Scope(None, None, 0.25)
    minor = Scope(("project:minor",), None, 0.25)
    before = Scope(None, "2000-01-01T00:00:00Z", 0.25)
    wide = [f"W{i}" for i in range(38)]
    small = [f"S{i}" for i in range(30)]
    cases = [
        ("1 wide entity, every namespace", wide[:1], live, 400),
        ("2 wide entities", wide[:2], live, 400),
        ("10 wide entities", wide[:10], live, 400),
        ("38 wide entities", wide, live, 400),
        ("10 wide entities, the 2 % namespace", wide[:10], minor, 50),
        ("5 wide entities, --as-of before every row", wide[:5], before, 400),
        ("2 small entities, the 2 % namespace", small[:2], minor, 50),
        ("8 small entities, the 2 % namespace", small[:8], minor, 50),
        ("30 small entities, every namespace (within the window)", small, live, 400),
    ]

    def median_ms(read, *a) -> tuple[float, object]:  # type: ignore[no-untyped-def]
        times, out = [], None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            out = read(conn, *a)
            times.append((time.perf_counter() - t0) * 1000)
        return statistics.median(times), out

    print(f"\nentity lane, {args.rows:,} rows, median of {args.repeat} reads, ms")
    print("| case | window | every link joined | entity_lane | ratio |\n|---|---:|---:|---:|---:|")
    for name, ids, scope, limit in cases:
        joined, want = median_ms(db._entity_lane_every_row, ids, scope, limit)
        lane, got = median_ms(db.entity_lane, ids, scope, limit)
        if got != want:
            raise SystemExit(f"{name}: the lane's ranking differs from every link joined")
        print(f"| {name} | {limit} | {joined:.1f} | {lane:.1f} | {lane / joined:.2f} |")


if __name__ == "__main__":
    main()
