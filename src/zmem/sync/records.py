"""The Tier 3 sync JSONL format: one record per line, a `kind` discriminator ("memory",
"episode", "episode_memory"; a missing kind is a memory, as legacy files wrote them), and the
validation that turns one parsed line into a record or a one-line reason. Pure: no store."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from zmem.capture.namespaces import validate_namespace
from zmem.config import format_instant, normalize_instant, parse_instant
from zmem.errors import ZMemError
from zmem.models import (
    CLOCK_SKEW_S,
    EARLIEST_INSTANT,
    LINK_RELATIONS,
    MAX_COUNT,
    MEMORY_TYPES,
    SIGNALS,
    TAINTS,
    Episode,
    Link,
    Memory,
)

KINDS = ("memory", "episode", "episode_memory")
# Exported ids are UUIDs; other writers' ids are accepted when they are this plain (lowercase,
# as `get` and every id-taking command look ids up).
_ID = re.compile(r"^[a-z0-9][a-z0-9._:-]{0,127}$")
_TIMES = (
    "ingestion_ts", "refreshed_at", "valid_from", "valid_until", "superseded_at",
    "last_retrieved", "last_surfaced",
)  # fmt: skip
_COUNTERS = ("retrieval_count", "surfaced_count", "applied_count", "violated_count")


class BadRecord(ValueError):
    """One line's reason for being refused; the caller adds the line number."""


# ---- writing -----------------------------------------------------------------------------


def memory_record(m: Memory, links: list[Link]) -> dict[str, Any]:
    """A row as export-jsonl writes it: every stored field but the store-local derived ones
    (vector, its model and time, the dedup norm, entity links), plus its outgoing links."""
    out = m.to_dict()
    for local in ("rowid", "embedding_model", "embedded_at", "has_embedding", "live"):
        out.pop(local, None)
    out["links"] = [
        {"dst": k.dst, "relation": k.relation, "score": k.score, "created_at": k.created_at}
        for k in links
    ]
    return {"kind": "memory", **out}


def episode_record(e: Episode) -> dict[str, Any]:
    return {
        "kind": "episode",
        "id": e.id,
        "namespace": e.namespace,
        "started_at": e.started_at,
        "ended_at": e.ended_at,
        "token_count": e.token_count,
        "summary_memory_id": e.summary_memory_id,
    }


def membership_record(episode_id: str, memory_id: str, added_at: str) -> dict[str, Any]:
    return {
        "kind": "episode_memory",
        "episode_id": episode_id,
        "memory_id": memory_id,
        "added_at": added_at,
    }


# ---- reading -----------------------------------------------------------------------------


@dataclass
class MemoryRecord:
    line: int
    fields: dict[str, Any]  # Memory's fields, validated; content/tags before the policy
    links: list[dict[str, Any]] = field(default_factory=list)
    bad_links: list[str] = field(default_factory=list)
    # Set by sync.prepare after the capture policy: what the writer needs without recomputing.
    norm: str = ""  # similarity_norm of a live row's content
    mentions: tuple[Any, ...] = ()  # extract_entities(content, tags)
    redacted: bool = False
    secret_warning: bool = False  # kept verbatim (manual / reviewed) though it looks secret
    injection: bool = False


@dataclass
class EpisodeRecord:
    line: int
    episode: Episode


@dataclass
class MembershipRecord:
    line: int
    episode_id: str
    memory_id: str
    added_at: str


def kind_of(obj: dict[str, Any]) -> str:
    kind = obj.get("kind", "memory")
    if kind not in KINDS:
        raise BadRecord(f"unknown kind {kind!r} (expected one of: {', '.join(KINDS)})")
    return kind


def parse(obj: Any, line: int, now: str) -> MemoryRecord | EpisodeRecord | MembershipRecord:
    if not isinstance(obj, dict):
        raise BadRecord("not a JSON object")
    kind = kind_of(obj)
    latest = _latest(now)
    if kind == "episode":
        return _episode(obj, line, latest)
    if kind == "episode_memory":
        return MembershipRecord(
            line,
            _id(obj.get("episode_id"), "episode_id"),
            _id(obj.get("memory_id"), "memory_id"),
            _time(obj.get("added_at"), "added_at", latest) or now,
        )
    return _memory(obj, line, now, latest)


def _latest(now: str) -> str:
    """The latest time a record may carry: this machine's clock plus CLOCK_SKEW_S."""
    return format_instant(parse_instant(now) + timedelta(seconds=CLOCK_SKEW_S))


