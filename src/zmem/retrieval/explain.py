"""The retrieval debugger behind recall --explain / --target: turn the pipeline's trace into
one verdict per row from a closed set of reasons, and account for target rows the trace never
saw (wrong namespace, superseded, outside the --as-of window, below the floor, not in the pool,
not in the store at all)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import apsw

from zmem.db import recall as db
from zmem.db.memories import ids_with_prefix, successor_of
from zmem.models import Memory
from zmem.retrieval.query import fts_expression, query_terms
from zmem.retrieval.request import RecallReport, RecallRequest
from zmem.tokens import content_tokens

EXPLAIN_REASONS = (
    "found",
    "below_limit",
    "below_floor",
    "omitted_injection",
    "omitted_untrusted_web",
    "omitted_distrusted",
    "namespace",
    "superseded",
    "not_valid_at_as_of",
    "vec_lane_miss",
    "not_in_pool",
    "not_in_db",
    "explain_unavailable",
)
TARGET_OVERLAP = 0.7
MAX_NEIGHBOURS = 5
_ID_SHAPE = re.compile(r"^[0-9a-f][0-9a-f-]{3,35}$")


@dataclass
class Verdict:
    id: str | None
    reason: str
    rank: int | None = None
    score: float | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        assert self.reason in EXPLAIN_REASONS, self.reason

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "reason": self.reason,
            "rank": self.rank,
            "score": None if self.score is None else round(self.score, 6),
            "detail": self.detail,
        }


def _overlap(terms: frozenset[str], content: str) -> float:
    return len(terms & content_tokens(content)) / len(terms) if terms else 0.0


def resolve_target(conn: apsw.Connection, target: str) -> tuple[list[str], list[dict[str, Any]]]:
    """Ids the target names: rows whose id starts with it (when it is id-shaped) together with
    rows containing it (case-insensitive), else rows sharing >= 70 % of its words. "5432" may
    be an id prefix and a port number: both kinds of match get a verdict, never a guess. The
    second value lists the nearest live rows when nothing matches."""
    text = target.strip()
    ids = ids_with_prefix(conn, text.lower(), 10) if _ID_SHAPE.match(text.lower()) else []
    ids += [i for i in db.ids_containing(conn, text) if i not in ids]
    if ids:
        return ids, []
    terms = query_terms(text)
    if not terms:
        return [], []
    wanted = frozenset(terms)
    rows = db.fts_any(conn, fts_expression(terms, "OR"), live_only=False, limit=200)
    ids = [i for i, content in rows if _overlap(wanted, content) >= TARGET_OVERLAP]
    if ids:
        return ids, []
    live = db.fts_any(conn, fts_expression(terms, "OR"), live_only=True, limit=200)
    ranked = sorted(live, key=lambda r: -_overlap(wanted, r[1]))[:MAX_NEIGHBOURS]
    return [], [{"id": i, "overlap": round(_overlap(wanted, c), 3)} for i, c in ranked]


def _lineage(conn: apsw.Connection, m: Memory, hops: int = 3) -> list[str]:
    chain = []
    current = m
    while current.update_of and len(chain) < hops:
        chain.append(current.update_of)
        previous = db.by_id(conn, current.update_of)
        if previous is None:
            break
        current = previous
    return chain


def _unseen(
    conn: apsw.Connection, m: Memory, req: RecallRequest, report: RecallReport, floor: float
) -> Verdict:
    """Why a row the trace never saw did not surface."""
    scoped = [t for t in report.tiers if t.scope.namespaces is not None]
    if len(scoped) == len(report.tiers) and not any(
        m.namespace in (t.scope.namespaces or ()) for t in scoped
    ):
        return Verdict(
            m.id,
            "namespace",
            detail={
                "namespace": m.namespace,
                "searched": [list(t.scope.namespaces or ()) for t in scoped],
            },
        )
    if req.as_of is not None:
        valid = m.valid_from <= req.as_of and (m.valid_until is None or m.valid_until > req.as_of)
        if not valid:
            return Verdict(
                m.id,
                "not_valid_at_as_of",
                detail={
                    "valid_from": m.valid_from,
                    "valid_until": m.valid_until,
                    "as_of": req.as_of,
                },
            )
        if report.hybrid and not m.live:
            return Verdict(m.id, "vec_lane_miss", detail={"superseded_at": m.superseded_at})
    elif not m.live:
        return Verdict(
            m.id,
            "superseded",
            detail={"superseded_at": m.superseded_at, "successor_id": successor_of(conn, m.id)},
        )
    if m.confidence < floor:
        return Verdict(m.id, "below_floor", detail={"confidence": m.confidence, "floor": floor})
    return Verdict(m.id, "not_in_pool", detail={"query_terms": query_terms(req.query)})


def verdicts(
    conn: apsw.Connection,
    req: RecallRequest,
    report: RecallReport,
    target: str | None,
    floor: float,
) -> list[Verdict]:
    """Without a target: one verdict per candidate the pipeline scored. With one: a verdict per
    row the target names, or a single not_in_db verdict with the nearest live rows."""
    if target is None:
        entries = sorted(
            report.trace.values(),
            key=lambda e: (e.reason != "found", e.rank or 10**9, -(e.score or 0.0)),
        )
        out = []
        for e in entries:
            v = Verdict(
                e.id, e.reason, e.rank, e.score, {"tier": e.tier, "lanes": e.lanes, **e.detail}
            )
            out.append(v)
        _add_lineage(conn, out)
        return out
    ids, neighbours = resolve_target(conn, target)
    if not ids:
        return [Verdict(None, "not_in_db", detail={"target": target, "neighbors": neighbours})]
    out = []
    for memory_id in ids:
        entry = report.trace.get(memory_id)
        if entry is not None:
            detail = {"tier": entry.tier, "lanes": entry.lanes, **entry.detail}
            out.append(Verdict(memory_id, entry.reason, entry.rank, entry.score, detail))
            continue
        m = db.by_id(conn, memory_id)
        if m is None:  # deleted between resolve and here
            out.append(Verdict(memory_id, "not_in_db", detail={"target": target, "neighbors": []}))
        else:
            out.append(_unseen(conn, m, req, report, floor))
    _add_lineage(conn, out)
    return out


def _add_lineage(conn: apsw.Connection, out: Sequence[Verdict]) -> None:
    # --explain never injects [PREVIOUSLY] rows; it names the chain a found row heads instead.
    for v in out:
        if v.reason == "found" and v.id is not None:
            m = db.by_id(conn, v.id)
            if m is not None and m.update_of:
                v.detail["previously"] = _lineage(conn, m)
