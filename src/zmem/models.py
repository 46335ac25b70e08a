"""Frozen value objects that cross layer boundaries: memories, links, entities, episodes and the
result records of writes. No I/O here; the closed vocabularies of the schema live here too so
every surface validates against one source."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from zmem.namespace_keys import GLOBAL_NAMESPACE, fold_namespace_case  # noqa: F401 (re-exported)

MEMORY_TYPES = ("fact", "lesson", "convention", "preference", "decision", "constraint")
SIGNALS = ("test", "compile", "lint", "reviewer", "user", "none")
GROUNDED_SIGNALS = ("test", "compile", "lint", "reviewer", "user")
# Ordered by rank: a merge keeps the worst (highest index).
TAINTS = ("trusted_internal", "untrusted_tool", "untrusted_web")
LINK_RELATIONS = ("related", "supports", "contradicts", "updates", "extends", "derives")
SYMMETRIC_RELATIONS = ("related", "supports", "contradicts")
ENTITY_KINDS = ("person", "project", "tool", "preference", "other")

SIGNAL_CONFIDENCE = {
    "test": 0.9,
    "compile": 0.9,
    "lint": 0.85,
    "reviewer": 0.6,
    "user": 0.6,
    # Deliberately below the 0.25 recall floor: an ungrounded lesson is self-opinion.
    "none": 0.2,
}


MAX_CONTENT_CHARS = 65536
MAX_NAMESPACE_CHARS = 200
MAX_TAG_CHARS = 100
# The most rows one read may ask for (--limit, --global-limit, --link-budget, --k, --batch): far
# beyond any useful answer, and far inside SQLite's 64-bit integers, which a larger number
# overflows before any check could run.
MAX_LIMIT = 100_000
# The largest count a record may carry (retrievals, surfaces, feedback, an episode's tokens):
# exact in every JSON reader (a double's integer range) and far below SQLite's 64-bit limit,
# so no bump ever turns a count into a REAL that another machine's ingest would refuse.
MAX_COUNT = 2**53 - 1
# How far ahead of this machine's clock a recorded time may be (clocks drift; a day is
# generous): a time past it would sort as newest forever and is refused at every boundary.
CLOCK_SKEW_S = 86_400
EARLIEST_INSTANT = "1970-01-01T00:00:00.000000Z"  # the stored shape: times compare as text

# Tags the system itself sets; they describe one row's capture and never spread to neighbours.
INJECTION_TAG = "prompt-injection-risk"
REDACTED_TAG = "auto-redacted"
SYSTEM_TAGS = frozenset({INJECTION_TAG, REDACTED_TAG})

TRUST_CONTRADICTION_DELTA = -0.10
TRUST_CORROBORATION_DELTA = 0.05
# The second violation of a lesson (violated_count 1 -> 2) costs it this much trust, once.
TRUST_VIOLATION_FLOOR_DROP = 0.15
FEEDBACK_VERDICTS = ("applied", "violated")


def worst_taint(*taints: str) -> str:
    return max(taints, key=TAINTS.index)


def clamp_trust(value: float) -> float:
    # Rounded so ten -0.10 events land at exactly 0.0 rather than a float residue.
    return round(min(1.0, max(0.0, value)), 6)


@dataclass(frozen=True)
class Memory:
    id: str
    content: str
    type: str
    tags: tuple[str, ...]
    namespace: str
    signal: str
    confidence: float
    taint: str
    trust_score: float
    source_ref: str | None
    source_hash: str | None
    ingestion_ts: str
    refreshed_at: str | None
    valid_from: str
    valid_until: str | None
    superseded_at: str | None
    supersede_reason: str | None
    update_of: str | None
    merged_from: tuple[str, ...]
    retrieval_count: int
    last_retrieved: str | None
    surfaced_count: int
    last_surfaced: str | None
    applied_count: int
    violated_count: int
    embedding_model: str | None
    embedded_at: str | None
    has_embedding: bool
    rowid: int = 0

    @classmethod
    def from_fields(cls, values: Sequence[Any]) -> Memory:
        """A Memory from every field's value in declaration order, already of the right type
        (a row read back from the store). The frozen dataclass __init__ sets 29 fields through
        object.__setattr__, ~10 us a row; recall builds ~200 rows per prompt. The result
        compares equal to the keyword-built one (tests/test_write_path.py)."""
        m = object.__new__(cls)
        m.__dict__.update(zip(_MEMORY_FIELDS, values, strict=True))
        return m

    @property
    def live(self) -> bool:
        return self.superseded_at is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "rowid": self.rowid,
            "content": self.content,
            "type": self.type,
            "tags": list(self.tags),
            "namespace": self.namespace,
            "signal": self.signal,
            "confidence": self.confidence,
            "taint": self.taint,
            "trust_score": self.trust_score,
            "source_ref": self.source_ref,
            "source_hash": self.source_hash,
            "ingestion_ts": self.ingestion_ts,
            "refreshed_at": self.refreshed_at,
            "valid_from": self.valid_from,
            "valid_until": self.valid_until,
            "superseded_at": self.superseded_at,
            "supersede_reason": self.supersede_reason,
            "update_of": self.update_of,
            "merged_from": list(self.merged_from),
            "retrieval_count": self.retrieval_count,
            "last_retrieved": self.last_retrieved,
            "surfaced_count": self.surfaced_count,
            "last_surfaced": self.last_surfaced,
            "applied_count": self.applied_count,
            "violated_count": self.violated_count,
            "embedding_model": self.embedding_model,
            "embedded_at": self.embedded_at,
            "has_embedding": self.has_embedding,
            "live": self.live,
        }


_MEMORY_FIELDS = tuple(f.name for f in fields(Memory))


@dataclass(frozen=True)
class Link:
    src: str
    dst: str
    relation: str
    score: float | None
    created_at: str

    def to_dict(self, viewpoint: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "src": self.src,
            "dst": self.dst,
            "relation": self.relation,
            "score": self.score,
            "created_at": self.created_at,
        }
        if viewpoint is not None:
            out["direction"] = "out" if self.src == viewpoint else "in"
            out["other"] = self.dst if self.src == viewpoint else self.src
        return out


@dataclass(frozen=True)
class Entity:
    id: str
    kind: str
    name: str
    aliases: tuple[str, ...] = ()
    links: int = 0

    def card(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "name": self.name}

    def to_dict(self) -> dict[str, Any]:
        return {**self.card(), "aliases": list(self.aliases), "links": self.links}


@dataclass(frozen=True)
class Episode:
    id: str
    namespace: str
    started_at: str
    ended_at: str | None
    token_count: int | None
    summary_memory_id: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "namespace": self.namespace,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "token_count": self.token_count,
            "summary_memory_id": self.summary_memory_id,
        }


@dataclass(frozen=True)
class WriteResult:
    """What add/update report: the spec's {"id", "result", "created_new", "warnings"}."""

    id: str
    result: str  # "stored" | "deduped"
    created_new: bool
    warnings: tuple[dict[str, Any], ...] = field(default=())
    # Ids the write linked to (related) or contradicted; informational for humans.
    related: tuple[str, ...] = ()
    contradicts: tuple[str, ...] = ()
    replaced: str | None = None
    # The judge's questions about the new row (capture.judge.question), closest first.
    reviews: tuple[dict[str, Any], ...] = ()

    def to_dict(self, include_created_new: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "result": self.result}
        if include_created_new:
            out["created_new"] = self.created_new
        out["warnings"] = [dict(w) for w in self.warnings]
        out["review"] = [dict(r) for r in self.reviews]
        return out


