"""What a hub pull may apply (issue 47): every pulled object validated as ingest validates a sync
file, held to what the hub checked of it (its key, the namespace row level security admitted)
and to this store (an id naming a row, episode or link end of another namespace is refused,
never touched). What fails is returned with its reason for the quarantine; nothing here
writes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import apsw

from zmem.db import hub as hubdb
from zmem.db import memories
from zmem.db import sync as sync_db
from zmem.models import TAINTS, worst_taint
from zmem.sync import hub_records as rec
from zmem.sync import prepare, records

# What applying a page can raise because of what a row holds (a bug this screening missed):
# the row is quarantined. The store's own failures (busy, full, damaged) are not among them.
DATA_ERRORS = (
    ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError,
    UnicodeError, RecursionError, apsw.ConstraintError, apsw.MismatchError,
)  # fmt: skip


@dataclass
class Screened:
    row: hubdb.HubRow
    record: Any  # a prepared MemoryRecord / EpisodeRecord / MembershipRecord, or a link dict


class Screen:
    """What a pulled page may do here: each object validated as ingest validates a sync file
    (sync.records, the capture policy), then held to what the hub checked (its key, the
    namespace row level security admitted), then to this store (an id that names a row,
    episode or link end of another namespace is refused, never touched)."""

    def __init__(self, conn: apsw.Connection, role: str, now: str, capture_mode: str):
        self.conn, self.role, self.now, self.mode = conn, role, now, capture_mode

    def run(
        self, rows: Sequence[hubdb.HubRow]
    ) -> tuple[list[Screened], list[tuple[hubdb.HubRow, str]]]:
        good: list[Screened] = []
        bad: list[tuple[hubdb.HubRow, str]] = []
        parsed: dict[int, Any] = {}
        for n, r in enumerate(rows):
            try:
                problem = self._shape(r)
                if problem:
                    bad.append((r, problem))
                elif r.kind == "link":
                    parsed[n] = records.parse_link(r.body, self.now)
                else:
                    line = self._line(r)
                    ((_, status, record),) = prepare.prepare_chunk(
                        ([(n, line)], self.now, self.mode, None)
                    )
                    if status != "ok":
                        bad.append((r, str(record)))
                    else:
                        parsed[n] = record
            except records.BadRecord as exc:
                bad.append((r, str(exc)))
            except DATA_ERRORS as exc:
                bad.append((r, f"unreadable ({type(exc).__name__})"))
        local = self._local(rows, parsed)
        for n in sorted(parsed):
            r = rows[n]
            problem = self._identity(r, parsed[n], local)
            if problem:
                bad.append((r, problem))
            else:
                good.append(Screened(r, parsed[n]))
        return good, bad

    def _shape(self, r: hubdb.HubRow) -> str | None:
        if r.kind not in rec.KINDS:
            return f"unknown kind {str(r.kind)[:40]!r}"
        if not isinstance(r.body, dict):
            return f"the body is a JSON {type(r.body).__name__}, not an object"
        if r.namespace.startswith(hubdb.PERSONAL_PREFIX) and r.namespace != (
            hubdb.PERSONAL_PREFIX + self.role
        ):
            return "another member's personal namespace"
        if "kind" in r.body and r.body["kind"] != r.kind:
            return "the body's kind disagrees with the hub's"
        return None

    def _line(self, r: hubdb.HubRow) -> bytes:
        body = dict(r.body)
        if r.kind == "memory" and r.written_by != self.role:
            # Another member's row is screened like untrusted tool output, whatever taint the
            # pusher claimed; a row of this store's own role (another machine of its owner)
            # keeps its own.
            claimed = body.get("taint")
            body["taint"] = (
                worst_taint(claimed, "untrusted_tool")
                if claimed in TAINTS
                else ("untrusted_tool" if claimed is None else claimed)
            )
        return json.dumps({**body, "kind": r.kind}, ensure_ascii=False).encode("utf-8")

    def _local(self, rows: Sequence[hubdb.HubRow], parsed: dict[int, Any]) -> dict[str, Any]:
        """The local namespaces of every memory and episode id the page names."""
        mem_ids: set[str] = set()
        ep_ids: set[str] = set()
        for n, rec_ in parsed.items():
            kind = rows[n].kind
            if kind == "memory":
                f = rec_.fields
                mem_ids.update(x for x in (f["id"], f["update_of"]) if x)
            elif kind == "link":
                mem_ids.update((rec_["src"], rec_["dst"]))
            elif kind == "episode":
                ep_ids.add(rec_.episode.id)
                if rec_.episode.summary_memory_id:
                    mem_ids.add(rec_.episode.summary_memory_id)
            else:
                ep_ids.add(rec_.episode_id)
                mem_ids.add(rec_.memory_id)
        return {
            "memory": sync_db.namespaces_of(self.conn, sorted(mem_ids)),
            "episode": sync_db.episode_namespaces(self.conn, sorted(ep_ids)),
            "aliases": {},
        }

    def _same(self, local: dict[str, Any], here: str | None, ns: str) -> bool:
        """Whether a local namespace (None: not here) may be touched by an object of `ns`."""
        if here is None or here == ns:
            return True
        aliases = local["aliases"].get(ns)
        if aliases is None:
            aliases = local["aliases"][ns] = set(memories.namespace_aliases(self.conn, ns))
        return here in aliases

    def _identity(self, r: hubdb.HubRow, parsed: Any, local: dict[str, Any]) -> str | None:
        ns = hubdb.local_namespace(r.namespace)
        mem, eps = local["memory"], local["episode"]
        if r.kind == "memory":
            f = parsed.fields
            if f["id"] != r.key:
                return "the body's id disagrees with the hub's key"
            if f["namespace"] != ns:
                return f"the body says namespace {f['namespace'][:80]!r}, the hub {ns[:80]!r}"
            if not self._same(local, mem.get(f["id"]), ns):
                return "its id names a row of another namespace here"
            if f["update_of"] and not self._same(local, mem.get(f["update_of"]), ns):
                return "it revises a row of another namespace here"
        elif r.kind == "link":
            if rec.link_key(parsed["src"], parsed["dst"], parsed["relation"]) != r.key:
                return "the link disagrees with the hub's key"
            for end in (parsed["src"], parsed["dst"]):
                if not self._same(local, mem.get(end), ns):
                    return "it links a row of another namespace here"
        elif r.kind == "episode":
            e = parsed.episode
            if e.id != r.key:
                return "the body's id disagrees with the hub's key"
            if e.namespace != ns:
                return f"the body says namespace {e.namespace[:80]!r}, the hub {ns[:80]!r}"
            if not self._same(local, eps.get(e.id), ns):
                return "its id names an episode of another namespace here"
            if e.summary_memory_id and not self._same(local, mem.get(e.summary_memory_id), ns):
                return "its summary is a row of another namespace here"
        else:
            if rec.membership_key(parsed.episode_id, parsed.memory_id) != r.key:
                return "the membership disagrees with the hub's key"
            if not self._same(local, eps.get(parsed.episode_id), ns) or not self._same(
                local, mem.get(parsed.memory_id), ns
            ):
                return "it names an episode or row of another namespace here"
        return None
