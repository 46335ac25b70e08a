"""Write-path benchmark: grow one ZMem store from empty through MemoryStore.add (dedup, polarity
guard, links and entities included) and report the throughput and latency of the last window of
adds before each checkpoint size, plus store size and what the write path decided."""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shutil
import statistics
import sys
import tempfile
import time
from array import array
from bisect import bisect
from collections import Counter
from dataclasses import dataclass, replace
from itertools import accumulate
from pathlib import Path
from random import Random

from zmem import MemoryStore
from zmem.tokens import POLARITY_WORDS, STOP_WORDS

TARGET_ADDS_PER_S = 1000
TARGET_ROWS = 100_000

# ---- corpus vocabulary -------------------------------------------------------------------------
# Real tool names so entity extraction does real work (they resolve to built-in tool entities).
TOOLS = (
    "git pytest docker ripgrep kubectl npm cargo ruff mypy terraform uv poetry psql redis nginx "
    "jq curl ssh tmux gh pnpm sqlite3 tox eslint vitest cmake rustc helm pip jest webpack vite "
    "brew conda bash black isort pre-commit gcloud rg node"
).split()
SUBCOMMANDS = (
    "run build test install push pull rebase log diff status apply exec logs describe lint "
    "check fmt sync lock upgrade init clean"
).split()
FLAGS = "--verbose --force --no-cache -x -k --dry-run --frozen --all --quiet -n --strict".split()
MODULES = (
    "api auth billing cache cli config core db events export fetch graph hooks ingest jobs "
    "mail models notify parser payments queue recall render reports scheduler search server "
    "storage sync telemetry ui users utils workers"
).split()
# Polarity words (not, never, avoid, disable, ...) are deliberately absent from every word list:
# only the Always/Never openers may carry polarity, so the contradiction share is controlled.
VERBS = (
    "add bump cache check clean commit configure copy create debug delete deploy document "
    "downgrade drop export fetch fix flush format freeze generate guard handle import index "
    "inline install invalidate load lock log measure memoize merge migrate mock move normalize "
    "pin profile quote raise rebuild refactor register reload remove rename render reorder "
    "replace reset restart retry return revert rotate run sanitize seed serialize set shard skip "
    "sort split squash stream strip test throttle time trim truncate update upgrade validate "
    "vendor verify wrap"
).split()
NOUNS = (
    "adapter alias allocation api argument artifact assertion backoff batch benchmark binary "
    "boundary branch buffer bug build bundle cache callback certificate changelog checkpoint "
    "checksum client column commit config connection constraint container context cookie "
    "coverage cursor daemon dashboard dataclass deadline decorator default dependency deploy "
    "diff digest directory docstring encoding endpoint entrypoint env error event exception "
    "exit fixture flag fork formatter frame generator handler hash header heap hook image index "
    "input interpreter iterator job key keyring latency layer lease lint lockfile log manifest "
    "marker memory message metric middleware migration mock module mount mutex namespace "
    "network offset output package pager parser partition patch path payload permission pid "
    "pipeline plugin pointer pool port prefix process profile prompt proxy query queue quota "
    "race record regex registry release replica request resolver response retry revision role "
    "runner runtime schema scope script secret selector semaphore session shard shell signal "
    "snapshot socket sort span stack stderr stdout stream string stub subprocess suffix suite "
    "symlink table tag task template tenant thread timeout timestamp token trace transaction "
    "trigger tuple type upload url variable vector version volume wal webhook worker workspace"
).split()
ADJECTIVES = (
    "async atomic blocking broken cached circular cold concurrent corrupt cyclic dangling "
    "deprecated detached deterministic dirty duplicate empty exclusive experimental flaky "
    "frozen global hidden idempotent implicit incremental internal invalid lazy legacy local "
    "mutable nested nullable optional orphaned parallel partial pinned private public readonly "
    "recursive redundant remote shallow silent slow sparse stale strict temporary transient "
    "unbounded unicode unsorted verbose"
).split()
# English glue words, the head of any real frequency distribution.
GLUE = (
    "the a of to and in for on with is it that this when if by as from at be or are was can "
    "which after before then also because so first each every only once again instead still "
    "same other new old more less all any both per via into over under while until"
).split()
TAG_POOL = (
    "ci testing docker perf db security deps release build flaky infra api cli packaging "
    "logging config migrations typing style git k8s windows macos linux async cache docs"
).split()
OTHER_FILES = (
    "pyproject.toml Dockerfile .github/workflows/ci.yml Makefile docker-compose.yml package.json"
).split()
PROJECTS = "atlas beacon cinder delta ember fjord garnet harbor iris juniper".split()
NAMESPACES = (*(f"project:{name}" for name in PROJECTS), "user:global")
TYPES = {
    "lesson": 50,
    "fact": 15,
    "convention": 15,
    "decision": 8,
    "constraint": 7,
    "preference": 5,
}
SIGNALS = {"test": 35, "compile": 10, "lint": 10, "reviewer": 10, "user": 20, "none": 15}

