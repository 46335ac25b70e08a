"""export-jsonl: one consistent snapshot of the store written as sync records, memories first
(insertion order, each with its outgoing links), then episodes and memberships. Only links and
memberships whose both ends are in the file are written, so the file is self-consistent."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import apsw

from zmem.db import sync as sync_db
from zmem.db.connect import read_snapshot
from zmem.sync.records import episode_record, membership_record, memory_record


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


def export(
    conn: apsw.Connection,
    write: Callable[[str], Any],
    *,
    namespace: str | None = None,
    include_superseded: bool = False,
) -> dict[str, int]:
    counts = {"memories": 0, "links": 0, "episodes": 0, "memberships": 0}
    with read_snapshot(conn):
        rows = list(sync_db.export_rows(conn, namespace, include_superseded))
        ids = {m.id for m in rows}
        links = sync_db.outgoing_links(conn, [m.id for m in rows])
        for m in rows:
            kept = [k for k in links.get(m.id, ()) if k.dst in ids]
            write(_line(memory_record(m, kept)))
            counts["memories"] += 1
            counts["links"] += len(kept)
        episodes = sync_db.export_episodes(conn, namespace)
        for e in episodes:
            if e.summary_memory_id not in ids:
                # A summary row outside the file would dangle on the receiving side.
                e = dataclasses.replace(e, summary_memory_id=None)
            write(_line(episode_record(e)))
            counts["episodes"] += 1
        for episode_id, memory_id, added_at in sync_db.memberships(conn, [e.id for e in episodes]):
            if memory_id in ids:
                write(_line(membership_record(episode_id, memory_id, added_at)))
                counts["memberships"] += 1
    return counts
