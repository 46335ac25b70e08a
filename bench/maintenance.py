"""consolidate and organize on large stores, through the real CLI (`python -m zmem ... --json`, a
fresh process per run, on a fresh copy of a cached store each time since both jobs write): the
time of `consolidate --force` and of `organize --force` (episode bound 256, the default, and
2000), what they merged, whether the planted number and negation twins stayed apart, the
longest wait of a writer process adding beside each job (target: under 1 s; in the first
--beside-runs runs, on another fresh copy), and the time of a verified `backup` of the same
store. Medians of --runs. Markdown tables on stdout.

    .venv/bin/python bench/maintenance.py [--rows 10000 100000] [--minilm-rows 10000]
        [--runs 3] [--beside-runs 1] [--pace 0.01] [--work /tmp/maintbench]

`--rows 10000 --minilm-rows 0` runs only the small fake-profile store (about a minute once built).

The stores (cached in --work, keyed by profile, size and corpus version) hold synthetic coding
notes from seeded word lists over 9 namespaces and 6 types: ~10 % near-duplicates of an earlier
row of the same namespace and type (clauses reordered, a word dropped, added or swapped: token
Jaccard >= 0.8, same numbers, same polarity), ~1 % number twins (only a number differs) and ~1 %
negation twins (only a negation differs), which must not merge. Rows go in through the add path
minus its near-duplicate fold (policy, entity links, related/contradicts links, term_df, vectors),
in large transactions with timestamps spread over the past year. --rows sizes use the fake
profile (token Jaccard only); --minilm-rows builds another store with MiniLM vectors, where
consolidate also compares cosines (0 skips it).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from bisect import bisect
from datetime import timedelta
from itertools import accumulate
from pathlib import Path
from random import Random

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from backup import zmem  # noqa: E402 - the CLI timer bench/backup.py already has

CORPUS_VERSION = 2  # part of the cache file names: bump it whenever the generator changes
NEAR_DUP_SHARE = 0.10
NUMBER_TWIN_SHARE = 0.01
NEGATION_TWIN_SHARE = 0.01
BUILD_BATCH = 500  # rows per build transaction
BOUNDS = (256, 2000)  # ZMEM_ORGANIZE_EPISODE_BOUND values timed

# ---- word lists --------------------------------------------------------------------------------
# No polarity words here (always, never, avoid, disable, ...): only the openers and the negation
# twins carry polarity, so which rows disagree is known.
TOOLS = (
    "pytest docker kubectl terraform cargo npm ruff mypy helm redis nginx uv pnpm gradle jq "
    "curl git gh tmux ssh psql rustc cmake tox vite jest webpack poetry conda make"
).split()
SUBS = "run build test install push apply exec logs lint check fmt sync lock upgrade init".split()
VERBS = (
    "pin bump cache check clean configure copy create debug delete deploy document export "
    "fetch fix flush format freeze guard import index load lock log measure merge migrate mock "
    "move normalize profile rebuild refactor register reload rename render reorder replace "
    "reset restart retry revert rotate sanitize seed shard sort split squash stream strip "
    "throttle trim truncate update validate vendor verify wrap"
).split()
NOUNS = (
    "adapter artifact backoff batch binary branch buffer bundle callback certificate changelog "
    "checkpoint checksum client column config connection container cookie coverage cursor "
    "daemon dashboard decorator dependency digest directory endpoint fixture flag formatter "
    "handler header hook image index interpreter job keyring latency lease lockfile manifest "
    "marker metric middleware migration module mount mutex offset package pager parser "
    "partition patch payload pipeline plugin pool port prefix process proxy query queue quota "
    "registry release replica request resolver retry revision runner runtime schema secret "
    "semaphore session shard snapshot socket span stub subprocess suite symlink table template "
    "tenant thread token trace transaction trigger upload variable volume webhook worker"
).split()
ADJECTIVES = (
    "async atomic blocking broken cached cold concurrent corrupt dangling deprecated detached "
    "dirty duplicate empty flaky frozen global hidden idempotent lazy legacy local mutable "
    "nested optional orphaned parallel partial pinned private readonly recursive remote shallow "
    "silent slow sparse stale strict temporary transient unsorted verbose"
).split()
MODULES = (
    "api auth billing cache cli config core db events export graph hooks ingest jobs mail "
    "models notify parser payments queue recall render reports scheduler search server storage "
    "sync telemetry ui users workers"
).split()
LINKERS = ("because", "since", "so that", "until", "whenever", "after")
TAGS = "ci testing docker perf db security deps release build flaky infra api cli config".split()
PROJECTS = "atlas beacon cinder dunmore ember fjord garnet harbor".split()
# The largest namespace stays under 16 384 rows at 100k (see the report for why that matters).
NAMESPACES = [*(f"project:{p}" for p in PROJECTS), "user:global"]
NAMESPACE_WEIGHTS = (15, 14, 13, 12, 11, 10, 9, 8, 8)
TYPES = ("lesson", "fact", "convention", "decision", "constraint", "preference")
TYPE_WEIGHTS = (45, 20, 15, 8, 7, 5)
SIGNALS = ("test", "user", "reviewer", "lint", "compile", "none")
SIGNAL_WEIGHTS = (30, 25, 10, 10, 5, 20)
ONSETS = "b bl c cr d f g gl h j k l m n p pr r s sl t tw v w z".split()
VOWELS = "a e i o u ae ia oa".split()
CODAS = ["", "", "n", "r", "l", "x", "sk", "m", "nt", "rd"]
TAIL_WORDS = 4000

# The writer beside a job: distinct word mixes, so its own near-duplicate handling stays cheap.
WRITER = r"""
import json, os, random, sys, time
from zmem import MemoryStore
path, ready, stop, pace = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
words = sys.argv[5:]
rng = random.Random(stop)
s = MemoryStore.open(path)
adds, i = [], 0
while not os.path.exists(stop):
    text = " ".join(rng.sample(words, 9))
    began, t0 = time.time(), time.perf_counter()
    s.add(f"bench writer note {i}: {text}", namespace="project:bench-writer", type="fact",
          signal="test")
    adds.append((began, time.perf_counter() - t0))
    i += 1
    if i == 1:
        open(ready, "w").close()
    time.sleep(pace)
