"""A store's bookkeeping for the team hub, in a side file of its own (`<data dir>/hub/state.sqlite`,
beside hub.json): which objects the hub is known to hold (pushed from here or pulled), with who
wrote them from where; the cursors of the last push and pull; the objects a pull quarantined
(and the ones the hub refused from this store); and the last sync's status. The store itself
keeps its schema; losing this file only costs a full re-push, which the hub answers without a
change, and a full re-pull, which the store answers without one."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import apsw

SCHEMA = """
CREATE TABLE IF NOT EXISTS known (
    kind      TEXT NOT NULL,
    key       TEXT NOT NULL,
    namespace TEXT NOT NULL,
    state     INTEGER NOT NULL DEFAULT 0,  -- a memory: 1 tombstoned; an episode: 1 closed
    writer    TEXT,                        -- the hub role that last wrote it
    machine   TEXT,                        -- and from which machine
    PRIMARY KEY (kind, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS cursor (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS status (key TEXT PRIMARY KEY, value TEXT);
-- Text cursors: the pull's snapshots (the last one read up to, the window being read).
CREATE TABLE IF NOT EXISTS mark (name TEXT PRIMARY KEY, value TEXT);
-- What a pull refused to apply (direction 'pull'), and what the hub refused from this store
-- ('push'): never retried, always reported.
CREATE TABLE IF NOT EXISTS quarantine (
    direction TEXT NOT NULL,
    kind      TEXT NOT NULL,
    key       TEXT NOT NULL,
    seq       INTEGER NOT NULL DEFAULT 0,
    namespace TEXT,
    writer    TEXT,
    machine   TEXT,
    reason    TEXT NOT NULL,
    at        TEXT NOT NULL,
    PRIMARY KEY (direction, kind, key, seq)
) WITHOUT ROWID;
"""


def open_state(path: Path) -> apsw.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = apsw.Connection(str(path))
    conn.setbusytimeout(15_000)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(SCHEMA)
    return conn


def open_read_only(path: Path) -> apsw.Connection | None:
    """For doctor and the inspector: None when there is no file, and nothing is ever written."""
    if not path.is_file():
        return None
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    conn.setbusytimeout(2_000)
    return conn


def cursors(conn: apsw.Connection) -> dict[str, int]:
    return dict(conn.execute("SELECT name, value FROM cursor"))


def set_cursors(conn: apsw.Connection, values: dict[str, int]) -> None:
    conn.executemany(
        "INSERT INTO cursor (name, value) VALUES (?, ?) "
        "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        list(values.items()),
    )


def known(conn: apsw.Connection, kind: str) -> dict[str, int]:
    """key -> state of the objects of `kind` the hub is known to hold."""
    return dict(conn.execute("SELECT key, state FROM known WHERE kind = ?", (kind,)))


def known_of(conn: apsw.Connection, kind: str, keys: Sequence[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        marks = ",".join("?" * len(chunk))
        out.update(conn.execute(
            f"SELECT key, state FROM known WHERE kind = ? AND key IN ({marks})", (kind, *chunk)
        ))  # fmt: skip
    return out


def remember(
    conn: apsw.Connection, rows: Iterable[tuple[str, str, str, int, str | None, str | None]]
) -> None:
    """(kind, key, namespace, state, writer, machine): the hub holds these now. A state never
    goes back (a tombstone, a close), and a writer stays known when a row arrives without one."""
    conn.executemany(
        "INSERT INTO known (kind, key, namespace, state, writer, machine) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (kind, key) DO UPDATE SET "
        "state = max(state, excluded.state), "
        "writer = coalesce(excluded.writer, writer), machine = coalesce(excluded.machine, machine)",
        list(rows),
    )


def status(conn: apsw.Connection) -> dict[str, str]:
    return dict(conn.execute("SELECT key, value FROM status"))


def set_status(conn: apsw.Connection, values: dict[str, str | None]) -> None:
    conn.executemany(
        "INSERT INTO status (key, value) VALUES (?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        list(values.items()),
    )


def writers(conn: apsw.Connection) -> list[tuple[str, str, str, str, int]]:
    """(namespace, kind, writer, machine, objects): who wrote what from where, as last seen."""
    return [tuple(r) for r in conn.execute(
        "SELECT namespace, kind, coalesce(writer, '?'), coalesce(machine, '?'), count(*) "
        "FROM known GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 5 DESC"
    )]  # fmt: skip


def marks(conn: apsw.Connection) -> dict[str, str | None]:
    return dict(conn.execute("SELECT name, value FROM mark"))


def set_marks(conn: apsw.Connection, values: dict[str, str | None]) -> None:
    conn.executemany(
        "INSERT INTO mark (name, value) VALUES (?, ?) "
        "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        list(values.items()),
    )


def quarantine(
    conn: apsw.Connection,
    direction: str,
    rows: Iterable[tuple[str, str, int, str | None, str | None, str | None, str]],
    at: str,
) -> None:
    """(kind, key, seq, namespace, writer, machine, reason) set aside; the same change twice
    is kept once."""
    conn.executemany(
        "INSERT INTO quarantine (direction, kind, key, seq, namespace, writer, machine, reason, "
        "at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        [(direction, *r, at) for r in rows],
    )


def quarantined(conn: apsw.Connection, limit: int = 20) -> tuple[dict[str, int], list[dict]]:
    """(count per direction, the newest `limit` entries)."""
    counts = dict(conn.execute("SELECT direction, count(*) FROM quarantine GROUP BY 1"))
    cols = ("direction", "kind", "key", "seq", "namespace", "writer", "machine", "reason", "at")
    rows = conn.execute(
        f"SELECT {', '.join(cols)} FROM quarantine ORDER BY at DESC, seq DESC LIMIT ?", (limit,)
    )
    return counts, [dict(zip(cols, r, strict=True)) for r in rows]