def _memory(obj: dict[str, Any], line: int, now: str, latest: str) -> MemoryRecord:
    content = obj.get("content")
    if not isinstance(content, str):
        raise BadRecord("content is missing or not text")
    namespace = obj.get("namespace")
    if not isinstance(namespace, str):
        raise BadRecord("namespace is missing or not text")
    try:
        # The add path's guard: a near-miss of user:global would strand the row.
        validate_namespace(namespace)
    except ZMemError as exc:
        raise BadRecord(str(exc)) from None
    type_ = _enum(obj.get("type"), MEMORY_TYPES, "type")
    signal = _enum(obj.get("signal", "none"), SIGNALS, "signal")
    taint = obj.get("taint")
    if taint is not None:
        _enum(taint, TAINTS, "taint")
    tags = obj.get("tags", [])
    if isinstance(tags, str):
        tags = [t for t in tags.split(",") if t.strip()]
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise BadRecord("tags must be a list of strings")
    fields: dict[str, Any] = {
        "id": _id(obj.get("id"), "id"),
        "content": content,
        "namespace": namespace,
        "type": type_,
        "signal": signal,
        "taint": taint,
        "tags": tags,
        "confidence": _unit(obj.get("confidence"), "confidence"),
        # Pre-v11 files have no trust_score: 1.0. One that is present must be a real number.
        "trust_score": _unit(obj.get("trust_score", 1.0), "trust_score"),
        "source_ref": _opt_text(obj.get("source_ref"), "source_ref"),
        "source_hash": _opt_text(obj.get("source_hash"), "source_hash"),
        "supersede_reason": _opt_text(obj.get("supersede_reason"), "supersede_reason"),
        "update_of": None if obj.get("update_of") is None else _id(obj["update_of"], "update_of"),
        "merged_from": _merged_from(obj.get("merged_from", [])),
    }
    for name in _TIMES:
        fields[name] = _time(obj.get(name), name, latest)
    fields["ingestion_ts"] = fields["ingestion_ts"] or now
    fields["valid_from"] = fields["valid_from"] or fields["ingestion_ts"]
    if fields["superseded_at"] is None and fields["valid_until"] is not None:
        # A live row with an end of validity is how `invalidate` never leaves one.
        raise BadRecord("valid_until is set on a row that is not superseded")
    if fields["valid_until"] is not None and fields["valid_until"] < fields["valid_from"]:
        raise BadRecord("valid_until is earlier than valid_from")
    for name in _COUNTERS:
        fields[name] = _count(obj.get(name, 0), name)
    record = MemoryRecord(line, fields)
    raw_links = obj.get("links", [])
    if not isinstance(raw_links, list):
        raise BadRecord("links must be a list")
    for i, link in enumerate(raw_links, 1):
        try:
            record.links.append(_link(link, fields["id"], latest))
        except BadRecord as exc:
            record.bad_links.append(f"link {i}: {exc}")
    return record


def parse_link(obj: Any, now: str) -> dict[str, Any]:
    """A link that travels on its own (a hub object): its source id checked as an id, then
    the fields an export's embedded link carries."""
    if not isinstance(obj, dict):
        raise BadRecord("not a JSON object")
    src = _id(obj.get("src"), "src")
    return {"src": src, **_link(obj, src, _latest(now))}


def _link(obj: Any, src: str, latest: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise BadRecord("not an object")
    dst = _id(obj.get("dst"), "dst")
    if dst == src:
        raise BadRecord("links the row to itself")
    relation = _enum(obj.get("relation"), LINK_RELATIONS, "relation")
    score = obj.get("score")
    if score is not None and (
        isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score)
    ):
        raise BadRecord("score must be a finite number or null")
    return {
        "dst": dst,
        "relation": relation,
        "score": None if score is None else float(score),
        "created_at": _time(obj.get("created_at"), "created_at", latest),
    }


def _episode(obj: dict[str, Any], line: int, latest: str) -> EpisodeRecord:
    namespace = obj.get("namespace")
    if not isinstance(namespace, str) or not namespace.strip():
        raise BadRecord("namespace is missing or not text")
    try:
        validate_namespace(namespace)
    except ZMemError as exc:
        raise BadRecord(str(exc)) from None
    started = _time(obj.get("started_at"), "started_at", latest)
    if started is None:
        raise BadRecord("started_at is missing")
    ended = _time(obj.get("ended_at"), "ended_at", latest)
    if ended is not None and ended < started:
        raise BadRecord("ended_at is earlier than started_at")
    tokens = obj.get("token_count")
    if tokens is not None:
        tokens = _count(tokens, "token_count")
    summary = obj.get("summary_memory_id")
    return EpisodeRecord(
        line,
        Episode(
            id=_id(obj.get("id"), "id"),
            namespace=namespace,
            started_at=started,
            ended_at=ended,
            token_count=tokens,
            summary_memory_id=None if summary is None else _id(summary, "summary_memory_id"),
        ),
    )


def _id(value: Any, name: str) -> str:
    if not isinstance(value, str) or not _ID.match(value):
        raise BadRecord(f"{name} is missing or not a plain id")
    return value


def _enum(value: Any, allowed: tuple[str, ...], name: str) -> str:
    if value not in allowed:
        raise BadRecord(f"{name} {value!r} is not one of: {', '.join(allowed)}")
    return value


def _unit(value: Any, name: str) -> float | None:
    if value is None and name == "confidence":
        return None  # the signal's default, as add gives it
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise BadRecord(f"{name} {value!r} is not a finite number")
    if not 0.0 <= value <= 1.0:
        raise BadRecord(f"{name} {value!r} is not between 0 and 1")
    return float(value)


def _opt_text(value: Any, name: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise BadRecord(f"{name} must be text or null")
    return value


def _merged_from(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadRecord("merged_from must be a list of ids")
    return tuple(dict.fromkeys(value))


def _count(value: Any, name: str) -> int:
    if type(value) is not int or not 0 <= value <= MAX_COUNT:
        raise BadRecord(f"{name} must be an integer from 0 to {MAX_COUNT}")
    return value


def _time(value: Any, name: str, latest: str) -> str | None:
    """The instant in the store's one canonical shape. Stored times compare as text (--as-of,
    recency), so a file's "+00:00", naive or date-only time is normalized, never kept as
    written; an export of a store is already canonical and round-trips unchanged. A time
    before 1970 or past this machine's clock (plus a day of drift) is refused: it would sort
    before everything or as the newest row forever."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRecord(f"{name} must be an ISO-8601 time or null")
    try:
        instant = normalize_instant(value)
    except ZMemError:
        raise BadRecord(f"{name} {value[:40]!r} is not an ISO-8601 time") from None
    if instant > latest:
        raise BadRecord(f"{name} {value[:40]!r} is in the future (later than {latest})")
    if instant < EARLIEST_INSTANT:
        raise BadRecord(f"{name} {value[:40]!r} is before 1970")
    return instant
