"""SQL over the tables around memories: links between them, entities and their aliases,
episodes, and the meta key/value table."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import apsw

from zmem.models import Entity, Episode, Link

# ---- links -------------------------------------------------------------------------------


def insert_link(
    conn: apsw.Connection, src: str, dst: str, relation: str, score: float | None, at: str
) -> bool:
    """Insert one directed edge; False when it already existed (re-adding is a no-op)."""
    conn.execute(
        "INSERT INTO memory_link (src, dst, relation, score, created_at) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (src, dst, relation) DO NOTHING",
        (src, dst, relation, score, at),
    )
    return conn.changes() == 1


def links_of(conn: apsw.Connection, memory_id: str) -> list[Link]:
    rows = conn.execute(
        "SELECT src, dst, relation, score, created_at FROM memory_link WHERE src = ? "
        "UNION ALL "
        "SELECT src, dst, relation, score, created_at FROM memory_link WHERE dst = ? "
        "ORDER BY created_at, src, dst, relation",
        (memory_id, memory_id),
    )
    return [Link(*r) for r in rows]


# ---- entities ----------------------------------------------------------------------------


def entity_for_aliases(conn: apsw.Connection, aliases: Sequence[str]) -> str | None:
    """The entity any of these normalized aliases already resolves to (first alias wins)."""
    for alias in aliases:
        row = conn.execute(
            "SELECT entity_id FROM entity_alias WHERE alias = ?", (alias,)
        ).fetchone()
        if row:
            return row[0]
    return None


def alias_owners(conn: apsw.Connection, aliases: Sequence[str]) -> dict[str, str]:
    """{alias: entity id} for those of these normalized aliases that exist: one statement for
    all of a write's mentions instead of one per alias."""
    found: dict[str, str] = {}
    for i in range(0, len(aliases), _MAX_VARIABLES):
        chunk = tuple(aliases[i : i + _MAX_VARIABLES])
        marks = ",".join("?" * len(chunk))
        found.update(
            conn.execute(
                f"SELECT alias, entity_id FROM entity_alias WHERE alias IN ({marks})", chunk
            )
        )
    return found


# Well below SQLite's bound-parameter limit (32766); a 64k-character text can hold thousands of
# distinct mentions.
_MAX_VARIABLES = 4096


def insert_entities(conn: apsw.Connection, rows: Sequence[tuple[str, str, str, str]]) -> None:
    """(id, kind, name, created_at) rows minted by the caller."""
    if rows:
        conn.executemany(
            "INSERT INTO entity (id, kind, name, created_at) VALUES (?, ?, ?, ?)", rows
        )


def add_aliases(conn: apsw.Connection, entity_id: str, aliases: Iterable[str]) -> None:
    insert_aliases(conn, [(a, entity_id) for a in aliases])


def insert_aliases(conn: apsw.Connection, pairs: Sequence[tuple[str, str]]) -> None:
    """(alias, entity id) pairs. An alias already owned by another entity stays there: identity
    is never silently moved."""
    if pairs:
        conn.executemany(
            "INSERT INTO entity_alias (alias, entity_id) VALUES (?, ?) "
            "ON CONFLICT (alias) DO NOTHING",
            pairs,
        )


def link_memory_entities(conn: apsw.Connection, memory_id: str, entity_ids: Iterable[str]) -> None:
    link_pairs(conn, [(memory_id, e) for e in entity_ids])


def link_pairs(conn: apsw.Connection, pairs: Sequence[tuple[str, str]]) -> None:
    """(memory id, entity id) links; an existing one is left as it is. Each link carries its
    row's valid_from, which the entity lane's per-entity window is ordered by."""
    if pairs:
        conn.executemany(
            "INSERT INTO memory_entity (memory_id, entity_id, valid_from) "
            "VALUES (?1, ?2, (SELECT valid_from FROM memory WHERE id = ?1)) "
            "ON CONFLICT DO NOTHING",
            pairs,
        )


def unlink_memory_entities(conn: apsw.Connection, memory_id: str) -> None:
    conn.execute("DELETE FROM memory_entity WHERE memory_id = ?", (memory_id,))


def entities_of(conn: apsw.Connection, memory_id: str) -> list[Entity]:
    rows = conn.execute(
        "SELECT e.id, e.kind, e.name FROM memory_entity me JOIN entity e ON e.id = me.entity_id "
        "WHERE me.memory_id = ? ORDER BY e.name",
        (memory_id,),
    )
    return [Entity(*r) for r in rows]


def get_entity(conn: apsw.Connection, entity_id: str) -> Entity | None:
    row = conn.execute(
        "SELECT id, kind, name, (SELECT count(*) FROM memory_entity WHERE entity_id = e.id) "
        "FROM entity e WHERE id = ?",
        (entity_id,),
    ).fetchone()
    if row is None:
        return None
    aliases = tuple(
        r[0]
        for r in conn.execute(
            "SELECT alias FROM entity_alias WHERE entity_id = ? ORDER BY alias", (entity_id,)
        )
    )
    return Entity(row[0], row[1], row[2], aliases, row[3])