NEAR_DUP_SHARE = 0.05
POLARITY_TWIN_SHARE = 0.01
PSEUDO_WORDS = 3000

_ONSETS = "b br c ch d dr f fl g gr h j k kl l m n p pl qu r s sh sk st t th tr v w z".split()
_NUCLEI = "a e i o u ai ea io ou".split()
_CODAS = ["", "", "", "n", "r", "l", "x", "st", "m", "k", "sh", "nd", "rt"]
# unicode61's notion of a token: letters and digits; "_" and punctuation separate.
_TOKEN = re.compile(r"[^\W_]+")


class Sampler:
    """Draws items with the given relative weights (bisect on the cumulative sum: fast enough to
    pre-generate 100k rows in a few seconds)."""

    def __init__(self, items: list[str] | tuple[str, ...], weights: list[float] | tuple[int, ...]):
        self.items = list(items)
        self.cum = list(accumulate(weights))

    def __call__(self, rng: Random) -> str:
        return self.items[bisect(self.cum, rng.random() * self.cum[-1])]


def zipf(
    rng: Random, items: list[str] | tuple[str, ...], s: float = 1.0, shuffle: bool = True
) -> Sampler:
    """Probability proportional to 1 / rank**s: a few words everywhere and a long tail of rare
    ones, which is what keeps FTS document frequencies realistic. Shuffled first so the head is
    not simply the alphabetically first words of each list."""
    ranked = list(items)
    if shuffle:
        rng.shuffle(ranked)
    return Sampler(ranked, [1.0 / rank**s for rank in range(1, len(ranked) + 1)])


def pseudo_words(rng: Random, n: int, taken: set[str]) -> list[str]:
    out: list[str] = []
    seen = set(taken)
    while len(out) < n:
        word = "".join(
            rng.choice(_ONSETS) + rng.choice(_NUCLEI) + rng.choice(_CODAS)
            for _ in range(rng.choice((2, 2, 3)))
        )
        if len(word) >= 4 and word not in seen:
            seen.add(word)
            out.append(word)
    return out


@dataclass(frozen=True)
class Row:
    content: str
    namespace: str
    type: str
    tags: str
    signal: str
    kind: str  # fresh | near_dup | polarity_twin