s.close()
print(json.dumps(adds))
"""


class Corpus:
    """Deterministic rows from one seed: (kind, text, namespace, type, signal, tags, base)."""

    def __init__(self, seed: int):
        from zmem.tokens import POLARITY_WORDS, STOP_WORDS

        self.rng = rng = Random(seed)
        taken = set(VERBS + NOUNS + ADJECTIVES + TOOLS + MODULES) | STOP_WORDS | POLARITY_WORDS
        tail: list[str] = []
        while len(tail) < TAIL_WORDS:
            w = "".join(
                rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS)
                for _ in range(rng.choice((2, 2, 3)))
            )
            if len(w) >= 4 and w not in taken:
                taken.add(w)
                tail.append(w)
        self.tail = tail
        # Zipf over the tail: a few words everywhere, most rare (real posting-list shapes).
        self.tail_cum = list(accumulate(1.0 / r for r in range(1, len(tail) + 1)))
        self.ns_cum = list(accumulate(NAMESPACE_WEIGHTS))
        self.type_cum = list(accumulate(TYPE_WEIGHTS))
        self.signal_cum = list(accumulate(SIGNAL_WEIGHTS))
        self.twinned: set[tuple[str, int]] = set()  # one twin of each kind per base at most

    def _pick(self, items, cum):
        return items[bisect(cum, self.rng.random() * cum[-1])]

    def word(self) -> str:
        return self._pick(self.tail, self.tail_cum)

    def number(self) -> str:
        rng = self.rng
        return rng.choice(
            (
                f"port {rng.randint(1024, 65535)}",
                f"a timeout of {rng.randint(2, 600)} seconds",
                f"{rng.randint(2, 12)} retries",
                f"version {rng.randint(1, 9)}.{rng.randint(0, 40)}",
                f"{rng.randint(2, 64)} workers",
            )
        )

    def clauses(self) -> list[str]:
        """One note as 2-3 clauses (a near-duplicate may reorder them)."""
        rng, w = self.rng, self.word
        path = f"src/{rng.choice(MODULES)}/{w()}.py"
        first = rng.choice(
            (
                f"{rng.choice(VERBS)} the {rng.choice(ADJECTIVES)} {rng.choice(NOUNS)} in "
                f"{path} before {rng.choice(TOOLS)} {rng.choice(SUBS)}",
                f"{rng.choice(TOOLS)} {rng.choice(SUBS)} breaks on the {rng.choice(ADJECTIVES)} "
                f"{rng.choice(NOUNS)} of {rng.choice(MODULES)} {w()}",
                f"the {rng.choice(MODULES)} {rng.choice(NOUNS)} goes through {rng.choice(TOOLS)} "
                f"and the {w()} {rng.choice(NOUNS)}",
                f"{rng.choice(VERBS)} {rng.choice(NOUNS)} and {rng.choice(NOUNS)} together for "
                f"{path}",
            )
        )
        out = [first, f"{rng.choice(LINKERS)} the {w()} {w()} {rng.choice(NOUNS)} {w()}"]
        if rng.random() < 0.35:
            out.append(f"with {self.number()}")
        if rng.random() < 0.5:
            out.append(f"see {w()} {w()} in {rng.choice(TOOLS)}")
        return out

    @staticmethod
    def text(clauses: list[str], opener: str = "") -> str:
        body = ", ".join(clauses)
        if opener:
            return f"{opener} {body}."
        return body[0].upper() + body[1:] + "."

    def rows(self, n: int) -> list[dict]:
        rng = self.rng
        out: list[dict] = []
        fresh: list[int] = []  # indexes of fresh rows (near-duplicate and twin bases)
        while len(out) < n:
            r = rng.random()
            kind = "fresh"
            if fresh and r < NEAR_DUP_SHARE:
                kind = "near_dup"
            elif fresh and r < NEAR_DUP_SHARE + NUMBER_TWIN_SHARE:
                kind = "number_twin"
            elif fresh and r < NEAR_DUP_SHARE + NUMBER_TWIN_SHARE + NEGATION_TWIN_SHARE:
                kind = "negation_twin"
            row = self._row(kind, out, fresh) if kind != "fresh" else None
            if row is None:
                clauses = self.clauses()
                opener = rng.choices(("", "Always", "Never", "Avoid"), (86, 8, 4, 2))[0]
                if clauses[0].split()[0] not in VERBS:
                    opener = ""  # only an instruction takes an opener
                row = {
                    "kind": "fresh",
                    "clauses": clauses,
                    "opener": opener,
                    "text": self.text(clauses, opener),
                    "namespace": self._pick(NAMESPACES, self.ns_cum),
                    "type": self._pick(TYPES, self.type_cum),
                    "base": None,
                }
                fresh.append(len(out))
            row["signal"] = self._pick(SIGNALS, self.signal_cum)
            row["tags"] = rng.sample(TAGS, rng.choice((0, 0, 1, 1, 2)))
            out.append(row)
        return out

    def _row(self, kind: str, out: list[dict], fresh: list[int]) -> dict | None:
        """A planted row of `kind` derived from an earlier fresh row, or None (no fit)."""
        from zmem.capture.polarity import polarity
        from zmem.tokens import jaccard, number_tokens, similarity_tokens

        rng = self.rng
        # Duplicates often come soon after the original (the same session), often much later.
        pool = fresh[-200:] if rng.random() < 0.5 else fresh
        for _ in range(20):
            b = rng.choice(pool)
            if kind != "near_dup" and (kind, b) in self.twinned:
                continue
            base = out[b]
            clauses, opener = list(base["clauses"]), base["opener"]
            if kind == "number_twin":
                k = next((i for i, c in enumerate(clauses) if c.startswith("with ")), None)
                if k is None:
                    continue
                clauses[k] = re.sub(r"\d+", lambda _: str(rng.randint(2, 9999)), clauses[k])
            elif kind == "negation_twin":
                head = clauses[0]
                if opener == "Always" or (not opener and head.split()[0] in VERBS):
                    opener = "Never"
                elif " breaks on " in head or " goes through " in head:
                    clauses[0] = head.replace(" breaks on ", " never breaks on ").replace(
                        " goes through ", " never goes through "
                    )
                else:
                    continue
            else:
                op = rng.choice(("reorder", "drop", "add", "swap"))
                if op == "reorder":
                    rng.shuffle(clauses)
                else:
                    k = rng.randrange(len(clauses))
                    words = clauses[k].split()
                    if op in ("drop", "swap") and len(words) > 3:
                        del words[rng.randrange(1, len(words))]
                    if op in ("add", "swap"):
                        words.insert(rng.randrange(1, len(words) + 1), self.word())
                    clauses[k] = " ".join(words)
            text = self.text(clauses, opener)
            a, t = similarity_tokens(base["text"]), similarity_tokens(text)
            if text == base["text"]:
                continue
            same_numbers = number_tokens(a) == number_tokens(t)
            same_polarity = polarity(base["text"]) == polarity(text)
            if kind == "near_dup" and not (jaccard(a, t) >= 0.8 and same_numbers and same_polarity):
                continue
            if kind == "number_twin" and (same_numbers or not same_polarity):
                continue
            if kind == "negation_twin" and (same_polarity or not same_numbers):
                continue
            self.twinned.add((kind, b))
            return {
                "kind": kind,
                "clauses": clauses,
                "opener": opener,
                "text": text,
                "namespace": base["namespace"],
                "type": base["type"],
                "base": b,
            }
        return None


def build(path: Path, rows: int, profile: str, seed: int) -> dict:
    """A store of `rows` corpus rows with `profile` vectors; returns what was planted."""
    import apsw

    from zmem import MemoryStore, config
    from zmem.capture import policy, writer
    from zmem.db import memories
    from zmem.db.connect import transaction
    from zmem.tokens import similarity_norm

    tmp = path.with_suffix(".building")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{tmp}{suffix}").unlink(missing_ok=True)
    t0 = time.perf_counter()
    corpus = Corpus(seed)
    spec = corpus.rows(rows)
    texts = [r["text"] for r in spec]
    if profile == "minilm":
        from zmem.embedding import get_embedder

        embedder = get_embedder("minilm", Path(os.environ["ZMEM_DATA"]))
        vecs: list = []
        for lo in range(0, len(texts), 256):
            matrix = embedder.embed(texts[lo : lo + 256])
            vecs += [(v.astype("<f4").tobytes(), embedder.model_name) for v in matrix]
            print(f"  embedding: {len(vecs):,} rows", file=sys.stderr, end="\r")
        print(file=sys.stderr)
    else:
        from zmem.embedding import fake

        vecs = [fake.embed_bytes(t) for t in texts]
    settings = dataclasses.replace(config.load_settings(store_path=tmp), embed_profile=profile)
    store = MemoryStore.open(settings=settings)
    conn = store._conn
    conn.execute("PRAGMA synchronous = OFF")
    link_threshold = settings.link_threshold
    threshold = min(link_threshold, writer.DEDUP_THRESHOLD)
    start = config.now() - timedelta(days=366)
    step = timedelta(days=365) / rows
    ids: list[str] = []
    for lo in range(0, rows, BUILD_BATCH):
        with transaction(conn):
            semantic = store.vectors.semantic()
            for i in range(lo, min(rows, lo + BUILD_BATCH)):
                r = spec[i]
                at = config.format_instant(start + step * i)
                row = policy.prepare(
                    r["text"], namespace=r["namespace"], type=r["type"], tags=r["tags"],
                    signal=r["signal"], taint=None, source_ref=None, confidence=None,
                    capture_mode="manual",
                )  # fmt: skip
                vector = store.vectors.for_write(vecs[i])
                norm = similarity_norm(row.content)
                # writer.write without its twin fold: the planted near-duplicates stay rows.
                neighbours, saturated = writer.find_neighbours(
                    conn, row.content, norm, row.namespace, threshold, (), vector, semantic,
                    link_threshold,
                )  # fmt: skip
                new_id = str(uuid.UUID(int=corpus.rng.getrandbits(128)))
                memories.insert(
                    conn,
                    memories.NewMemory(
                        id=new_id, content=row.content, content_norm=norm, type=row.type,
                        tags=row.tags, namespace=row.namespace, signal=row.signal,
                        confidence=row.confidence, taint=row.taint, source_ref=None,
                        source_hash=None, created_at=at, embedding=vector[0],
                        embedding_model=vector[1],
                    ),
                    saturated=saturated,
                )  # fmt: skip
                judged = writer.judge_neighbours(row.content, neighbours)
                writer.link_neighbours(conn, new_id, row.tags, judged, at, link_threshold)
                writer.link_entities(conn, new_id, row.content, row.tags, at)
                ids.append(new_id)
        rate = len(ids) / (time.perf_counter() - t0)
        print(f"  building {profile} {rows:,}: {len(ids):,} rows ({rate:,.0f}/s)",
              file=sys.stderr, end="\r")  # fmt: skip
    print(file=sys.stderr)
    # A quarter of the rows have been surfaced or retrieved (the keeper order reads it).
    used = []
    for i in range(rows):
        if corpus.rng.random() < 0.25:
            later = timedelta(days=corpus.rng.randint(1, 30))
            seen = config.format_instant(start + step * i + later)
            used.append((corpus.rng.randint(1, 30), corpus.rng.randint(0, 8), seen, ids[i]))
    with transaction(conn):
        conn.executemany(
            "UPDATE memory SET surfaced_count = ?, retrieval_count = ?, last_surfaced = ? "
            "WHERE id = ?",
            used,
        )
    store.close()
    conn = apsw.Connection(str(tmp))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    tmp.rename(path)
    for suffix in ("-wal", "-shm"):
        Path(f"{tmp}{suffix}").unlink(missing_ok=True)
    planted = {
        "rows": rows,
        "profile": profile,
        "build_s": round(time.perf_counter() - t0, 1),
        # [planted id, id of the row it was derived from]
        **{
            k: [[ids[i], ids[r["base"]]] for i, r in enumerate(spec) if r["kind"] == k]
            for k in ("near_dup", "number_twin", "negation_twin")
        },
    }
    Path(f"{path}.json").write_text(json.dumps(planted))
    return planted


def fresh_copy(source: Path, store: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store}{suffix}").unlink(missing_ok=True)
    shutil.copy2(source, store)


def beside(env: dict[str, str], store: Path, work: Path, args: tuple[str, ...] | None,
           pace: float, alone: float = 5.0) -> tuple[float, int, float, dict]:  # fmt: skip
    """A writer process adding in a loop while `zmem *args` runs (or, args None, for `alone`
    seconds: the control). Returns (longest add ms, adds, job seconds, job report)."""
    ready, stop = work / "writer.ready", work / "writer.stop"
    ready.unlink(missing_ok=True)
    stop.unlink(missing_ok=True)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(store), str(ready), str(stop),
                               str(pace), *(VERBS + NOUNS)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)  # fmt: skip
    while not ready.exists():  # imports, store open, the first add (a model load with minilm)
        if writer.poll() is not None:
            raise SystemExit(f"writer failed: {writer.stderr.read().strip()[-500:]}")
        time.sleep(0.05)
    time.sleep(0.3)
    began = time.time()
    if args is None:
        time.sleep(alone)
        elapsed, doc = alone, {}
    else:
        elapsed, doc = zmem(env, *args)
    ended = time.time()
    stop.write_text("")
    out, err = writer.communicate(timeout=600)
    if writer.returncode != 0:
        raise SystemExit(f"writer failed: {err.strip()[-500:]}")
    during = [lat for at, lat in json.loads(out) if began <= at <= ended]
    return max(during, default=0.0) * 1000, len(during), elapsed, doc


def survivors(store: Path, planted: dict) -> dict[str, int]:
    """Per planted kind: how many rows are still live, and how many ended up in the same row as
    the row they were derived from (following "consolidated into <id>" to the live row)."""
    import apsw

    conn = apsw.Connection(str(store), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        into = {
            i: reason.rsplit(" ", 1)[1]
            for i, reason in conn.execute(
                "SELECT id, supersede_reason FROM memory WHERE supersede_reason LIKE "
                "'consolidated into %'"
            )
        }
        live = {r[0] for r in conn.execute("SELECT id FROM memory WHERE superseded_at IS NULL")}
    finally:
        conn.close()

    def final(i: str) -> str:
        while i in into:
            i = into[i]
        return i

    out = {}
    for kind in ("near_dup", "number_twin", "negation_twin"):
        out[f"{kind}_live"] = sum(i in live for i, _ in planted[kind])
        out[f"{kind}_with_base"] = sum(final(i) == final(b) for i, b in planted[kind])
    return out


def bench_store(
    source: Path, planted: dict, work: Path, runs: int, pace: float, beside_runs: int
) -> tuple[list, dict]:
    """Every job on fresh copies of `source`: rows of the main table, and the sanity counts."""
    store = work / "run.sqlite"
    base = {k: v for k, v in os.environ.items() if not k.startswith("ZMEM_")}
    base.update(ZMEM_STORE=str(store), ZMEM_DATA=str(work / "data"), ZMEM_SESSION_UPKEEP="0",
                ZMEM_EMBED_PROFILE=planted["profile"])  # fmt: skip
    jobs = [("consolidate --force", base, ("consolidate", "--force"))]
    for bound in BOUNDS:
        env = {**base, "ZMEM_ORGANIZE_EPISODE_BOUND": str(bound)}
        jobs.append((f"organize --force (episode {bound})", env, ("organize", "--force")))
    out_dir = work / "backups"
    jobs.append(("backup (copy, integrity_check, counts)", base,
                 ("backup", "--out-dir", str(out_dir), "--retention", "1")))  # fmt: skip
    rows, sanity = [], {}
    for name, env, args in jobs:
        times, waits, docs = [], [], []
        for run in range(runs):
            fresh_copy(source, store)
            elapsed, doc = zmem(env, *args)
            times.append(elapsed)
            docs.append(doc)
            if args[0] == "consolidate" and run == 0:
                sanity = survivors(store, planted)
                sanity["parked"] = doc["parked"]
            print(f"  {planted['profile']} {planted['rows']:,} {name} run {run + 1}: "
                  f"{elapsed:.2f} s", file=sys.stderr)  # fmt: skip
            if run >= beside_runs:
                continue
            fresh_copy(source, store)
            worst, adds, slowed, _ = beside(env, store, work, args, pace)
            waits.append((worst, adds, slowed))
            print(f"    beside a writer: {slowed:.2f} s, its longest add {worst:.0f} ms "
                  f"({adds} adds)", file=sys.stderr)  # fmt: skip
        rows.append((name, times, waits, docs[-1]))
    fresh_copy(source, store)
    worst, adds, _, _ = beside(base, store, work, None, pace)
    rows.append(("none (writer alone, 5 s)", [], [(worst, adds, None)], {}))
    shutil.rmtree(out_dir, ignore_errors=True)
    return rows, sanity


def merged_cell(doc: dict) -> tuple[str, str, str]:
    c = doc.get("consolidate") or doc
    if "merged" not in c:
        return "", "", f"{doc['total']} rows" if "total" in doc else ""
    live = f"{doc['live_before']} -> {doc['live_after']}"
    return str(c["merged"]), str(c["absorbed"]), live


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000],
                    help="fake-profile store sizes")  # fmt: skip
    ap.add_argument("--minilm-rows", type=int, default=10_000, help="0: no MiniLM store")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--beside-runs", type=int, default=1, help="runs with a writer beside")
    ap.add_argument("--pace", type=float, default=0.01, help="writer's sleep between adds, s")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--work", type=Path, default=Path("/tmp/maintbench"))
    args = ap.parse_args()
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    os.environ.update(ZMEM_DATA=str(work / "data"), ZMEM_SESSION_UPKEEP="0")
    sizes = [("fake", n) for n in args.rows]
    if args.minilm_rows:
        sizes.append(("minilm", args.minilm_rows))
    load = os.getloadavg()[0]
    results = []
    for profile, n in sizes:
        source = work / f"built-{profile}-{n}-v{CORPUS_VERSION}-s{args.seed}.sqlite"
        if source.exists() and Path(f"{source}.json").exists():
            planted = json.loads(Path(f"{source}.json").read_text())
        else:
            print(f"building {n} rows ({profile}) in {source} ...", file=sys.stderr)
            planted = build(source, n, profile, args.seed)
        rows, sanity = bench_store(source, planted, work, args.runs, args.pace, args.beside_runs)
        results.append((profile, n, source.stat().st_size, planted, rows, sanity))

    print(f"\n### consolidate, organize and backup, through the CLI (a fresh process per run, on a "
          f"fresh copy of the store), {args.runs} runs, nproc {os.cpu_count()}\n")  # fmt: skip
    print("Stores of the fake profile (16-d hashed vectors: consolidate compares token Jaccard "
          "only) unless the store column says minilm (384-d vectors: cosine too). Writer: a "
          f"second process adding memories in a loop ({args.pace * 1000:.0f} ms between adds) "
          "through a long-lived MemoryStore handle while the job runs, on another fresh copy "
          "(target: longest add under 1000 ms); 'median s beside' is the job's own time "
          "then.\n")  # fmt: skip
    print(
        "| store | job | median s | runs s | merged clusters | rows absorbed | live rows "
        "| job's longest txn ms | median s beside | writer: longest add ms | writer adds |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for profile, n, size, _, rows, _ in results:
        label = f"{profile} {n:,} ({size / 2**20:.0f} MB)"
        for name, times, waits, doc in rows:
            merged, absorbed, live = merged_cell(doc)
            txn = doc.get("longest_txn_ms", "")
            med = f"{statistics.median(times):.2f}" if times else ""
            slowed = [s for _, _, s in waits if s is not None]
            slow = f"{statistics.median(slowed):.2f}" if slowed else ""
            print(
                f"| {label} | {name} | {med} | {', '.join(f'{t:.2f}' for t in times)} | "
                f"{merged} | {absorbed} | {live} | {txn} | {slow} | "
                f"{max(w for w, _, _ in waits):.0f} | {sum(a for _, a, _ in waits)} |"
            )
    print(f"\n1-minute load average at the start {load:.2f}, at the end {os.getloadavg()[0]:.2f} "
          "(other work on the machine shows here)")  # fmt: skip
    print("\n### what consolidate --force merged and kept apart (first run)\n")
    print("A planted row 'with its base' ended up in the same live row as the row it was derived "
          "from. Near-duplicates should be; number and negation twins must not be.\n")  # fmt: skip
    print(
        "| store | build s | near-dups | with their base | number twins | with their base | "
        "still live | negation twins | with their base | still live | rows parked |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for profile, n, _, planted, _, sanity in results:
        print(f"| {profile} {n:,} | {planted['build_s']} | {len(planted['near_dup'])} | "
              f"{sanity['near_dup_with_base']} | {len(planted['number_twin'])} | "
              f"{sanity['number_twin_with_base']} | {sanity['number_twin_live']} | "
              f"{len(planted['negation_twin'])} | {sanity['negation_twin_with_base']} | "
              f"{sanity['negation_twin_live']} | {sanity['parked']} |")  # fmt: skip


if __name__ == "__main__":
    main()