@dataclass(frozen=True)
class TombstoneResult:
    id: str
    superseded_at: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "superseded_at": self.superseded_at, "reason": self.reason}


@dataclass(frozen=True)
class MergePlan:
    """entity-merge's plan, printed as a dry run or applied with --confirm."""

    source: Entity
    target: Entity
    aliases_moved: tuple[str, ...]
    alias_collisions: tuple[str, ...]
    links_moved: int
    link_collisions: int
    applied: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "from": self.source.to_dict(),
            "to": self.target.to_dict(),
            "aliases_moved": list(self.aliases_moved),
            "alias_collisions": list(self.alias_collisions),
            "links_moved": self.links_moved,
            "link_collisions": self.link_collisions,
            "delete": self.source.id,
            "applied": self.applied,
        }


@dataclass(frozen=True)
class Origin:
    """Who wrote a row that came from the team hub (the hub checked the login), from which
    machine, and who retired it there; `mine` when the author is this store's own role."""

    author: str
    machine: str | None
    mine: bool
    retired_by: str | None = None
    retired_machine: str | None = None
    retired_at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "author": self.author,
            "machine": self.machine,
            "mine": self.mine,
            "retired_by": self.retired_by,
            "retired_machine": self.retired_machine,
            "retired_at": self.retired_at,
        }


@dataclass(frozen=True)
class Hit:
    """One recalled row and why it ranked: the composite score, its parts, the 1-based rank in
    each lane that found it, and the keys of rows that joined without matching (link
    neighbours, [PREVIOUSLY] lineage)."""

    memory: Memory
    score: float
    relevance: float
    rrf: float
    lanes: dict[str, int]
    effective_confidence: float
    stale_source: bool
    injection_risk: bool
    tier: str  # "namespace" (the queried tier, or every namespace when unscoped) or "global"
    entities: tuple[tuple[str, str, str], ...] = ()
    link_of: str | None = None
    link_relation: str | None = None
    link_score: float | None = None
    contested_link: bool = False
    unfold_of: str | None = None
    unfold_hop: int | None = None
    origin: Origin | None = None  # set for a row pulled from the team hub
    under_review: str | None = None  # a row this one may contradict (a pending question)

    @property
    def id(self) -> str:
        return self.memory.id

    @property
    def content(self) -> str:
        return self.memory.content

    @property
    def extra(self) -> bool:
        """Joined through a link or lineage rather than by matching the query."""
        return self.link_of is not None or self.unfold_of is not None

    def to_dict(self) -> dict[str, Any]:
        out = self.memory.to_dict()
        out.update(
            score=round(self.score, 6),
            relevance=round(self.relevance, 6),
            rrf=round(self.rrf, 6),
            lanes=dict(self.lanes),
            effective_confidence=self.effective_confidence,
            stale_source=self.stale_source,
            injection_risk=self.injection_risk,
            tier=self.tier,
            entities=[{"id": i, "kind": k, "name": n} for i, k, n in self.entities],
        )
        if self.link_of is not None:
            out.update(
                link_of=self.link_of,
                link_relation=self.link_relation,
                link_score=self.link_score,
                contested_link=self.contested_link,
            )
        if self.unfold_of is not None:
            out.update(unfold_of=self.unfold_of, unfold_hop=self.unfold_hop)
        if self.origin is not None:
            out["origin"] = self.origin.to_dict()
        return out