class Corpus:
    """Deterministic generator of coding-lesson text from one seed."""

    def __init__(self, seed: int):
        self.rng = rng = Random(seed)
        real = VERBS + NOUNS + ADJECTIVES
        rng.shuffle(real)
        # Invented words must not be stop or polarity words ("none" is easy to spell by chance).
        taken = set(real) | set(GLUE) | set(TOOLS) | STOP_WORDS | POLARITY_WORDS
        self.tail = pseudo_words(rng, PSEUDO_WORDS, taken)
        # Rank order: English glue, then software words, then the invented long tail.
        self.word = zipf(rng, GLUE + real + self.tail, s=1.0, shuffle=False)
        self.verb = zipf(rng, VERBS, s=0.8)
        self.noun = zipf(rng, NOUNS, s=0.8)
        self.adj = zipf(rng, ADJECTIVES, s=0.8)
        self.tool = zipf(rng, TOOLS, s=1.1)
        self.module = zipf(rng, MODULES, s=0.9)
        # File stems mix real nouns with invented words so paths have their own long tail.
        # A few hundred stems per module, not thousands: projects have bounded file trees.
        stems = [w for pair in zip(NOUNS[::2], self.tail[:150], strict=False) for w in pair]
        self.stem = zipf(rng, stems, s=0.9)
        self.namespace = zipf(rng, NAMESPACES, s=0.7, shuffle=False)
        self.type = Sampler(list(TYPES), list(TYPES.values()))
        self.signal = Sampler(list(SIGNALS), list(SIGNALS.values()))

    # -- slot fillers ---------------------------------------------------------------------------

    def path(self) -> str:
        r = self.rng.random()
        if r < 0.7:
            return f"src/{self.module(self.rng)}/{self.stem(self.rng)}.py"
        if r < 0.9:
            return f"tests/{self.module(self.rng)}/test_{self.stem(self.rng)}.py"
        return self.rng.choice(OTHER_FILES)

    def ident(self) -> str:
        rng = self.rng
        a, b = self.verb(rng), self.noun(rng)
        if rng.random() < 0.3:
            return f"`{b.capitalize()}{self.noun(rng).capitalize()}.{a}`"
        return f"`{a}_{b}`" if rng.random() < 0.7 else f"`{a}_{self.tail_word()}()`"

    def tail_word(self) -> str:
        return self.tail[int(len(self.tail) * self.rng.random() ** 2)]

    def number(self) -> str:
        rng = self.rng
        return rng.choice(
            (
                str(rng.choice((2, 3, 5, 10, 30, 60, 100, 256, 512, 1024, 8080, 5432))),
                f"{rng.randint(1, 600)}s",
                f"{rng.choice((64, 128, 256, 512))}MB",
                f"v{rng.randint(0, 4)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}",
                f"{rng.randint(1, 99)}%",
            )
        )

    def filler(self, n: int) -> str:
        return " ".join(self.word(self.rng) for _ in range(n))

    # -- sentences ------------------------------------------------------------------------------

    def instruction(self) -> str:
        """An imperative clause: the kind a lesson opens with "Always"/"Never"."""
        rng, v, n, a = self.rng, self.verb, self.noun, self.adj
        t = rng.randrange(4)
        if t == 0:
            return (
                f"run `{self.tool(rng)} {rng.choice(SUBCOMMANDS)} {rng.choice(FLAGS)}` "
                f"before you {v(rng)} the {n(rng)} in {self.path()}"
            )
        if t == 1:
            return f"{v(rng)} the {a(rng)} {n(rng)} with {self.ident()} instead of {v(rng)}"
        if t == 2:
            return f"use {self.tool(rng)} {rng.choice(FLAGS)} to {v(rng)} {a(rng)} {n(rng)}"
        return f"{v(rng)} {self.ident()} when {self.path()} changes the {n(rng)}"

    def observation(self) -> str:
        rng, v, n, a = self.rng, self.verb, self.noun, self.adj
        t = rng.randrange(4)
        if t == 0:
            return (
                f"{self.tool(rng)} {rng.choice(SUBCOMMANDS)} breaks on {a(rng)} {n(rng)} "
                f"when {self.path()} has {self.number()} {n(rng)} entries"
            )
        if t == 1:
            return (
                f"in {self.path()}, {self.ident()} expects a {a(rng)} {n(rng)}; "
                f"{v(rng)} it after {self.number()}"
            )
        if t == 2:
            return (
                f"the {n(rng)} {n(rng)} is {a(rng)} after {self.tool(rng)} "
                f"{rng.choice(SUBCOMMANDS)} {self.number()}"
            )
        return f"{n(rng)} {n(rng)} is {a(rng)} under {self.tool(rng)} because of {n(rng)}"

    def fresh(self) -> str:
        rng = self.rng
        target = int(rng.triangular(15, 40, 24))
        opener = None
        if rng.random() < 0.5:
            first = self.instruction()
            r = rng.random()
            opener = "Always" if r < 0.3 else "Never" if r < 0.5 else None
        else:
            first = self.observation()
        parts = [first]
        if rng.random() < 0.35:
            parts.append(self.observation() if rng.random() < 0.5 else self.instruction())
        text = "; ".join(parts)
        # The rest is free text drawn from the Zipf vocabulary: where the long tail lives.
        pad = max(3, target - len(text.split()) - (opener is not None))
        text = f"{text}, {self.filler(pad)}."
        return f"{opener} {text}" if opener else text[0].upper() + text[1:]

    def near_dup(self, text: str) -> str:
        """An earlier row again: punctuation changed (it dedups), or one or two plain words
        swapped for other nouns. Since issue 35 such a swap reads as the same sentence about
        another subject (capture/stance.py: APART), so it is linked, not folded; with two
        swapped it may land between the link and dedup thresholds, so the linking path runs."""
        rng = self.rng
        r = rng.random()
        if r < 0.4:
            if text.endswith("."):
                return text[:-1] + rng.choice(("!", " (again).", ".."))
            return text + "."
        words = text.split(" ")
        # Swap content words for content words: trading "the" for "of" changes no similarity
        # token, which would turn every intended paraphrase into a dedup.
        plain = [
            i
            for i, w in enumerate(words)
            if w.isalpha() and w.lower() not in STOP_WORDS and w not in ("Always", "Never")
        ]
        for i in rng.sample(plain, min(len(plain), 1 if r < 0.75 else 2)):
            words[i] = self.noun(rng) if rng.random() < 0.5 else self.tail_word()
        return " ".join(words)

    def rows(self, total: int) -> list[Row]:
        rng = self.rng
        out: list[Row] = []
        polar: list[int] = []  # fresh rows that open with Always/Never
        for i in range(total):
            r = rng.random()
            if i >= 50 and r < NEAR_DUP_SHARE:
                src = out[rng.randrange(i)]
                out.append(replace(src, content=self.near_dup(src.content), kind="near_dup"))
                continue
            if i >= 50 and polar and r < NEAR_DUP_SHARE + POLARITY_TWIN_SHARE:
                src = out[polar[rng.randrange(len(polar))]]
                head, _, rest = src.content.partition(" ")
                flipped = ("Never " if head == "Always" else "Always ") + rest
                out.append(replace(src, content=flipped, kind="polarity_twin"))
                continue
            text = self.fresh()
            if text.startswith(("Always ", "Never ")):
                polar.append(i)
            tags = ",".join(sorted({rng.choice(TAG_POOL) for _ in range(rng.randint(0, 3))}))
            out.append(
                Row(text, self.namespace(rng), self.type(rng), tags, self.signal(rng), "fresh")
            )
        return out


