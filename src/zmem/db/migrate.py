"""Schema history: named, ordered, append-only migrations, each applied in its own transaction.
Opening a store runs whatever it lacks; a store newer than this client is refused unless it is
within the forward-compatible ceiling (additive-only releases) or the operator overrides."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

import apsw

from zmem.config import now_iso
from zmem.db import vectors
from zmem.db.connect import transaction
from zmem.db.memories import POSTINGS_CAP, add_terms, dedup_terms
from zmem.db.version import (  # re-exported: importers have long found them here
    CASE_FOLDED,
    FORWARD_COMPAT_SCHEMA_VERSION,
    SCHEMA_VERSION,
    is_current,
    schema_version,
)
from zmem.errors import SchemaError
from zmem.models import fold_namespace_case
from zmem.tokens import similarity_norm

__all__ = ["FORWARD_COMPAT_SCHEMA_VERSION", "SCHEMA_VERSION", "is_current", "migrate",
           "schema_version"]  # fmt: skip


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str
    # Data steps SQL cannot express (tokenising text, normalising JSON), run in the same
    # transaction right after the SQL.
    step: Callable[[apsw.Connection], None] | None = None


def _backfill_dedup_index(conn: apsw.Connection) -> None:
    rows = list(conn.execute("SELECT rid, namespace, content FROM memory ORDER BY rid"))
    postings: dict[str, list[int]] = {}
    for rid, namespace, content in rows:
        norm = similarity_norm(content)
        conn.execute("UPDATE memory SET content_norm = ? WHERE rid = ?", (norm, rid))
        for term in dedup_terms(namespace, norm.split()):
            postings.setdefault(term, []).append(rid)
    conn.executemany(
        "INSERT INTO term_df (term, df, posts) VALUES (?, ?, ?)",
        [
            (term, len(rids), ",".join(map(str, rids)) if len(rids) <= POSTINGS_CAP else None)
            for term, rids in sorted(postings.items())
        ],
    )


# term_df as migration 0008 creates it today. Stores whose 0008 ran before the table became a
# rowid table hold the same columns in a WITHOUT ROWID table; _convert_term_df rebuilds it.
_TERM_DF_TABLE = """CREATE TABLE term_df (
    term  TEXT PRIMARY KEY,
    df    INTEGER NOT NULL,
    posts TEXT
)"""


def _term_df_without_rowid(conn: apsw.Connection) -> bool:
    row = conn.execute(
        "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'term_df'"
    ).fetchone()
    return row is not None and "WITHOUT ROWID" in row[0].upper()


def _convert_term_df(conn: apsw.Connection) -> None:
    """Rebuild a WITHOUT ROWID term_df as the rowid table 0008 now creates (same columns, same
    rows), so later adds stop rewriting overflow and interior pages (docs/decisions.md). The
    schema version does not move: the table's layout is what is checked, once per open. Older
    clients run the same statements on either layout."""
    if not _term_df_without_rowid(conn):
        return
    with transaction(conn):
        if not _term_df_without_rowid(conn):  # another process converted it meanwhile
            return
        conn.execute("ALTER TABLE term_df RENAME TO term_df_without_rowid")
        conn.execute(_TERM_DF_TABLE)
        conn.execute(
            "INSERT INTO term_df (term, df, posts) "
            "SELECT term, df, posts FROM term_df_without_rowid ORDER BY term"
        )
        conn.execute("DROP TABLE term_df_without_rowid")


def _fold_namespace_case(conn: apsw.Connection) -> None:
    """Give remote-derived project namespaces their one spelling (models.fold_namespace_case),
    once per store: the hooks used to keep the repository path's case, so a clone by its
    `git@…:Acme/WebApp.git` remote and one by `https://…/acme/webapp` wrote two namespaces.
    Every row, live or retired, and every episode moves (the live rows' vectors and dedup
    counts with them); the old spelling stays an alias, so anything that still names it reads
    the same rows. The schema version does not move: the data changed, not the layout. A
    marker in meta says it is done; checking it is one primary-key read per open."""
    done = conn.execute("SELECT 1 FROM meta WHERE key = ?", (CASE_FOLDED,)).fetchone()
    if done is not None:
        return
    with transaction(conn):
        if conn.execute("SELECT 1 FROM meta WHERE key = ?", (CASE_FOLDED,)).fetchone():
            return  # another process did it meanwhile
        spaces = [r[0] for r in conn.execute(
            "SELECT namespace FROM memory UNION SELECT namespace FROM episode"
        )]  # fmt: skip
        at = now_iso()
        for old in spaces:
            new = fold_namespace_case(old)
            if new == old:
                continue
            live = conn.execute(
                "SELECT rid, content_norm, embedding FROM memory WHERE namespace = ? "
                "AND superseded_at IS NULL",
                (old,),
            ).fetchall()
            conn.execute("UPDATE memory SET namespace = ? WHERE namespace = ?", (new, old))
            conn.execute("UPDATE episode SET namespace = ? WHERE namespace = ?", (new, old))
            for rid, norm, blob in live:
                if blob is not None:
                    vectors.move(conn, rid, new, blob)
                add_terms(conn, rid, new, norm or "")
            conn.execute(
                "INSERT OR IGNORE INTO namespace_alias (alias, namespace, created_at) "
                "VALUES (?, ?, ?)",
                (old, new, at),
            )
            conn.execute("UPDATE namespace_alias SET namespace = ? WHERE namespace = ?", (new, old))
        conn.execute("INSERT INTO meta (key, value) VALUES (?, '1')", (CASE_FOLDED,))


def _normalise_merged_from(conn: apsw.Connection) -> None:
    # merged_from is a de-duplicated, first-seen-order id list; older rows may repeat ids.
    rows = list(conn.execute("SELECT rid, merged_from FROM memory WHERE merged_from <> '[]'"))
    for rid, raw in rows:
        try:
            ids = json.loads(raw)
        except ValueError:
            ids = [part.strip() for part in raw.split(",") if part.strip()]
        if not isinstance(ids, list):
            ids = [ids]
        clean = list(dict.fromkeys(str(i) for i in ids))
        conn.execute("UPDATE memory SET merged_from = ? WHERE rid = ?", (json.dumps(clean), rid))


_STEPS: dict[int, Callable[[apsw.Connection], None]] = {
    8: _backfill_dedup_index,
    11: _normalise_merged_from,
}

_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


def load_migrations() -> list[Migration]:
    # Imported here: importlib.resources pulls in tempfile, random and hashlib (~6.5 ms) that a
    # store already at the current schema (every hook) never needs.
    from importlib import resources

    folder = resources.files("zmem.db") / "migrations"
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _FILE.match(entry.name)
        if not match:
            continue
        version = int(match.group(1))
        found.append(
            Migration(version, match.group(2), entry.read_text("utf-8"), _STEPS.get(version))
        )
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)) or versions[-1] != SCHEMA_VERSION:
        raise SchemaError(f"migration files are not numbered 1..{SCHEMA_VERSION}: {versions}")
    return found


def migrate(
    conn: apsw.Connection, allow_newer: bool = False, notice: Callable[[int], None] | None = None
) -> int:
    """Bring the store to SCHEMA_VERSION; returns the version the store is at afterwards.

    Each migration re-reads the version inside its own write transaction, so two processes
    opening a fresh store at once apply every step exactly once."""
    current = schema_version(conn)
    if current > SCHEMA_VERSION:
        if current <= FORWARD_COMPAT_SCHEMA_VERSION or allow_newer:
            if notice is not None:
                notice(current)
            return current
        raise SchemaError(
            f"store schema v{current} is newer than this zmem supports (v{SCHEMA_VERSION}); "
            "update zmem, or set ZMEM_ALLOW_NEWER_SCHEMA=1 to use it at your own risk"
        )
    if current == SCHEMA_VERSION:
        _convert_term_df(conn)
        _fold_namespace_case(conn)
        return current
    for migration in load_migrations():
        if migration.version <= current:
            continue
        with transaction(conn):
            if schema_version(conn) >= migration.version:
                continue
            conn.execute(migration.sql)
            if migration.step is not None:
                migration.step(conn)
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(migration.version),),
            )
    _convert_term_df(conn)
    _fold_namespace_case(conn)
    return schema_version(conn)
