"""The recall pipeline: per namespace tier, run the lanes inside the tier's scope, fuse them with
RRF, apply the effective-confidence floor, score, drop passive-unsafe rows, diversify with MMR and
cut to the limit; then join link neighbours and (explicit, change-intent) lineage. It only reads;
the store applies the telemetry writes afterwards, so --explain can run it with zero writes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import apsw

from zmem.config import Settings
from zmem.db import recall as db
from zmem.db.memories import namespace_aliases
from zmem.db.recall import Scope
from zmem.errors import UsageError
from zmem.models import GLOBAL_NAMESPACE, Hit
from zmem.retrieval import fusion, links
from zmem.retrieval import unfold as lineage
from zmem.retrieval.lanes import Lane, QueryPlan
from zmem.retrieval.mmr import Similarity, mmr_order
from zmem.retrieval.render import apply_token_budget, tokens_used
from zmem.retrieval.scoring import ScoringContext, passive_block, row_injection_risk

if TYPE_CHECKING:
    from zmem.retrieval.vector_cache import VectorCache

# Each lane fetches this deep before fusion: the pool --explain calls "over-fetch depth".
POOL_MIN = 50
POOL_PER_RESULT = 10
MMR_WINDOW_MIN = 20
MMR_WINDOW_PER_RESULT = 4
NAMESPACE_TIER = "namespace"
GLOBAL_TIER = "global"


@dataclass(frozen=True)
class RecallRequest:
    query: str
    namespace: str | None = None
    limit: int = 5
    include_global: bool = False
    global_limit: int = 3
    as_of: str | None = None  # already normalized to the canonical timestamp
    no_bump: bool = False
    hybrid: bool | None = None
    no_mmr: bool = False
    link_hops: int = 1
    link_budget: int = 2
    no_unfold: bool = False
    min_confidence: float | None = None
    # Composite weights: the shipped ones unless tune-weights is evaluating alternatives.
    weights: fusion.Weights = fusion.DEFAULT_WEIGHTS

    def __post_init__(self) -> None:
        # Every surface (CLI, hooks, MCP, Python) meets the same refusals, before any read.
        if self.namespace is not None and not self.namespace.strip():
            raise UsageError("--namespace must not be empty")
        if self.limit < 1:
            raise UsageError("--limit must be at least 1")
        if self.global_limit < 0:
            raise UsageError("--global-limit must not be negative")
        if self.link_hops not in (0, 1):
            raise UsageError("--link-hops must be 0 or 1 (expansion is one hop at most)")
        if self.link_budget < 0:
            raise UsageError("--link-budget must not be negative")
        if self.min_confidence is not None and not 0.0 <= self.min_confidence <= 1.0:
            raise UsageError("--min-confidence must be between 0 and 1")

    def explain_settings(self, hybrid: bool) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "limit": self.limit,
            "include_global": self.include_global,
            "global_limit": self.global_limit,
            "no_mmr": self.no_mmr,
            "no_bump": self.no_bump,
            "as_of": self.as_of,
            "hybrid": hybrid,
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
    pool: int = 0  # candidates the lanes returned, before any filter
    hybrid: bool = False
    tiers: list[Tier] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    trace: dict[str, TraceEntry] = field(default_factory=dict)
    tokens_used: int = 0
    tokens_budget: int = 0
    budget_dropped: int = 0

    def omit(self, reason: str) -> None:
        self.omitted += 1
        if reason == "omitted_injection":
            self.omitted_injection += 1
        else:
            self.omitted_untrusted_web += 1

    @property
    def matched(self) -> list[Hit]:
        return [h for h in self.hits if not h.extra]


def plan_tiers(conn: apsw.Connection, req: RecallRequest, floor: float) -> list[Tier]:
    """The queried namespace (with its migration aliases) first; user:global after it when asked
    for, with its own limit, so a global row never takes a project row's slot."""
    if req.namespace is None:
        return [Tier(NAMESPACE_TIER, Scope(None, req.as_of, floor), req.limit)]
    tiers = [
        Tier(
            NAMESPACE_TIER,
            Scope(tuple(namespace_aliases(conn, req.namespace)), req.as_of, floor),
            req.limit,
        )
    ]
    if req.include_global and req.namespace != GLOBAL_NAMESPACE and req.global_limit > 0:
        spaces = tuple(namespace_aliases(conn, GLOBAL_NAMESPACE))
        tiers.append(Tier(GLOBAL_TIER, Scope(spaces, req.as_of, floor), req.global_limit))
    return tiers