def corpus_summary(rows: list[Row]) -> dict[str, object]:
    token_counts: Counter[str] = Counter()
    words = 0
    for row in rows:
        words += len(row.content.split())
        token_counts.update(set(_TOKEN.findall(row.content.lower())))
    kinds = Counter(row.kind for row in rows)
    return {
        "rows": len(rows),
        "mean_words": round(words / max(1, len(rows)), 1),
        "distinct_tokens": len(token_counts),
        "tokens_in_one_row": sum(1 for c in token_counts.values() if c == 1),
        "kinds": dict(sorted(kinds.items())),
    }


# ---- measurement -------------------------------------------------------------------------------


def store_bytes(path: Path) -> int:
    total = 0
    for p in (path, Path(f"{path}-wal")):
        try:
            total += p.stat().st_size
        except FileNotFoundError:
            pass
    return total


def p95(sorted_values: list[float]) -> float:
    # Nearest-rank percentile: an observed latency, no interpolation.
    return sorted_values[max(0, math.ceil(0.95 * len(sorted_values)) - 1)]


def run(rows: list[Row], sizes: list[int], window: int, store_path: Path) -> list[dict]:
    total = sizes[-1]
    starts, ends = array("d"), array("d")
    # Per add: 1 deduped, 2 linked (has related ids), 4 contradicted.
    outcome = bytearray(total)
    checkpoints: list[dict] = []
    wanted = set(sizes)
    step = max(1, total // 10)
    clock = time.perf_counter
    with MemoryStore.open(store_path) as store:
        add = store.add
        began = clock()
        for i, row in enumerate(rows[:total]):
            t0 = clock()
            r = add(
                row.content,
                namespace=row.namespace,
                type=row.type,
                tags=row.tags,
                signal=row.signal,
            )
            t1 = clock()
            starts.append(t0)
            ends.append(t1)
            outcome[i] = (
                (r.result == "deduped") | (bool(r.related) << 1) | (bool(r.contradicts) << 2)
            )
            n = i + 1
            if n in wanted:
                checkpoints.append(checkpoint(store, store_path, n, window, starts, ends, outcome))
            if n % step == 0 or n == total:
                recent = min(step, n)
                rate = recent / (ends[n - 1] - starts[n - recent])
                print(
                    f"[bench] {n:>8}/{total} adds  {rate:8.0f} adds/s (last {recent})  "
                    f"elapsed {clock() - began:7.1f}s",
                    file=sys.stderr,
                    flush=True,
                )
    return checkpoints


def checkpoint(
    store: MemoryStore,
    store_path: Path,
    n: int,
    window: int,
    starts: array,
    ends: array,
    outcome: bytearray,
) -> dict:
    w = min(window, n)
    lo = n - w
    lat = sorted(ends[k] - starts[k] for k in range(lo, n))
    flags = outcome[lo:n]
    stats = store.stats()
    return {
        "rows": n,
        "window": w,
        "adds_per_s": w / (ends[n - 1] - starts[lo]),
        "cumulative_adds_per_s": n / (ends[n - 1] - starts[0]),
        "median_ms": statistics.median(lat) * 1e3,
        "p95_ms": p95(lat) * 1e3,
        "max_ms": lat[-1] * 1e3,
        "store_bytes": store_bytes(store_path),
        "stored": sum(1 for f in flags if not f & 1),
        "deduped": sum(1 for f in flags if f & 1),
        "linked": sum(1 for f in flags if f & 2),
        "contradicted": sum(1 for f in flags if f & 4),
        "store_total": stats["total"],
        "store_live": stats["live"],
        "store_links": stats["links"],
        "store_entities": stats["entities"],
    }


def machine_info() -> dict[str, object]:
    info: dict[str, object] = {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
    }
    try:
        # zmem's own SQLite binding; its bundled SQLite version decides FTS5 behaviour.
        import apsw

        info["sqlite"] = apsw.sqlite_lib_version()
    except ImportError:
        pass
    return info


def markdown_table(checkpoints: list[dict]) -> str:
    head = (
        "| rows | adds/s (window) | median ms | p95 ms | store MB | deduped | linked "
        "| contradicted |"
    )
    lines = [head, "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for c in checkpoints:
        lines.append(
            f"| {c['rows']:,} | {c['adds_per_s']:,.0f} | {c['median_ms']:.2f} | "
            f"{c['p95_ms']:.2f} | {c['store_bytes'] / 1e6:.1f} | {c['deduped']} | "
            f"{c['linked']} | {c['contradicted']} |"
        )
    return "\n".join(lines)


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = sorted({int(part.replace("_", "")) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of integers: {text}"
        ) from None
    if not sizes or sizes[0] < 1:
        raise argparse.ArgumentTypeError("sizes must be positive integers")
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--sizes",
        type=parse_sizes,
        default=parse_sizes("1000,10000,100000"),
        help="checkpoint store sizes, comma-separated (default 1000,10000,100000)",
    )
    parser.add_argument(
        "--window",
        type=int,
        default=1000,
        help="adds before each checkpoint that its numbers cover (default 1000)",
    )
    parser.add_argument("--seed", type=int, default=20240601, help="corpus seed")
    parser.add_argument("--out-json", type=Path, help="also write the results as JSON here")
    parser.add_argument(
        "--keep-store", action="store_true", help="leave the store file behind and print its path"
    )
    args = parser.parse_args(argv)
    if args.window < 1:
        parser.error("--window must be at least 1")

    workdir = Path(tempfile.mkdtemp(prefix="zmem-bench-"))
    # A developer's ZMEM_* settings (link threshold, capture mode, ...) would silently change the
    # write path being measured, and ZMEM_DATA would point the notice marker at the real home.
    for key in [k for k in os.environ if k.startswith("ZMEM_")]:
        del os.environ[key]
    os.environ["ZMEM_EMBED_PROFILE"] = "fake"
    os.environ["ZMEM_DATA"] = str(workdir)
    store_path = workdir / "store.sqlite"

    try:
        t0 = time.perf_counter()
        rows = Corpus(args.seed).rows(args.sizes[-1])
        summary = corpus_summary(rows)
        print(
            f"[bench] corpus: {summary} generated in {time.perf_counter() - t0:.1f}s",
            file=sys.stderr,
            flush=True,
        )
        checkpoints = run(rows, args.sizes, args.window, store_path)
    finally:
        if args.keep_store:
            print(f"[bench] store kept at {store_path}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    machine = machine_info()
    print(
        f"machine: Python {machine['python']} ({machine['implementation']}), "
        f"{machine['platform']}, {machine['cpu_count']} CPUs, "
        f"SQLite {machine.get('sqlite', '?')}"
    )
    print(
        f"corpus: seed {args.seed}, {summary['distinct_tokens']:,} distinct tokens, "
        f"{summary['mean_words']} words/row; window {args.window} adds"
    )
    print()
    print(markdown_table(checkpoints))
    verdict = None
    at_target = [c for c in checkpoints if c["rows"] == TARGET_ROWS]
    if at_target:
        rate = at_target[0]["adds_per_s"]
        verdict = rate >= TARGET_ADDS_PER_S
        print(
            f"\ntarget >= {TARGET_ADDS_PER_S:,} adds/s at {TARGET_ROWS:,} rows: "
            f"{'PASS' if verdict else 'FAIL'} ({rate:,.0f} adds/s)"
        )
    last = checkpoints[-1]
    print(
        f"store after {last['rows']:,} adds: {last['store_total']:,} rows "
        f"({last['store_live']:,} live), {last['store_links']:,} links, "
        f"{last['store_entities']:,} entities"
    )

    if args.out_json:
        payload = {
            "machine": machine,
            "seed": args.seed,
            "window": args.window,
            "sizes": args.sizes,
            "corpus": summary,
            "target": {"adds_per_s": TARGET_ADDS_PER_S, "rows": TARGET_ROWS, "met": verdict},
            "checkpoints": checkpoints,
        }
        args.out_json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
