"""What a read asks for and what it gives back: RecallRequest (the one place the recall, search
and recent options are spelled out, validated before any read), the tiers it is planned into,
the RecallReport every front end renders, and the tracer --explain turns on. Every user of
these imports them from here, downward."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from zmem import config
from zmem.db.recall import Scope
from zmem.errors import UsageError
from zmem.models import MAX_LIMIT, Hit
from zmem.retrieval import fusion
from zmem.retrieval.query import is_change_intent

KINDS = ("recall", "search", "recent")
# A limit a caller leaves out: search lists more rows than recall injects.
DEFAULT_LIMITS = {"recall": 5, "search": 10, "recent": 5}


@dataclass(frozen=True)
class RecallRequest:
    """One read. `passive` is the injected surface (hooks, Hermes prefetch, `--no-bump`): it
    records a surface event instead of a retrieval, omits injection-risk and untrusted-web rows
    and binds the token budget. Build it with `explicit()` or `prefetch()` (or directly)."""

    query: str = ""
    kind: str = "recall"  # recall | search | recent
    namespace: str | None = None
    limit: int | None = None  # None: DEFAULT_LIMITS[kind]
    include_global: bool = False
    global_limit: int = 3
    as_of: str | None = None  # any ISO-8601 instant; stored in the canonical shape
    passive: bool = False
    hybrid: bool | None = None  # None: hybrid when the store can embed the query
    dense_only: bool = False  # evaluation: the vector lane alone
    no_mmr: bool = False
    link_hops: int = 1
    link_budget: int = 2
    no_unfold: bool = False
    min_confidence: float | None = None  # None: the kind's floor from Settings
    # Composite weights: the shipped ones unless tune-weights is evaluating alternatives.
    weights: fusion.Weights = fusion.DEFAULT_WEIGHTS
    # False writes nothing at all: evaluation harnesses, and the hooks, which record a surface
    # event themselves for the rows their gate lets through.
    telemetry: bool = True
    # The explicit CLI recall may re-order with the optional cross-encoder (ZMEM_CROSS_ENCODER).
    rerank: bool = False
    # A query a session asks again and again (a pending tool call's file names or command): a
    # long-lived handle keeps its embedding for the next ask. Prompts carry the session's
    # newest ops tokens and seldom repeat, so they do not fill the memo.
    keep_vector: bool = False

    def __post_init__(self) -> None:
        # Every surface (CLI, hooks, MCP, Hermes, Python) meets the same refusals, before any
        # read. __post_init__ runs again on dataclasses.replace: each step is idempotent.
        instant = config.normalize_instant(self.as_of) if self.as_of else None
        object.__setattr__(self, "as_of", instant)
        if self.kind not in KINDS:
            raise UsageError(f"unknown read kind {self.kind!r}")
        if self.limit is None:
            object.__setattr__(self, "limit", DEFAULT_LIMITS[self.kind])
        if self.kind == "search":
            # Search is the ranking alone: no links, no lineage, and no confidence floor (it is
            # how an operator finds the ungrounded rows recall deliberately hides).
            object.__setattr__(self, "link_hops", 0)
            object.__setattr__(self, "link_budget", 0)
            object.__setattr__(self, "no_unfold", True)
            object.__setattr__(self, "min_confidence", 0.0)
        if self.namespace is not None and not self.namespace.strip():
            raise UsageError("--namespace must not be empty")
        if not 1 <= self.limit <= MAX_LIMIT:
            raise UsageError(f"--limit must be between 1 and {MAX_LIMIT}")
        if not 0 <= self.global_limit <= MAX_LIMIT:
            raise UsageError(f"--global-limit must be between 0 and {MAX_LIMIT}")
        if self.link_hops not in (0, 1):
            raise UsageError("--link-hops must be 0 or 1 (expansion is one hop at most)")
        if not 0 <= self.link_budget <= MAX_LIMIT:
            raise UsageError(f"--link-budget must be between 0 and {MAX_LIMIT}")
        if self.min_confidence is not None and not 0.0 <= self.min_confidence <= 1.0:
            raise UsageError("--min-confidence must be between 0 and 1")
        if self.kind != "recent" and not self.query.strip():
            raise UsageError("the query is empty")
        try:
            self.query.encode("utf-8")
        except UnicodeEncodeError:  # bytes that were not UTF-8, smuggled in as surrogates
            raise UsageError("the query is not valid UTF-8 text") from None

    @classmethod
    def explicit(cls, query: str, **options: Any) -> RecallRequest:
        """Someone asked (CLI recall/search, MCP recall/search): retrievals are counted, every
        row is shown with its provenance prefixes, change-intent lineage may unfold."""
        return cls(query=query, passive=False, **options)

    @classmethod
    def prefetch(cls, query: str = "", **options: Any) -> RecallRequest:
        """The passive shape (hooks, Hermes prefetch): global tier included, nothing written;
        the caller records a surface event for the rows it actually shows."""
        options.setdefault("include_global", True)
        options.setdefault("telemetry", False)
        return cls(query=query, passive=True, **options)

    @property
    def unfolds(self) -> bool:
        """Lineage unfold runs only on an explicit change-intent recall that walks links."""
        return (
            self.kind == "recall"
            and not self.passive
            and not self.no_unfold
            and self.link_hops >= 1
            and is_change_intent(self.query)
        )

    def floor(self, settings: config.Settings) -> float:
        if self.min_confidence is not None:
            return self.min_confidence
        if self.kind == "recent":
            return settings.inject_floor_recent
        return settings.inject_floor_prompt

    def explain_settings(self, hybrid: bool, ranker: str = "fusion") -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "limit": self.limit,
            "include_global": self.include_global,
            "global_limit": self.global_limit,
            "no_mmr": self.no_mmr,
            "passive": self.passive,
            "as_of": self.as_of,
            "hybrid": hybrid,
            "ranker": ranker,
        }


@dataclass
class TraceEntry:
    """What happened to one candidate: the closed explain reason and the numbers behind it."""

    id: str
    reason: str
    tier: str
    score: float | None = None
    rank: int | None = None
    lanes: dict[str, int] = field(default_factory=dict)
    detail: dict[str, Any] = field(default_factory=dict)


class Tracer:
    """Collects one TraceEntry per candidate for --explain. Off (NO_TRACE, what every other
    read passes) it holds nothing and the pipeline builds no entry: every call site checks
    `on` first."""

    def __init__(self, on: bool = False):
        self.on = on
        self.entries: dict[str, TraceEntry] = {}

    def add(self, entry: TraceEntry) -> None:
        self.entries[entry.id] = entry


NO_TRACE = Tracer()


@dataclass
class Tier:
    name: str
    scope: Scope
    limit: int


@dataclass
class RecallReport:
    hits: list[Hit]
    omitted: int = 0
    omitted_injection: int = 0
    omitted_untrusted_web: int = 0
    omitted_distrusted: int = 0  # written by a team member `zmem hub distrust` names
    pool: int = 0  # candidates the lanes returned, before any filter
    hybrid: bool = False
    # What ordered the candidates: "learned" (the shipped ranker, issue 51) or "fusion" (the
    # hand-set relevance: a lexical read, another embedding model, no weights file).
    ranker: str = "fusion"
    tiers: list[Tier] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    trace: dict[str, TraceEntry] = field(default_factory=dict)  # filled when explain traced
    tokens_used: int = 0
    tokens_budget: int = 0
    budget_dropped: int = 0

    def omit(self, reason: str) -> None:
        self.omitted += 1
        if reason == "omitted_injection":
            self.omitted_injection += 1
        elif reason == "omitted_distrusted":
            self.omitted_distrusted += 1
        else:
            self.omitted_untrusted_web += 1

    @property
    def matched(self) -> list[Hit]:
        return [h for h in self.hits if not h.extra]
