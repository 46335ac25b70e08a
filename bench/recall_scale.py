"""Recall-scale benchmark: lexical recall latency through MemoryStore.recall at 10k / 100k / 1M
synthetic rows with Zipf-distributed words (realistic posting-list lengths), in a warm process
(p50/p95 over a query set) and as a fresh `zmem recall` process per query. The stores are built
through bulk ingest (`zmem ingest-jsonl`) and cached between runs."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from bisect import bisect
from datetime import UTC, datetime, timedelta
from itertools import accumulate
from pathlib import Path
from random import Random

import apsw

from zmem import MemoryStore, config
from zmem.tokens import STOP_WORDS

TARGETS_MS = {100_000: 10.0, 1_000_000: 40.0}  # warm p50, from the recall issue
HYBRID_TARGETS_MS = {100_000: 25.0}  # warm p50, ARCHITECTURE.md section 5
RESIDENT_TARGETS_MS = {100_000: 20.0, 1_000_000: 80.0}  # the resident process, issue 22
VOCAB = 50_000
ZIPF_S = 1.0  # English word frequencies fall off close to 1/rank...
# ...counting from the ~150 stop words, which take the head of the curve and are drawn apart.
ZIPF_OFFSET = 150
STOP_SHARE = 0.40  # share of running text that is stop words
ENTITIES = 2_000
NAMESPACES = [("project:main", 0.5), *((f"project:p{i}", 0.3 / 9) for i in range(9))]
NAMESPACES.append(("user:global", 0.2))
QUERY_NAMESPACE = "project:main"
SIGNALS = [("test", 0.3), ("user", 0.3), ("reviewer", 0.2), ("lint", 0.1), ("none", 0.1)]
CONFIDENCE = {"test": 0.9, "user": 0.6, "reviewer": 0.6, "lint": 0.85, "none": 0.2}
TYPES = ["fact", "lesson", "convention", "preference", "decision", "constraint"]
STOPS = sorted(STOP_WORDS - {"s", "t"})
NOW = datetime(2026, 12, 1, tzinfo=UTC)
CORPUS_VERSION = 3  # part of the cache file name: bump it whenever the generator changes


def _syllable_word(i: int) -> str:
    # Distinct pronounceable pseudo-words: rank 0 is the most frequent.
    consonants, vowels = "bdfgklmnprstvz", "aeiou"
    out = []
    n = i + 1
    while n:
        n, r = divmod(n, len(consonants) * len(vowels))
        out.append(consonants[r // len(vowels)] + vowels[r % len(vowels)])
    return "".join(out) + "x"


class Corpus:
    def __init__(self, seed: int):
        self.rng = Random(seed)
        self.words = [_syllable_word(i) for i in range(VOCAB)]
        self.cum = list(accumulate(1.0 / (r + ZIPF_OFFSET) ** ZIPF_S for r in range(VOCAB)))
        self.entity_cum = list(accumulate(1.0 / (r + 1) for r in range(ENTITIES)))

    def word(self) -> str:
        return self.words[bisect(self.cum, self.rng.random() * self.cum[-1])]

    def entity(self) -> int:
        return bisect(self.entity_cum, self.rng.random() * self.entity_cum[-1])

    def sentence(self) -> str:
        n = self.rng.randint(15, 40)
        rng = self.rng
        return " ".join(
            rng.choice(STOPS) if rng.random() < STOP_SHARE else self.word() for _ in range(n)
        )

    def pick(self, table: list[tuple[str, float]]) -> str:
        x = self.rng.random() * sum(w for _, w in table)
        for value, w in table:
            x -= w
            if x <= 0:
                return value
        return table[-1][0]


def build(path: Path, rows: int, seed: int) -> None:
    """A store holding `rows` memories, 5 % superseded, each tagged with 0-2 Zipf entities,
    written as a sync file and loaded through the bulk path users have (`zmem ingest-jsonl`, the
    real CLI in a subprocess, fake profile: the hybrid variant replaces the vectors)."""
    tmp = path.with_suffix(".building")
    source = path.with_suffix(".jsonl")
    for p in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
        p.unlink(missing_ok=True)
    corpus = Corpus(seed)
    start = NOW - timedelta(days=730)
    t0 = time.perf_counter()
    with source.open("w", encoding="utf-8") as out:
        for i in range(rows):
            content = corpus.sentence()
            signal = corpus.pick(SIGNALS)
            at = (start + timedelta(seconds=730 * 86400 * i / rows)).strftime(
                "%Y-%m-%dT%H:%M:%S.%fZ"
            )
            record = {
                "kind": "memory",
                "id": str(uuid.UUID(int=corpus.rng.getrandbits(128))),
                "content": content,
                "type": corpus.rng.choice(TYPES),
                "namespace": corpus.pick(NAMESPACES),
                "signal": signal,
                "confidence": CONFIDENCE[signal],
                "ingestion_ts": at,
                "valid_from": at,
                "retrieval_count": corpus.rng.randint(0, 3),
            }
            if corpus.rng.random() < 0.05:
                record.update(superseded_at=at, valid_until=at, supersede_reason="bench")
            # Every 7th vocabulary word names an entity, so queries do hit the entity lane.
            picks = {corpus.entity() for _ in range(corpus.rng.choice((0, 1, 1, 2)))}
            record["tags"] = [f"entity:tool:{corpus.words[e * 7]}" for e in sorted(picks)]
            out.write(json.dumps(record) + "\n")
            if i % 20_000 == 0:
                print(f"  writing {rows:,}: {i:,} rows", file=sys.stderr, end="\r")
    print(f"\n  {rows:,} rows written in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZMEM_")}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as data:
        env.update(ZMEM_STORE=str(tmp), ZMEM_EMBED_PROFILE="fake", ZMEM_DATA=data)
        subprocess.run(
            [str(Path(sys.executable).with_name("zmem")), "ingest-jsonl", "--in", str(source)],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
    print(f"  ingested in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    conn = apsw.Connection(str(tmp))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    tmp.rename(path)
    source.unlink()
    for suffix in ("-wal", "-shm"):
        Path(f"{tmp}{suffix}").unlink(missing_ok=True)


def add_vectors(lexical: Path, path: Path, seed: int) -> None:
    """The hybrid variant of a store: every live row gets a 384-d unit vector in memory.embedding
    and memory_vec, committed to the minilm profile. The vectors are random: KNN cost depends
    on the row count and dimension, not on meaning, while the query is embedded for real."""
    import shutil

    import numpy as np

    from zmem.db import vectors

    tmp = path.with_suffix(".building")
    shutil.copy(lexical, tmp)
    conn = apsw.Connection(str(tmp))
    if not vectors.load(conn):
        raise SystemExit("sqlite-vec is not installed: no hybrid mode")
    rng = np.random.default_rng(seed)
    rows = conn.execute(
        "SELECT rid, namespace FROM memory WHERE superseded_at IS NULL ORDER BY rid"
    ).fetchall()
    with conn:
        table = vectors.active(conn)
        vectors.drop(conn, table)
        vectors.create(conn, "minilm", 384)
        for start in range(0, len(rows), 20_000):
            chunk = rows[start : start + 20_000]
            # Generated per chunk: a 1M x 384 matrix at once would take 1.5 GB of memory.
            matrix = rng.standard_normal((len(chunk), 384)).astype(np.float32)
            matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
            blobs = [matrix[i].astype("<f4").tobytes() for i in range(len(chunk))]
            conn.executemany(
                "UPDATE memory SET embedding = ?, embedding_model = 'all-MiniLM-L6-v2' "
                "WHERE rid = ?",
                [(b, rid) for b, (rid, _) in zip(blobs, chunk, strict=True)],
            )
            conn.executemany(
                f"INSERT INTO {table} (rowid, namespace, embedding) VALUES (?, ?, ?)",
                [(rid, ns, b) for b, (rid, ns) in zip(blobs, chunk, strict=True)],
            )
            print(f"  vectors: {start + len(chunk):,} rows", file=sys.stderr, end="\r")
    print(file=sys.stderr)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    tmp.rename(path)


def queries(path: Path, n: int, seed: int) -> list[str]:
    """Prose around 3-6 content words of random live rows of the queried namespace."""
    rng = Random(seed + 1)
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    top = conn.execute("SELECT max(rid) FROM memory").fetchone()[0]
    out = []
    while len(out) < n:
        row = conn.execute(
            "SELECT content FROM memory WHERE rid >= ? AND namespace = ? AND superseded_at IS NULL "
            "LIMIT 1",
            (rng.randint(1, top), QUERY_NAMESPACE),
        ).fetchone()
        if row is None:
            continue
        words = [w for w in row[0].split() if w not in STOP_WORDS]
        if len(words) < 3:
            continue
        picked = rng.sample(words, min(len(words), rng.randint(3, 6)))
        out.append(f"how should we handle the {' '.join(picked)} when it is done?")
    conn.close()
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def warm(
    path: Path, qs: list[str], passive: bool, hybrid: bool = False, resident: bool = False
) -> dict[str, float]:
    """Warm recall latency; `resident`: as the hooks' resident process runs it, with the vector
    index copied into memory (the copy's build time is reported apart)."""
    settings = config.load_settings(store_path=path)
    times, hits = [], 0
    mode = None if hybrid else False
    copy_ms = 0.0
    with MemoryStore.open(settings=settings) as store:
        if resident:
            t = time.perf_counter()
            if not store.keep_vectors_in_memory():
                raise SystemExit("this store reads no vectors: no resident mode")
            copy_ms = (time.perf_counter() - t) * 1000
        for q in qs[:5]:  # warm the page cache, the imports and (hybrid) the model
            store.recall(q, namespace=QUERY_NAMESPACE, passive=passive, hybrid=mode)
        for q in qs:
            t = time.perf_counter()
            found = store.recall(q, namespace=QUERY_NAMESPACE, passive=passive, hybrid=mode)
            times.append((time.perf_counter() - t) * 1000)
            hits += bool(found)
        if resident:
            after = _after_commits(path, store, qs)
    out = {
        "p50_ms": statistics.median(times),
        "p95_ms": pct(times, 0.95),
        "answered": hits / len(qs),
        "copy_ms": copy_ms,
    }
    if resident:
        out.update(after)
    return out


def _after_commits(path: Path, store: MemoryStore, qs: list[str], rounds: int = 20) -> dict:
    """Reads right after another connection committed a new row (with its vector) and the
    tombstone of the previous such row: each read first catches the in-memory copy up. Also: a
    full rebuild of the copy, what a rewrite of existing vectors costs (and what every commit
    cost before catch-up)."""
    import numpy as np

    from zmem.db import memories, vectors

    rng = np.random.default_rng(5)
    other = apsw.Connection(str(path))
    vectors.load(other)
    times, kept, added = [], 0, []
    try:
        for i in range(rounds):
            vec = rng.standard_normal(384).astype(np.float32)
            blob = (vec / np.linalg.norm(vec)).astype("<f4").tobytes()
            with other:
                other.execute(
                    "INSERT INTO memory (id, content, type, namespace, signal, confidence, "
                    "ingestion_ts, valid_from, embedding, embedding_model) VALUES "
                    "(?, ?, 'fact', ?, 'user', 0.6, ?, ?, ?, 'all-MiniLM-L6-v2')",
                    (
                        f"bench-new-{i}",
                        qs[i],
                        QUERY_NAMESPACE,
                        NOW.isoformat(),
                        NOW.isoformat(),
                        blob,
                    ),
                )
                added.append(other.last_insert_rowid())
                vectors.put(other, added[-1], QUERY_NAMESPACE, blob)
                # Tombstone the previous round's row: the cached store's own rows stay live
                # (tombstones are write-once), and the bench rows are deleted at the end.
                if len(added) > 1:
                    memories.tombstone(other, f"bench-new-{i - 1}", NOW.isoformat(), "bench")
            t = time.perf_counter()
            store.recall(qs[i], namespace=QUERY_NAMESPACE, passive=True, hybrid=None)
            times.append((time.perf_counter() - t) * 1000)
            kept += store.vectors.cache.fresh(store._conn)
        t = time.perf_counter()
        cache = store.vectors.cache
        from zmem.db.connect import read_snapshot

        with read_snapshot(store._conn):
            cache.rebuild()
        rebuild_ms = (time.perf_counter() - t) * 1000
    finally:
        # Put the cached store back as it was (rows are never deleted by ZMem itself).
        with other:
            table = vectors.active(other)
            for rid in added:
                other.execute(f"DELETE FROM {table} WHERE rowid = ?", (rid,))
                other.execute("DELETE FROM memory WHERE rid = ?", (rid,))
        other.close()
    return {
        "after_commit_p50_ms": statistics.median(times),
        "caught_up": kept / rounds,
        "rebuild_ms": rebuild_ms,
    }


def resident_process(path: Path, runs: int = 3) -> dict[str, float]:
    """The hooks' resident process itself on this store: from its start until its socket
    answers (the model loaded, one warm-up read, the vector copy built), and its memory then:
    private (RssAnon: the model, the vector copy, Python) and file-backed (RssFile: pages of
    the memory-mapped store it has read, which the kernel can drop). Medians of `runs`."""
    import zmem
    from zmem.layout import SOCKET_NAME
    from zmem.resident.client import answers

    ups, anon, mapped = [], [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as data:
            env = {k: v for k, v in os.environ.items() if not k.startswith("ZMEM_")}
            env.update(
                ZMEM_STORE=str(path),
                ZMEM_DATA=data,
                ZMEM_EMBED_PROFILE="minilm",
                ZMEM_MODEL_DIR=os.environ.get("ZMEM_MODEL_DIR", ""),
                # The tree under test (PYTHONPATH=<another tree>/src for an alternated run),
                # not necessarily this checkout's.
                PYTHONPATH=str(Path(zmem.__file__).resolve().parents[1]),
            )
            if not env["ZMEM_MODEL_DIR"]:
                del env["ZMEM_MODEL_DIR"]
            sock = Path(data) / SOCKET_NAME
            t = time.perf_counter()
            proc = subprocess.Popen(
                [sys.executable, "-m", "zmem.resident.daemon", data],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                while not answers(sock):
                    if proc.poll() is not None or time.perf_counter() - t > 300:
                        raise SystemExit("the resident process did not come up")
                    time.sleep(0.02)
                ups.append((time.perf_counter() - t) * 1000)
                status = dict(
                    line.split(":", 1)
                    for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines()
                )
                anon.append(int(status["RssAnon"].split()[0]) / 1024)
                mapped.append(int(status["RssFile"].split()[0]) / 1024)
            finally:
                proc.kill()
                proc.wait()
    return {
        "up_ms": statistics.median(ups),
        "anon_mb": statistics.median(anon),
        "file_mb": statistics.median(mapped),
    }


def fresh(path: Path, qs: list[str], runs: int, hybrid: bool = False) -> dict[str, float]:
    exe = Path(sys.executable).with_name("zmem")
    env = {**os.environ, "ZMEM_STORE": str(path)}
    flag = [] if hybrid else ["--no-hybrid"]
    times, bare = [], []
    for q in qs[:runs]:
        t = time.perf_counter()
        subprocess.run(
            [str(exe), "recall", "--query", q, "--namespace", QUERY_NAMESPACE, "--no-bump", *flag],
            env=env,
            check=True,
            capture_output=True,
        )
        times.append((time.perf_counter() - t) * 1000)
        # The floor, alternated with the runs: the same interpreter doing nothing.
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], env=env, check=True, capture_output=True)
        bare.append((time.perf_counter() - t) * 1000)
    return {
        "p50_ms": statistics.median(times),
        "p95_ms": pct(times, 0.95),
        "bare_ms": statistics.median(bare),
    }


def floors(path: Path, qs: list[str]) -> dict[str, float]:
    """What the resident read cannot go below on this machine, measured in this run: one
    embedding of these queries by the model alone, and one product over as many 384-d rows as
    the queried namespace holds."""
    from hooks import floors as measure  # bench/hooks.py: the same floors for the hooks

    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    rows = conn.execute(
        "SELECT count(*) FROM memory WHERE namespace = ? AND superseded_at IS NULL",
        (QUERY_NAMESPACE,),
    ).fetchone()[0]
    conn.close()
    return measure(rows, qs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="10000,100000,1000000", help="comma-separated row counts")
    ap.add_argument("--queries", type=int, default=200, help="warm queries per size")
    ap.add_argument("--fresh-runs", type=int, default=15, help="fresh processes per size")
    ap.add_argument("--cache-dir", default=str(Path.home() / ".cache" / "zmem-bench"))
    ap.add_argument("--rebuild", action="store_true", help="rebuild cached stores")
    ap.add_argument("--seed", type=int, default=20241202)
    ap.add_argument("--out-json", default=None)
    ap.add_argument(
        "--hybrid",
        action="store_true",
        help="hybrid recall (MiniLM query embedding + vec0 KNN over random 384-d row vectors)",
    )
    args = ap.parse_args()
    os.environ.pop("ZMEM_TEST_NOW", None)
    os.environ["ZMEM_EMBED_PROFILE"] = "minilm" if args.hybrid else "fake"
    cache = Path(args.cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    # The MiniLM model is built (once) beside the cached stores, never in the user's ~/.zmem.
    os.environ.setdefault("ZMEM_DATA", str(cache / "zmem-data"))
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        path = cache / f"recall-v{CORPUS_VERSION}-{size}-{args.seed}.sqlite"
        if args.rebuild or not path.exists():
            build(path, size, args.seed)
        qs = queries(path, args.queries, args.seed)
        if args.hybrid:
            lexical, path = path, path.with_name(path.name.replace("recall-", "recall-hybrid-"))
            if args.rebuild or not path.exists():
                add_vectors(lexical, path, args.seed)
        print(f"  {size:,}: {len(qs)} warm queries...", file=sys.stderr)
        passive = warm(path, qs, passive=True, hybrid=args.hybrid)
        explicit = warm(path, qs, passive=False, hybrid=args.hybrid)
        resident = warm(path, qs, passive=True, hybrid=True, resident=True) if args.hybrid else None
        if resident is not None:
            resident.update(resident_process(path))
            resident.update(floors(path, qs))
        print(f"  {size:,}: {args.fresh_runs} fresh processes...", file=sys.stderr)
        cold = fresh(path, qs, args.fresh_runs, hybrid=args.hybrid)
        results.append(
            {
                "rows": size,
                "store_mb": path.stat().st_size / 1e6,
                "passive": passive,
                "explicit": explicit,
                "fresh": cold,
                "resident": resident,
                "target_p50_ms": (HYBRID_TARGETS_MS if args.hybrid else TARGETS_MS).get(size),
            }
        )
    print(
        f"\nrecall_scale on {platform.machine()} / Python {platform.python_version()}, "
        f"SQLite {apsw.sqlite_lib_version()}, {args.queries} queries, namespace "
        f"{QUERY_NAMESPACE} (50 % of rows), {'hybrid' if args.hybrid else 'lexical'}\n"
    )
    print(
        "| rows | store MB | passive p50 / p95 ms | explicit p50 / p95 ms | fresh process "
        "p50 / p95 ms | bare interpreter p50 ms | answered | target p50 |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        target = f"≤ {r['target_p50_ms']:.0f} ms" if r["target_p50_ms"] else "-"
        print(
            f"| {r['rows']:,} | {r['store_mb']:.0f} | {r['passive']['p50_ms']:.1f} / "
            f"{r['passive']['p95_ms']:.1f} | {r['explicit']['p50_ms']:.1f} / "
            f"{r['explicit']['p95_ms']:.1f} | {r['fresh']['p50_ms']:.0f} / "
            f"{r['fresh']['p95_ms']:.0f} | {r['fresh']['bare_ms']:.0f} | "
            f"{r['passive']['answered']:.0%} | {target} |"
        )
    if args.hybrid:
        print(
            "\nResident process (the hooks' daemon: vector index copied into memory, "
            "passive reads; a read right after another connection committed a row and a "
            "tombstone, which the copy catches up with; a full rebuild of the copy; the process "
            "itself: start until its socket answers, and its memory then; the floors: one query "
            "embedding, one product over the namespace's rows)\n\n| rows | p50 / p95 ms | "
            "floors: embedding + product ms | target p50 | after a commit p50 ms | copy built "
            "in ms | rebuilt in ms | process up in ms | private MB | mapped store MB |\n"
            "|---|---|---|---|---|---|---|---|---|---|"
        )
        for r in results:
            res = r["resident"]
            goal = RESIDENT_TARGETS_MS.get(r["rows"])
            print(
                f"| {r['rows']:,} | {res['p50_ms']:.1f} / {res['p95_ms']:.1f} | "
                f"{res['embedding']:.1f} + {res['product']:.1f} | "
                f"{f'≤ {goal:.0f} ms' if goal else '-'} | "
                f"{res['after_commit_p50_ms']:.1f} ({res['caught_up']:.0%} caught up) | "
                f"{res['copy_ms']:.0f} | {res['rebuild_ms']:.0f} | {res['up_ms']:.0f} | "
                f"{res['anon_mb']:.0f} | {res['file_mb']:.0f} |"
            )
    if args.out_json:
        Path(args.out_json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
