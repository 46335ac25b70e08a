"""What the team hub holds (issue 32), pure: the body of each shared object in the sync record
shape (a memory without the store-local usage counters, a link, an episode, a membership), its
key, and the merge that decides a row's state when two machines wrote it. The merge is
commutative, associative and idempotent, so every machine and the hub end in the same state
whatever order the syncs ran in (docs/decisions.md, "The team hub"): a row's identity and
content never change, a tombstone always wins (the earliest one), links and memberships only
accumulate, and an episode closes once."""

from __future__ import annotations

from typing import Any

from zmem.db import hub as hubdb
from zmem.models import Episode, Link, Memory
from zmem.sync.records import episode_record, membership_record, memory_record

KINDS = hubdb.KINDS
# What a machine's own reading of its memories changes: popularity and usage feedback stay on
# the machine that saw them (a pulled row starts at zero there).
_LOCAL = {
    "retrieval_count": 0, "surfaced_count": 0, "applied_count": 0, "violated_count": 0,
    "last_retrieved": None, "last_surfaced": None,
}  # fmt: skip
_TOMBSTONE = ("superseded_at", "valid_until", "supersede_reason")


def memory_body(m: Memory) -> dict[str, Any]:
    body = memory_record(m, [])
    body.pop("links", None)
    body.update(_LOCAL)
    return body


def link_key(src: str, dst: str, relation: str) -> str:
    return f"{src}>{dst}>{relation}"


def link_body(k: Link) -> dict[str, Any]:
    return {"kind": "link", "src": k.src, "dst": k.dst, "relation": k.relation,
            "score": k.score, "created_at": k.created_at}  # fmt: skip


def episode_body(e: Episode) -> dict[str, Any]:
    return episode_record(e)


def membership_key(episode_id: str, memory_id: str) -> str:
    return f"{episode_id}/{memory_id}"


def membership_body(episode_id: str, memory_id: str, added_at: str) -> dict[str, Any]:
    return membership_record(episode_id, memory_id, added_at)


def state_of(kind: str, body: dict[str, Any]) -> int:
    """1 once a memory is tombstoned or an episode closed: states only ever go up."""
    if kind == "memory":
        return int(body.get("superseded_at") is not None)
    if kind == "episode":
        return int(body.get("ended_at") is not None)
    return 0


def _earliest(a: Any, b: Any) -> Any:
    present = [x for x in (a, b) if x is not None]
    return min(present) if present else None


def merge(kind: str, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The hub's state of one object after `new` was pushed onto `old`."""
    if kind == "memory":
        out = dict(old)  # a row's identity and content never change: the first one stays
        tombs = [b for b in (old, new) if b.get("superseded_at") is not None]
        if tombs:  # the earliest tombstone, the same whichever came first
            first = min(tombs, key=lambda b: tuple(str(b.get(k) or "") for k in _TOMBSTONE))
            out.update({k: first.get(k) for k in _TOMBSTONE})
        return out
    if kind == "link":
        scores = [s for s in (old.get("score"), new.get("score")) if s is not None]
        return {**old, "score": max(scores) if scores else None,
                "created_at": _earliest(old.get("created_at"), new.get("created_at"))}  # fmt: skip
    if kind == "episode":
        closes = [b for b in (old, new) if b.get("ended_at") is not None]
        out = dict(old)
        out["started_at"] = _earliest(old.get("started_at"), new.get("started_at"))
        if closes:
            first = min(closes, key=lambda b: (b["ended_at"], str(b.get("summary_memory_id"))))
            for k in ("ended_at", "token_count", "summary_memory_id"):
                out[k] = first.get(k)
        return out
    return {**old, "added_at": _earliest(old.get("added_at"), new.get("added_at"))}
