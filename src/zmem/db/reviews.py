"""SQL over the review table: the pairs of notes the write-time judge asked about, pending
until someone answers (the agent that wrote, `zmem review`, the inspector), and the answers,
which keep an answered pair from being asked again."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import apsw


@dataclass(frozen=True)
class Review:
    new_id: str
    old_id: str
    namespace: str
    likely: str | None
    evidence: dict[str, Any]
    origin: str  # "write": an add or update returned it; "queue": no agent was there to ask
    created_at: str
    offered_at: str | None
    answer: str | None
    answered_at: str | None
    answered_by: str | None


# SQLite caps bound parameters per statement: a list of ids is read in chunks of this size.
_MAX_VARIABLES = 500

_COLUMNS = (
    "new_id, old_id, namespace, likely, evidence, origin, created_at, offered_at, answer, "
    "answered_at, answered_by"
)


def _review(row: Sequence[Any]) -> Review:
    try:
        evidence = json.loads(row[4])
    except (TypeError, ValueError):
        evidence = {}
    return Review(row[0], row[1], row[2], row[3], evidence if isinstance(evidence, dict) else {},
                  *row[5:])  # fmt: skip


def ask(
    conn: apsw.Connection,
    new_id: str,
    old_id: str,
    namespace: str,
    likely: str | None,
    evidence: dict[str, Any],
    origin: str,
    at: str,
) -> bool:
    """Record a question; False when this pair was already asked (answered or not)."""
    conn.execute(
        f"INSERT INTO review ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, NULL, NULL, NULL) "
        "ON CONFLICT (new_id, old_id) DO NOTHING",
        (new_id, old_id, namespace, likely, json.dumps(evidence, sort_keys=True), origin, at),
    )
    return conn.changes() == 1


def answered_pairs(conn: apsw.Connection, new_id: str, old_ids: Sequence[str]) -> set[str]:
    """Which of old_ids were already asked about together with new_id, either way round."""
    if not old_ids:
        return set()
    marks = ",".join("?" * len(old_ids))
    rows = conn.execute(
        f"SELECT old_id FROM review WHERE new_id = ? AND old_id IN ({marks}) "
        f"UNION SELECT new_id FROM review WHERE old_id = ? AND new_id IN ({marks})",
        (new_id, *old_ids, new_id, *old_ids),
    )
    return {r[0] for r in rows}


def among(conn: apsw.Connection, ids: Sequence[str]) -> dict[frozenset[str], str | None]:
    """{pair: its answer, None while pending} of every question whose two rows are both among
    `ids`: what consolidate must neither merge against nor ask again. By the primary key, a
    bounded chunk of ids per statement (a run reads up to 20,000 rows of a namespace)."""
    wanted = set(ids)
    out: dict[frozenset[str], str | None] = {}
    chunked = list(ids)
    for start in range(0, len(chunked), _MAX_VARIABLES):
        chunk = chunked[start : start + _MAX_VARIABLES]
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            f"SELECT new_id, old_id, answer FROM review WHERE new_id IN ({marks})", chunk
        )
        out.update({frozenset(r[:2]): r[2] for r in rows if r[1] in wanted})
    return out


def get(conn: apsw.Connection, new_id: str, old_id: str) -> Review | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM review WHERE new_id = ? AND old_id = ?", (new_id, old_id)
    ).fetchone()
    return _review(row) if row else None


def answer(
    conn: apsw.Connection, new_id: str, old_id: str, namespace: str, answer_: str, by: str, at: str
) -> None:
    """Record an answer, asked or not (a person may answer a pair nobody asked about)."""
    conn.execute(
        f"INSERT INTO review ({_COLUMNS}) "
        "VALUES (?, ?, ?, NULL, '{}', 'answer', ?, NULL, ?, ?, ?) "
        "ON CONFLICT (new_id, old_id) DO UPDATE SET answer = excluded.answer, "
        "answered_at = excluded.answered_at, answered_by = excluded.answered_by",
        (new_id, old_id, namespace, at, answer_, at, by),
    )


def forget(conn: apsw.Connection, new_id: str, old_id: str) -> None:
    conn.execute("DELETE FROM review WHERE new_id = ? AND old_id = ?", (new_id, old_id))


def pending(
    conn: apsw.Connection,
    namespaces: Sequence[str] | None = None,
    limit: int = 50,
    unoffered: bool = False,
) -> list[Review]:
    """Unanswered questions whose two rows are both still live, oldest first."""
    clause = ["r.answer IS NULL", "a.superseded_at IS NULL", "b.superseded_at IS NULL"]
    params: list[Any] = []
    if namespaces is not None:
        if not namespaces:
            return []
        clause.append(f"r.namespace IN ({','.join('?' * len(namespaces))})")
        params += list(namespaces)
    if unoffered:
        clause.append("r.offered_at IS NULL")
    rows = conn.execute(
        f"SELECT {', '.join('r.' + c for c in _COLUMNS.split(', '))} FROM review r "
        "JOIN memory a ON a.id = r.new_id JOIN memory b ON b.id = r.old_id "
        f"WHERE {' AND '.join(clause)} ORDER BY r.created_at, r.new_id, r.old_id LIMIT ?",
        (*params, limit),
    )
    return [_review(r) for r in rows]


def mark_offered(conn: apsw.Connection, pairs: Sequence[tuple[str, str]], at: str) -> None:
    conn.executemany(
        "UPDATE review SET offered_at = ? WHERE new_id = ? AND old_id = ?",
        [(at, n, o) for n, o in pairs],
    )


def count_pending(conn: apsw.Connection) -> int:
    row = conn.execute(
        "SELECT count(*) FROM review r JOIN memory a ON a.id = r.new_id "
        "JOIN memory b ON b.id = r.old_id WHERE r.answer IS NULL "
        "AND a.superseded_at IS NULL AND b.superseded_at IS NULL"
    ).fetchone()
    return int(row[0])


def pending_between(conn: apsw.Connection, ids: Sequence[str]) -> list[tuple[str, str, str, float]]:
    """(new, old, likely, similarity) of every unanswered question whose two rows are both
    among `ids`: what a passive read must show as undecided, or not show twice. The similarity
    is the one the judge weighed (the cosine, or the words' overlap without a model); 0.0 when
    the evidence does not hold one."""
    if len(ids) < 2:
        return []
    marks = ",".join("?" * len(ids))
    try:
        rows = list(conn.execute(
            "SELECT new_id, old_id, likely, json_extract(evidence, '$.similarity') FROM review "
            "WHERE answer IS NULL "
            f"AND new_id IN ({marks}) AND old_id IN ({marks})",
            (*ids, *ids),
        ))  # fmt: skip
    except apsw.SQLError:
        return []  # a reader of a store from before v14 (it never migrates): nothing asked
    return [(r[0], r[1], r[2] or "", r[3] if isinstance(r[3], (int, float)) else 0.0) for r in rows]