def list_entities(conn: apsw.Connection, kind: str | None = None) -> list[Entity]:
    params: tuple[str, ...] = ()
    where = ""
    if kind:
        where, params = "WHERE e.kind = ?", (kind,)
    rows = list(
        conn.execute(
            "SELECT e.id, e.kind, e.name, "
            "(SELECT count(*) FROM memory_entity me WHERE me.entity_id = e.id), "
            "(SELECT group_concat(alias, char(31)) FROM "
            " (SELECT alias FROM entity_alias a WHERE a.entity_id = e.id ORDER BY alias)) "
            f"FROM entity e {where} ORDER BY e.kind, e.name, e.id",
            params,
        )
    )
    return [
        Entity(id_, kind_, name, tuple(aliases.split("\x1f")) if aliases else (), links)
        for id_, kind_, name, links, aliases in rows
    ]


def merge_entity(conn: apsw.Connection, source: str, target: str) -> tuple[int, int]:
    """Move aliases and memory links from source to target, then delete source. Returns
    (aliases moved, links moved); anything the target already has stays the target's."""
    conn.execute("UPDATE entity_alias SET entity_id = ? WHERE entity_id = ?", (target, source))
    aliases = conn.changes()
    conn.execute(
        "INSERT INTO memory_entity (memory_id, entity_id, valid_from) "
        "SELECT memory_id, ?, valid_from FROM memory_entity WHERE entity_id = ? "
        "ON CONFLICT DO NOTHING",
        (target, source),
    )
    moved = conn.changes()
    conn.execute("DELETE FROM entity WHERE id = ?", (source,))
    return aliases, moved


def entity_memory_ids(conn: apsw.Connection, entity_id: str) -> set[str]:
    return {
        r[0]
        for r in conn.execute(
            "SELECT memory_id FROM memory_entity WHERE entity_id = ?", (entity_id,)
        )
    }


# ---- episodes ----------------------------------------------------------------------------


def episodes_of(conn: apsw.Connection, memory_id: str) -> list[Episode]:
    rows = conn.execute(
        "SELECT e.id, e.namespace, e.started_at, e.ended_at, e.token_count, e.summary_memory_id "
        "FROM episode_memory em JOIN episode e ON e.id = em.episode_id "
        "WHERE em.memory_id = ? ORDER BY e.started_at",
        (memory_id,),
    )
    return [Episode(*r) for r in rows]


def open_episode(conn: apsw.Connection, namespace: str, at: str) -> str:
    import uuid  # on the first episode only: see capture.writer._uuid4

    episode_id = str(uuid.uuid4())
    conn.execute(
        "INSERT INTO episode (id, namespace, started_at) VALUES (?, ?, ?)",
        (episode_id, namespace, at),
    )
    return episode_id


def get_episode(conn: apsw.Connection, episode_id: str) -> Episode | None:
    row = conn.execute(
        "SELECT id, namespace, started_at, ended_at, token_count, summary_memory_id "
        "FROM episode WHERE id = ?",
        (episode_id,),
    ).fetchone()
    return Episode(*row) if row else None


def add_episode_member(conn: apsw.Connection, episode_id: str, memory_id: str, at: str) -> bool:
    """Attach a memory; False when it already belonged (idempotent per pair)."""
    conn.execute(
        "INSERT OR IGNORE INTO episode_memory (episode_id, memory_id, added_at) VALUES (?, ?, ?)",
        (episode_id, memory_id, at),
    )
    return conn.changes() == 1


def episode_member_ids(conn: apsw.Connection, episode_id: str) -> list[str]:
    rows = conn.execute(
        "SELECT memory_id FROM episode_memory WHERE episode_id = ? ORDER BY added_at, memory_id",
        (episode_id,),
    )
    return [r[0] for r in rows]


def close_episode(
    conn: apsw.Connection, episode_id: str, at: str, token_count: int, summary_id: str | None
) -> bool:
    """Close an open episode; False when it was already closed (closing is write-once)."""
    conn.execute(
        "UPDATE episode SET ended_at = ?, token_count = ?, summary_memory_id = ? "
        "WHERE id = ? AND ended_at IS NULL",
        (at, token_count, summary_id, episode_id),
    )
    return conn.changes() == 1


def list_episodes(conn: apsw.Connection, namespace: str | None) -> list[tuple[Episode, int]]:
    """Episodes newest first, each with its member count."""
    where, params = ("WHERE e.namespace = ?", (namespace,)) if namespace else ("", ())
    rows = conn.execute(
        "SELECT e.id, e.namespace, e.started_at, e.ended_at, e.token_count, "
        "e.summary_memory_id, (SELECT count(*) FROM episode_memory em "
        f"WHERE em.episode_id = e.id) FROM episode e {where} "
        "ORDER BY e.started_at DESC, e.id",
        params,
    )
    return [(Episode(*r[:6]), r[6]) for r in rows]


# ---- meta --------------------------------------------------------------------------------


def get_meta(conn: apsw.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def set_meta(conn: apsw.Connection, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def delete_meta(conn: apsw.Connection, key: str) -> None:
    conn.execute("DELETE FROM meta WHERE key = ?", (key,))