def _run_tier(
    ctx: ScoringContext,
    plan: QueryPlan,
    lanes: Sequence[Lane],
    tier: Tier,
    req: RecallRequest,
    floor: float,
    report: RecallReport,
) -> list[Hit]:
    depth = max(POOL_MIN, tier.limit * POOL_PER_RESULT)
    results = [lane.run(ctx.conn, plan, tier.scope, depth) for lane in lanes]
    fused = fusion.rrf(r.ranked for r in results)
    report.pool += len(fused)
    cands = db.fetch(ctx.conn, list(fused))
    positions = [(r.name, {rid: i for i, rid in enumerate(r.ranked, start=1)}) for r in results]
    ranks = {rid: {name: pos[rid] for name, pos in positions if rid in pos} for rid in cands}

    natives: dict[int, dict[str, float]] = {}
    for rid, cand in cands.items():
        native = {r.name: r.native[rid] for r in results if rid in r.native}
        if "fts" in native:
            native["coverage"] = fusion.coverage(plan.similarity_terms, cand.content_norm.split())
        natives[rid] = native
    e = fusion.query_coverage(natives.values())

    scored: dict[int, tuple[float, float, float, bool]] = {}  # rid -> score, rel, conf, stale
    for rid, cand in cands.items():
        m = cand.memory
        conf, stale = ctx.effective(m)
        if conf < floor:
            report.trace[m.id] = TraceEntry(
                m.id,
                "below_floor",
                tier.name,
                lanes=ranks[rid],
                detail={"confidence": conf, "floor": floor, "stale_source": stale},
            )
            continue
        rel = fusion.relevance(natives[rid], e)
        scored[rid] = (ctx.score(m, rel, conf), rel, conf, stale)

    order = sorted(scored, key=lambda rid: (-scored[rid][0], -fused[rid], -rid))

    # Only the head of the order can be presented; MMR looks this deep for alternatives.
    window = max(MMR_WINDOW_MIN, tier.limit * MMR_WINDOW_PER_RESULT)
    if req.no_bump:
        kept, checked = [], 0
        for pos, rid in enumerate(order):
            if len(kept) >= window:
                break  # the rest is below the limit whatever the filter says
            checked = pos + 1
            m = cands[rid].memory
            blocked = passive_block(m)
            if blocked is None:
                kept.append(rid)
                continue
            # Only rows that would have been presented count as omitted ("would have ranked").
            would_rank = pos < tier.limit
            if would_rank:
                report.omit(blocked)
            report.trace[m.id] = TraceEntry(
                m.id,
                blocked if would_rank else "below_limit",
                tier.name,
                score=scored[rid][0],
                lanes=ranks[rid],
                detail={"passive_filter": blocked},
            )
        order = kept + order[checked:]  # unchecked rows stay below the limit

    if not req.no_mmr and ctx.settings.mmr_lambda < 1.0:
        head = order[:window]
        sim = Similarity(
            {rid: cands[rid].content_norm for rid in head},
            {rid: cands[rid].embedding for rid in head},
        )
        head = mmr_order(
            head, {rid: scored[rid][0] for rid in head}, sim, ctx.settings.mmr_lambda, tier.limit
        )
        order = head + order[window:]

    hits = []
    for pos, rid in enumerate(order):
        m = cands[rid].memory
        score, rel, conf, stale = scored[rid]
        if pos >= tier.limit:
            report.trace[m.id] = TraceEntry(
                m.id, "below_limit", tier.name, score=score, rank=pos + 1, lanes=ranks[rid]
            )
            continue
        hits.append(
            Hit(
                memory=m,
                score=score,
                relevance=rel,
                rrf=fused[rid],
                lanes=ranks[rid],
                effective_confidence=conf,
                stale_source=stale,
                injection_risk=row_injection_risk(m),
                tier=tier.name,
            )
        )
    return hits


