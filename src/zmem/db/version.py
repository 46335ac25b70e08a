"""Which schema a store is at, read without migrating it: the version this client writes, the
newest it may keep using, and whether opening the store would change nothing. A leaf: readers
that only look (the quick sync, doctor) need not load the migrations."""

from __future__ import annotations

import apsw

SCHEMA_VERSION = 15
# The newest schema this client may keep using: a maintenance release may raise it to an
# additive-only newer schema (new side tables, no memory changes).
FORWARD_COMPAT_SCHEMA_VERSION = 15
# The data step that gave remote-derived project namespaces their one spelling (migrate).
CASE_FOLDED = "namespace_case_folded"


def schema_version(conn: apsw.Connection) -> int:
    has_meta = conn.execute(
        "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'meta'"
    ).fetchone()
    if not has_meta:
        return 0
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else 0


def is_current(conn: apsw.Connection) -> bool:
    """Whether opening the store would change nothing: at this client's schema, its data steps
    done (a reader that does not migrate may then read it as MemoryStore would)."""
    if schema_version(conn) != SCHEMA_VERSION:
        return False
    return conn.execute("SELECT 1 FROM meta WHERE key = ?", (CASE_FOLDED,)).fetchone() is not None
