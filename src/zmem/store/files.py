"""The store file on disk, before SQLite sees it: whether there is a store to open (a read
never creates one), refusing a file that cannot be a store (an empty one means lost data), and
creating a new store whole, so no process ever sees a half-created file."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import apsw

from zmem.db.connect import connect
from zmem.db.migrate import migrate
from zmem.errors import NotFound, StoreUnavailable


def check(path: Path, create: bool) -> bool:
    """True when there is a store file to open; False when one is to be created."""
    if str(path) == ":memory:":
        return True
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        if not create:
            raise NotFound(
                f"no store at {path} yet: nothing has been stored there (`zmem add` creates it)"
            ) from None
        return False
    except OSError as exc:
        raise StoreUnavailable(f"cannot open store {path}: {exc}") from exc
    wal = path.with_name(path.name + "-wal")
    if size == 0 and not (wal.exists() and wal.stat().st_size > 0):
        # SQLite would take an empty file for a new database and quietly start over in it.
        raise StoreUnavailable(
            f"store {path} is an empty file (0 bytes): whatever it held is gone. Restore a "
            "backup copy over it, or delete it to start a new store"
        )
    return True


def create(path: Path) -> None:
    """A new store appears whole: it is built under a temporary name and linked into place, so
    no process ever sees a half-created (empty) store file, and an empty file at the store's
    path can only mean lost data. Several processes creating it at once: the first link wins,
    the others open it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.new")
    try:
        conn = connect(tmp)
        try:
            migrate(conn)
        finally:
            conn.close()
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process created it first
        except OSError:  # a filesystem without hard links
            if not path.exists():
                os.replace(tmp, path)
    except (apsw.Error, OSError) as exc:
        raise StoreUnavailable(f"cannot create store {path}: {exc}") from exc
    finally:
        for leftover in (tmp, *(tmp.with_name(tmp.name + ext) for ext in ("-wal", "-shm"))):
            leftover.unlink(missing_ok=True)