def run(
    conn: apsw.Connection,
    settings: Settings,
    req: RecallRequest,
    lanes: Sequence[Lane],
    *,
    hybrid: bool = False,
    expand_links: bool = True,
    unfold: bool = False,
    vector: bytes | None = None,
    similarity_scale: tuple[float, float] = (0.2, 0.55),
    vector_cache: VectorCache | None = None,
) -> RecallReport:
    """The whole read: tiers, link expansion, optional lineage unfold, entity cards."""
    if not req.query.strip():
        raise UsageError("the query is empty")
    floor = settings.inject_floor_prompt if req.min_confidence is None else req.min_confidence
    ctx = ScoringContext(conn, settings, req.as_of, req.weights)
    report = RecallReport(hits=[], hybrid=hybrid)
    report.tiers = plan_tiers(conn, req, floor)
    plan = QueryPlan(req.query, vector, similarity_scale, vector_cache)
    hits: list[Hit] = []
    for tier in report.tiers:
        hits += _run_tier(ctx, plan, lanes, tier, req, floor, report)

    if expand_links and req.link_hops >= 1 and req.link_budget > 0:
        hits += links.expand(ctx, hits, report.tiers, req, floor)
    if unfold:
        hits += lineage.unfold(ctx, hits, report.tiers)

    cards = db.entity_cards(conn, [h.id for h in hits])
    report.hits = [_with_cards(h, cards.get(h.id, [])) for h in hits]
    report.warnings = ctx.warnings
    _finish(report, settings, req)
    for rank, h in enumerate(report.hits, start=1):
        if not h.extra:
            report.trace[h.id] = TraceEntry(
                h.id, "found", h.tier, score=h.score, rank=rank, lanes=dict(h.lanes)
            )
    return report


def _finish(report: RecallReport, settings: Settings, req: RecallRequest) -> RecallReport:
    """The token budget binds passive (injected) surfaces; explicit reads only report usage."""
    report.tokens_budget = settings.inject_token_budget
    if req.no_bump:
        before = report.hits
        report.hits, report.budget_dropped = apply_token_budget(
            before, settings.inject_token_budget, explicit=False
        )
        kept = {h.id for h in report.hits}
        for h in before:
            if h.id not in kept and not h.extra:
                report.trace[h.id] = TraceEntry(
                    h.id,
                    "below_limit",
                    h.tier,
                    score=h.score,
                    lanes=dict(h.lanes),
                    detail={"token_budget": True},
                )
    report.tokens_used = tokens_used(report.hits, explicit=not req.no_bump)
    return report


RECENT_OVERFETCH = 4
RECENT_MAX_SCAN = 2000


def run_recent(conn: apsw.Connection, settings: Settings, req: RecallRequest) -> RecallReport:
    """Newest rows at or above the recent floor (0.5 unless --min-confidence), per tier."""
    floor = settings.inject_floor_recent if req.min_confidence is None else req.min_confidence
    ctx = ScoringContext(conn, settings, req.as_of)
    report = RecallReport(hits=[])
    report.tiers = plan_tiers(conn, req, floor)
    hits: list[Hit] = []
    for tier in report.tiers:
        page = tier.limit * RECENT_OVERFETCH + 20
        taken: list[Hit] = []
        offset = 0
        # Page on until the tier is full: a run of blocked (injection, web) or stale rows among
        # the newest must not leave a passive session start empty while eligible rows exist.
        while len(taken) < tier.limit:
            rows = db.recent(conn, tier.scope, page, offset)
            report.pool += len(rows)
            for m in rows:
                if ctx.effective(m)[0] < floor:
                    continue
                blocked = passive_block(m) if req.no_bump else None
                if blocked is not None:
                    report.omit(blocked)  # it was newer than what fills the tier
                    continue
                taken.append(ctx.unmatched_hit(m, tier.name))
                if len(taken) == tier.limit:
                    break
            offset += page
            if len(rows) < page or offset >= RECENT_MAX_SCAN:
                break  # the end of the tier, or a bound on a store that is mostly blocked
        hits += taken
    cards = db.entity_cards(conn, [h.id for h in hits])
    report.hits = [_with_cards(h, cards.get(h.id, [])) for h in hits]
    report.warnings = ctx.warnings
    return _finish(report, settings, req)


def _with_cards(h: Hit, cards: list[tuple[str, str, str]]) -> Hit:
    return replace(h, entities=tuple(cards))
