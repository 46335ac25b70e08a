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
from zmem.layout import PRIVATE_DIR_MODE, PRIVATE_FILE_MODE


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
    if size == 0 and not _has_wal(path):
        # SQLite would take an empty file for a new database and quietly start over in it.
        raise StoreUnavailable(
            f"store {path} is an empty file (0 bytes): whatever it held is gone. Restore a "
            "backup copy over it, or delete it to start a new store"
        )
    return True


def _has_wal(path: Path) -> bool:
    try:
        return path.with_name(path.name + "-wal").stat().st_size > 0
    except OSError:
        return False


def create(path: Path) -> None:
    """A new store appears whole: it is built under a temporary name and linked into place, so
    no process ever sees a half-created (empty) store file, and an empty file at the store's
    path can only mean lost data. Several processes creating it at once: the first link wins,
    the others open it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.new")
    try:
        # Private from its first byte, in any process that opens it (a host embedding the
        # library keeps its own umask): SQLite gives the WAL and -shm files the mode of the
        # database file. The data dir itself is made 0700 when this creates it.
        path.parent.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
        os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, PRIVATE_FILE_MODE))
        os.chmod(tmp, PRIVATE_FILE_MODE)  # a permissive umask cannot widen it either
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
