"""The LoCoMo retrieval benchmark: parse a LoCoMo file (read from a path at run time: the data is
CC BY-NC and never ships here), ingest one memory per dialog turn into a throwaway store, recall
every question passively, and score turn-level and session-level R@k per category, next to a
plain BM25 baseline. It reads and writes only through the public MemoryStore API."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from zmem import config
from zmem.errors import UsageError
from zmem.evaluation import bm25
from zmem.evaluation.environment import restored_env
from zmem.evaluation.locomo_format import (
    parse_evidence,
    parse_session_date,
    session_numbers,
    session_of,
    turn_content,
)
from zmem.evaluation.progress import Tracker, quiet
from zmem.retrieval.request import RecallRequest
from zmem.store import MemoryStore

KS = (5, 10, 25, 50)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
PROFILES = config.EMBED_PROFILES
# The paper's DRAGON retriever over dialog turns, all ten conversations (LoCoMo, Table 3).
DRAGON_TURN_RECALL = {5: 0.567, 10: 0.662, 25: 0.767, 50: 0.827}

# The query clock sits after the conversation's last session, as a user asking later would.
QUERY_DELAY = timedelta(days=1)
UNLIMITED_TOKENS = 10**9


# ---- parsing ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    dia_id: str
    session: int
    content: str
    created_at: datetime


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]  # resolved dialog ids, never empty


@dataclass
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]

    @property
    def namespace(self) -> str:
        return f"locomo:{self.sample_id}"

    @property
    def query_time(self) -> datetime:
        return max(t.created_at for t in self.turns) + QUERY_DELAY


@dataclass
class Dataset:
    conversations: list[Conversation]
    sha256: str = ""
    questions_total: int = 0
    # Dropped: no D<n>:<m> token at all, or tokens none of which names a turn of the dialog.
    dropped_no_evidence: int = 0
    dropped_unresolved: int = 0
    partially_resolved: int = 0  # kept, scored on the ids that exist
    unresolved_ids: list[str] = field(default_factory=list)

    @property
    def dropped(self) -> int:
        return self.dropped_no_evidence + self.dropped_unresolved

    @property
    def turns(self) -> int:
        return sum(len(c.turns) for c in self.conversations)


def load(path: str | Path) -> Dataset:
    raw = Path(path).read_bytes()
    data = Dataset([], sha256=hashlib.sha256(raw).hexdigest())
    for sample in json.loads(raw):
        data.conversations.append(_conversation(sample, data))
    return data


def _conversation(sample: dict[str, Any], data: Dataset) -> Conversation:
    sample_id = str(sample["sample_id"])
    conv = sample["conversation"]
    turns: list[Turn] = []
    sessions = session_numbers(conv)
    # Some samples list dates of sessions that have no turns; only real sessions count.
    for n in sessions:
        date_text = str(conv[f"session_{n}_date_time"]).strip()
        created = parse_session_date(date_text)
        for t in conv[f"session_{n}"]:
            dia_id = parse_evidence(t["dia_id"])[0]
            content = turn_content(
                date_text, t["speaker"], t.get("text", ""), t.get("blip_caption")
            )
            turns.append(Turn(dia_id, session_of(dia_id), content, created))
    known = {t.dia_id for t in turns}
    questions = []
    for qa in sample.get("qa", []):
        data.questions_total += 1
        tokens = parse_evidence(qa.get("evidence"))
        resolved = tuple(d for d in tokens if d in known)
        missing = [d for d in tokens if d not in known]
        data.unresolved_ids += [f"{sample_id}:{d}" for d in missing]
        if not tokens:
            data.dropped_no_evidence += 1
        elif not resolved:
            data.dropped_unresolved += 1
        else:
            data.partially_resolved += bool(missing)
            questions.append(Question(str(qa["question"]), int(qa["category"]), resolved))
    return Conversation(sample_id, turns, questions)


# ---- metrics ---------------------------------------------------------------------------------

# One ranked result: the dialog ids one returned memory stands for (a dedup keeper stands for
# the turns folded into it as well as its own).
Ranking = Sequence[frozenset[str]]


def recall_at(evidence: Sequence[str], ranking: Ranking, k: int) -> tuple[float, float]:
    """(turn-level, session-level any-hit) recall of one question at k: the share of evidence
    ids among the top-k results, and 1.0 if any top-k result comes from an evidence session."""
    gold = set(evidence)
    top = frozenset().union(*ranking[:k])
    sessions = {session_of(d) for d in gold}
    turn = len(gold & top) / len(gold)
    return turn, float(any(session_of(d) in sessions for d in top))


@dataclass
class Scored:
    question: str
    category: int
    turn: dict[int, float]
    session: dict[int, float]


def score(question: Question, ranking: Ranking) -> Scored:
    pairs = {k: recall_at(question.evidence, ranking, k) for k in KS}
    return Scored(
        question.text,
        question.category,
        {k: p[0] for k, p in pairs.items()},
        {k: p[1] for k, p in pairs.items()},
    )


def _mean_block(rows: Sequence[Scored]) -> dict[str, Any]:
    n = len(rows)
    return {
        "n": n,
        "turn_recall": {str(k): _mean([r.turn[k] for r in rows]) for k in KS},
        "session_recall": {str(k): _mean([r.session[k] for r in rows]) for k in KS},
    }


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def summarize(rows: Sequence[Scored]) -> dict[str, Any]:
    """Overall, overall without adversarial questions, and per category."""
    return {
        "all": _mean_block(rows),
        "no_adversarial": _mean_block([r for r in rows if r.category != 5]),
        "by_category": {
            str(c): {"name": name, **_mean_block([r for r in rows if r.category == c])}
            for c, name in CATEGORIES.items()
        },
    }


# ---- the two systems -------------------------------------------------------------------------


@dataclass
class SystemRun:
    name: str
    rows: list[Scored] = field(default_factory=list)
    ingest_s: float = 0.0
    query_ms: list[float] = field(default_factory=list)
    returned: list[int] = field(default_factory=list)  # results per question, at most the limit
    counters: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "system": self.name,
            **summarize(self.rows),
            "ingest_s": round(self.ingest_s, 3),
            "query_ms": {
                "p50": _round(percentile(self.query_ms, 50)),
                "p95": _round(percentile(self.query_ms, 95)),
                "mean": _round(sum(self.query_ms) / len(self.query_ms) if self.query_ms else None),
            },
            "results_per_question": {
                "mean": _round(sum(self.returned) / len(self.returned) if self.returned else None),
                "under_limit": sum(n < max(KS) for n in self.returned),
            },
            **self.counters,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


@contextmanager
def _fresh_store_path(store: str | Path | None) -> Iterator[Path]:
    if store is not None:
        path = Path(store).expanduser()
        # Never the user's memory: a benchmark writes thousands of rows and bumps counters.
        if path.exists():
            raise UsageError(f"--store {path} already exists; the benchmark needs a fresh path")
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="zmem-locomo-") as tmp:
        yield Path(tmp) / "locomo.sqlite"


def run_zmem(
    data: Dataset,
    *,
    hybrid: bool = True,
    dense_only: bool = False,
    profile: str = "fake",
    store: str | Path | None = None,
    token_budget: int | None = None,
    limit: int = max(KS),
    track: Tracker = quiet,
) -> SystemRun:
    """Ingest every turn (clock pinned to its session's date), then recall every kept question
    passively (no bump, no links, no MMR) with the clock after the last session. The passive
    token budget is lifted unless token_budget is given: R@50 measures the ranking, and the
    default 1,500-token budget would cut a 50-row answer to about 25 turns."""
    with ingested(data, profile=profile, store=store, token_budget=token_budget, track=track) as (
        s,
        stands_for,
        run,
    ):
        _query(
            s,
            data,
            run,
            stands_for,
            hybrid=None if hybrid else False,
            limit=limit,
            dense_only=dense_only,
            track=track,
        )
        run.counters.update(
            hybrid=hybrid,
            dense_only=dense_only,
            profile=profile,
            token_budget=token_budget,
        )
    return run


@contextmanager
def ingested(
    data: Dataset,
    *,
    profile: str = "fake",
    store: str | Path | None = None,
    token_budget: int | None = None,
    track: Tracker = quiet,
) -> Iterator[tuple[MemoryStore, dict[str, set[str]], SystemRun]]:
    """A store holding every turn of `data` (one namespace per conversation), open, with what
    each memory stands for and the run its ingest counters went to; the caller's clock and
    profile come back on exit. Read it with query_clock() set per conversation."""
    if profile not in PROFILES:
        raise UsageError(f"unknown embedding profile {profile!r} ({', '.join(PROFILES)})")
    run = SystemRun("zmem")
    with restored_env("ZMEM_TEST_NOW", "ZMEM_EMBED_PROFILE"), _fresh_store_path(store) as path:
        os.environ["ZMEM_EMBED_PROFILE"] = profile
        settings = config.load_settings(store_path=path)
        budget = UNLIMITED_TOKENS if token_budget is None else token_budget
        settings = dataclasses.replace(settings, inject_token_budget=budget)
        with MemoryStore.open(settings=settings) as s:
            stands_for = _ingest(s, data, run, track)
            yield s, stands_for, run


def query_clock(conv: Conversation) -> None:
    """Reads after this run at the conversation's query time (a day after its last session)."""
    os.environ["ZMEM_TEST_NOW"] = config.format_instant(conv.query_time)


def ranking(report: Any, stands_for: dict[str, set[str]]) -> list[frozenset[str]]:
    """The dialog ids each presented row stands for, in the report's order."""
    return [_dia_ids(h.memory.source_ref, stands_for.get(h.id, set())) for h in report.hits]


def _ingest(
    s: MemoryStore, data: Dataset, run: SystemRun, track: Tracker = quiet
) -> dict[str, set[str]]:
    """Returns memory id → the dialog ids it stands for (a dedup keeper collects the turns
    folded into it, so evidence on a folded turn is still scorable)."""
    stands_for: dict[str, set[str]] = {}
    deduped = injection = 0
    turns = [(c, t) for c in data.conversations for t in c.turns]
    started = time.perf_counter()
    for conv, turn in track(turns, "ingest", total=len(turns)):
        os.environ["ZMEM_TEST_NOW"] = config.format_instant(turn.created_at)
        result = s.add(
            turn.content,
            namespace=conv.namespace,
            type="fact",
            signal="user",
            taint="trusted_internal",
            source_ref=f"locomo:{conv.sample_id}:{turn.dia_id}",
            capture_mode="manual",
        )
        stands_for.setdefault(result.id, set()).add(turn.dia_id)
        deduped += result.result == "deduped"
        injection += any(w.get("type") == "injection_risk" for w in result.warnings)
    run.ingest_s = time.perf_counter() - started
    run.counters.update(turns=len(turns), deduped_turns=deduped, injection_tagged_turns=injection)
    return stands_for


def _query(
    s: MemoryStore,
    data: Dataset,
    run: SystemRun,
    stands_for: dict[str, set[str]],
    *,
    hybrid: bool | None,
    limit: int,
    dense_only: bool = False,
    track: Tracker = quiet,
) -> None:
    omitted = budget_dropped = 0
    jobs = [(c, q) for c in data.conversations for q in c.questions]
    clock = ""
    for conv, question in track(jobs, "recall", total=len(jobs)):
        if clock != conv.sample_id:
            query_clock(conv)
            clock = conv.sample_id
        started = time.perf_counter()
        report = s.read(
            RecallRequest(
                query=question.text,
                namespace=conv.namespace,
                limit=limit,
                passive=True,
                hybrid=hybrid,
                dense_only=dense_only,
                link_hops=0,
                no_mmr=True,
            )
        )
        run.query_ms.append((time.perf_counter() - started) * 1000.0)
        omitted += report.omitted
        budget_dropped += report.budget_dropped
        ranked = ranking(report, stands_for)
        run.returned.append(len(ranked))
        run.rows.append(score(question, ranked))
    run.counters.update(omitted_passive=omitted, budget_dropped=budget_dropped)


def _dia_ids(source_ref: str | None, folded: set[str]) -> frozenset[str]:
    # source_ref is locomo:<sample_id>:<dia_id>: the dialog id is its last token.
    return frozenset(parse_evidence(source_ref)[-1:]) | folded


def run_bm25(data: Dataset, limit: int = max(KS), track: Tracker = quiet) -> SystemRun:
    """Okapi BM25 over each conversation's turns (the same texts ZMem stores)."""
    run = SystemRun("bm25")
    started = time.perf_counter()
    indexes = [bm25.BM25([t.content for t in c.turns]) for c in data.conversations]
    run.ingest_s = time.perf_counter() - started
    jobs = [
        (c, i, q) for c, i in zip(data.conversations, indexes, strict=True) for q in c.questions
    ]
    for conv, index, question in track(jobs, "bm25", total=len(jobs)):
        started = time.perf_counter()
        ranked = index.rank(question.text, limit)
        run.query_ms.append((time.perf_counter() - started) * 1000.0)
        run.returned.append(len(ranked))
        run.rows.append(score(question, [frozenset({conv.turns[i].dia_id}) for i in ranked]))
    run.counters.update(turns=data.turns, k1=bm25.K1, b=bm25.B)
    return run


# ---- the report ------------------------------------------------------------------------------


def report(data: Dataset, runs: Sequence[SystemRun], source: str | Path) -> dict[str, Any]:
    return {
        "benchmark": "locomo-retrieval",
        "input": {"path": str(source), "sha256": data.sha256},
        "ks": list(KS),
        "conversations": len(data.conversations),
        "turns": data.turns,
        "questions": data.questions_total,
        "kept_questions": data.questions_total - data.dropped,
        "dropped_questions": {
            "total": data.dropped,
            "no_evidence_token": data.dropped_no_evidence,
            "evidence_not_in_dialog": data.dropped_unresolved,
        },
        "partially_resolved_questions": data.partially_resolved,
        "unresolved_evidence_ids": data.unresolved_ids,
        "reference": {
            "dragon_turn_recall_all_ten": {str(k): v for k, v in DRAGON_TURN_RECALL.items()}
        },
        "runs": {r.name: r.to_dict() for r in runs},
    }


def format_table(doc: dict[str, Any]) -> str:
    """A short plain-text view of a report: one line per system, scope and category."""
    head = (
        f"LoCoMo retrieval: {doc['conversations']} conversations, {doc['turns']} turns, "
        f"{doc['kept_questions']}/{doc['questions']} questions kept "
        f"({doc['dropped_questions']['total']} dropped)"
    )
    ks = "".join(f"{'R@' + str(k):>8}" for k in KS)
    lines = [head, f"{'system':<7}{'scope':<9}{'questions':<16}{'n':>5}{ks}"]
    for name, run in doc["runs"].items():
        blocks = [("all", run["all"]), ("1-4", run["no_adversarial"])]
        blocks += [(f"{c} {b['name']}", b) for c, b in run["by_category"].items()]
        for scope in ("turn", "session"):
            for label, block in blocks:
                vals = "".join(_cell(block[f"{scope}_recall"][str(k)]) for k in KS)
                lines.append(f"{name:<7}{scope:<9}{label:<16}{block['n']:>5}{vals}")
        extra = f"ingest {run['ingest_s']:.2f} s, query p50 {run['query_ms']['p50']} ms"
        extra += f" p95 {run['query_ms']['p95']} ms"
        if "deduped_turns" in run:
            extra += f", deduped turns {run['deduped_turns']}"
        lines.append(f"{name:<7}{extra}")
    return "\n".join(lines)


def _cell(value: float | None) -> str:
    return f"{'-':>8}" if value is None else f"{value:>8.3f}"


def run_benchmark(
    source: str | Path,
    *,
    systems: Sequence[str] = ("zmem",),
    track: Tracker = quiet,
    **zmem_options: Any,
) -> dict[str, Any]:
    """Load, run the named systems ("zmem", "bm25") and return the JSON report."""
    data = load(source)
    runners: dict[str, Callable[[], SystemRun]] = {
        "zmem": lambda: run_zmem(data, track=track, **zmem_options),
        "bm25": lambda: run_bm25(data, track=track),
    }
    return report(data, [runners[name]() for name in systems], source)
