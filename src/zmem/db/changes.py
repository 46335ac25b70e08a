"""What a store changed in some namespaces since its last push to the team hub, read without the
store's library: whether a row came after a rid, and the counts a push compares (tombstones,
links, episodes, closes, memberships: none is ever deleted or undone, so an unchanged count
means nothing new). A sync with nothing new (issue 47) reads only these, on a read-only
connection; a push reads them too. No model or vector import: a leaf of db/."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import apsw


def open_read_only(path: Path | str) -> apsw.Connection:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    conn.setbusytimeout(5_000)
    return conn


def _in(namespaces: Sequence[str]) -> str:
    return ",".join("?" * len(namespaces))


def rows_after(
    conn: apsw.Connection, after_rid: int, namespaces: Sequence[str], limit: int
) -> list[tuple[str, int]]:
    """(id, 1 if tombstoned) of the rows of these namespaces (live or not) after `after_rid`,
    in rid order, at most `limit`: what the next push would look at."""
    if not namespaces:
        return []
    return [(r[0], r[1]) for r in conn.execute(
        "SELECT id, superseded_at IS NOT NULL FROM memory WHERE rid > ? AND namespace IN "
        f"({_in(namespaces)}) ORDER BY rid LIMIT ?",
        (after_rid, *namespaces, limit),
    )]  # fmt: skip


def tombstone_count(conn: apsw.Connection, namespaces: Sequence[str]) -> int:
    """Tombstoned rows of these namespaces (tombstones are never undone, rows never deleted)."""
    if not namespaces:
        return 0
    return conn.execute(
        f"SELECT count(*) FROM memory WHERE namespace IN ({_in(namespaces)}) "
        "AND superseded_at IS NOT NULL",
        tuple(namespaces),
    ).fetchone()[0]


def graph_counts(conn: apsw.Connection, namespaces: Sequence[str]) -> tuple[int, int, int, int]:
    """(links, episodes, closed episodes, memberships): links and memberships are never
    deleted, an episode closes once, so an unchanged count means nothing new."""
    links = conn.execute("SELECT count(*) FROM memory_link").fetchone()[0]
    members = conn.execute("SELECT count(*) FROM episode_memory").fetchone()[0]
    if not namespaces:
        return links, 0, 0, members
    episodes, closed = conn.execute(
        f"SELECT count(*), count(ended_at) FROM episode WHERE namespace IN ({_in(namespaces)})",
        tuple(namespaces),
    ).fetchone()
    return links, episodes, closed, members
