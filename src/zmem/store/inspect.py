"""A read-only look at a store file and the SQLite under it, for doctor: the facts its checks
report, read without creating, migrating or writing anything (db.diagnostics opens the file
read-only), and the schema versions this client knows. Doctor reads the store only through
here; a file that is not a readable database comes back as StoreUnavailable."""

from __future__ import annotations

from pathlib import Path

import apsw

from zmem.db import diagnostics, migrate, vectors
from zmem.db.diagnostics import ENTITY_TABLES, EPISODE_TABLES, LINEAGE_COLUMNS, StoreFacts
from zmem.errors import StoreUnavailable

__all__ = [
    "ENTITY_TABLES",
    "EPISODE_TABLES",
    "LINEAGE_COLUMNS",
    "StoreFacts",
    "facts",
    "schema_versions",
    "sqlite_features",
    "vector_extension_present",
]


def facts(path: Path) -> StoreFacts:
    """Every fact doctor reports about the store at `path`, from one snapshot."""
    try:
        return diagnostics.inspect(path)
    except apsw.Error as exc:
        raise StoreUnavailable(f"cannot read {path}: {type(exc).__name__}: {exc}") from exc


def schema_versions() -> tuple[int, int]:
    """(the schema this client writes, the newest one it still opens without the override)."""
    return migrate.SCHEMA_VERSION, migrate.FORWARD_COMPAT_SCHEMA_VERSION


def sqlite_features() -> tuple[str, bool]:
    """(the bundled SQLite's version, whether it has FTS5)."""
    return apsw.sqlite_lib_version(), "ENABLE_FTS5" in apsw.compile_options


def vector_extension_present() -> bool:
    return vectors.extension_path() is not None
