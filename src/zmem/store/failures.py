"""What a SQLite failure means to the person who ran the command: one line naming the problem
and the fix, as the ZMemError that carries its exit code (3 busy: run it again; 2 the store is
unusable). Every front end passes driver errors through here instead of showing a traceback;
the store layer owns it because only the store knows which file it is."""

from __future__ import annotations

from pathlib import Path

import apsw

from zmem.db import connect
from zmem.errors import StoreBusy, StoreUnavailable, ZMemError


def explain(exc: apsw.Error, store: Path | str | None = None) -> ZMemError:
    where = f"store {store}" if store else "the store"
    detail = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, apsw.BusyError | apsw.LockedError):
        return StoreBusy(
            f"{where} is busy: another session held its write lock past the "
            f"{connect.BUSY_TIMEOUT_MS / 1000:g} s timeout (nothing was written); run the "
            "command again"
        )
    if isinstance(exc, apsw.NotADBError):
        return StoreUnavailable(
            f"cannot use {where}: it is not a database, or its header is damaged ({detail}); "
            "run `zmem doctor`, and restore a backup copy if it was a store"
        )
    if isinstance(exc, apsw.CorruptError):
        return StoreUnavailable(
            f"{where} is damaged ({detail}); run `zmem doctor`, then restore a backup copy of it"
        )
    if isinstance(exc, apsw.FullError):
        return StoreUnavailable(f"the disk holding {where} is full ({detail}); free some space")
    if isinstance(exc, apsw.CantOpenError | apsw.PermissionsError | apsw.ReadOnlyError):
        return StoreUnavailable(
            f"cannot use {where} ({detail}); check the path and its permissions (`zmem doctor`)"
        )
    return StoreUnavailable(f"{where} failed ({detail}); run `zmem doctor`")
