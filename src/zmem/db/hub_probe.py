"""One question to the team hub without psycopg (issue 47): is there anything new? libpq itself,
the copy psycopg's binary wheel ships (else the system's), is called through ctypes for one
connection and one statement. Importing psycopg costs a fresh `zmem sync` 120-250 ms on our
machines, most of a sync that finds nothing new; this costs ~20 ms. Any answer it cannot give
(no libpq, an odd result) is None, and the caller does the whole sync through psycopg."""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from zmem.db.hub import CONNECT_TIMEOUT_S, SCHEMA, STATEMENT_TIMEOUT_MS

_CONNECTION_OK = 0
_PGRES_TUPLES_OK = 2
_lib: list[ctypes.CDLL | None] = []


def _candidates() -> list[str]:
    """The libpq psycopg would use (its binary wheel's bundled copy), then the system's."""
    out: list[str] = []
    spec = importlib.util.find_spec("psycopg_binary")  # found, not imported
    if spec is not None and spec.origin:
        pkg = Path(spec.origin).parent
        for pattern in ("../psycopg_binary.libs/libpq*", ".dylibs/libpq*", "libpq*.dll"):
            out += sorted(glob.glob(str(pkg / pattern)))
    if sys.platform == "darwin":
        out.append("libpq.5.dylib")
    elif os.name == "nt":
        out.append("libpq.dll")
    else:
        out.append("libpq.so.5")
    return out


def _load() -> ctypes.CDLL | None:
    if _lib:
        return _lib[0]
    lib = None
    for name in _candidates():
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    if lib is not None:
        vp, cp = ctypes.c_void_p, ctypes.c_char_p
        lib.PQconnectdbParams.restype = vp
        lib.PQconnectdbParams.argtypes = [ctypes.POINTER(cp), ctypes.POINTER(cp), ctypes.c_int]
        lib.PQstatus.argtypes = [vp]
        lib.PQerrorMessage.argtypes = [vp]
        lib.PQerrorMessage.restype = cp
        lib.PQexecParams.restype = vp
        lib.PQexecParams.argtypes = [vp, cp, ctypes.c_int, vp, ctypes.POINTER(cp), vp, vp,
                                     ctypes.c_int]  # fmt: skip
        lib.PQresultStatus.argtypes = [vp]
        lib.PQresultErrorMessage.argtypes = [vp]
        lib.PQresultErrorMessage.restype = cp
        lib.PQntuples.argtypes = [vp]
        lib.PQnfields.argtypes = [vp]
        lib.PQgetisnull.argtypes = [vp, ctypes.c_int, ctypes.c_int]
        lib.PQgetvalue.argtypes = [vp, ctypes.c_int, ctypes.c_int]
        lib.PQgetvalue.restype = cp
        lib.PQclear.argtypes = [vp]
        lib.PQfinish.argtypes = [vp]
    _lib.append(lib)
    return lib


class ProbeError(Exception):
    """The server's message (connection or statement), for the caller to classify."""

    def __init__(self, message: str, connecting: bool):
        super().__init__(message)
        self.connecting = connecting


def query_one(
    url: str, sql: str, params: Sequence[str], *, timeout: int, statement_ms: int
) -> tuple[str | None, ...] | None:
    """The single row `sql` returns (text values), or None when libpq is not to be had or the
    answer is not one row. ProbeError carries the server's message when it refused."""
    lib = _load()
    if lib is None:
        return None
    settings = {
        "dbname": url,  # expanded: a URL or a conninfo string, as psycopg passes it
        "connect_timeout": str(max(1, timeout)),
        "application_name": "zmem",
        "options": f"-c statement_timeout={statement_ms}",
    }
    keys = (ctypes.c_char_p * (len(settings) + 1))(*[k.encode() for k in settings], None)
    values = (ctypes.c_char_p * (len(settings) + 1))(*[v.encode() for v in settings.values()],
                                                      None)  # fmt: skip
    conn = lib.PQconnectdbParams(keys, values, 1)
    if not conn:
        return None
    try:
        if lib.PQstatus(conn) != _CONNECTION_OK:
            raise ProbeError(_text(lib.PQerrorMessage(conn)), True)
        args = (ctypes.c_char_p * max(1, len(params)))(*[p.encode() for p in params])
        res = lib.PQexecParams(conn, sql.encode(), len(params), None, args, None, None, 0)
        if not res:
            return None
        try:
            if lib.PQresultStatus(res) != _PGRES_TUPLES_OK:
                raise ProbeError(_text(lib.PQresultErrorMessage(res)), False)
            if lib.PQntuples(res) != 1:
                return None
            return tuple(
                None if lib.PQgetisnull(res, 0, i) else _text(lib.PQgetvalue(res, 0, i))
                for i in range(lib.PQnfields(res))
            )
        finally:
            lib.PQclear(res)
    finally:
        lib.PQfinish(conn)


def _text(raw: bytes | None) -> str:
    return (raw or b"").decode("utf-8", "replace")


# One statement: the login, its grants, the hub's current snapshot and how many changes in the
# shared namespaces that snapshot sees and the last pull's did not (user:global is the login's
# personal namespace). All of it under the statement's one snapshot, so a count of 0 means a
# pull from `pull_prev` to this snapshot would read nothing.
_CHANGES_SQL = (
    "SELECT session_user::text, (SELECT coalesce(json_object_agg(namespace, can_write), '{}') "
    f"FROM {SCHEMA}.access WHERE role = session_user)::text, pg_current_snapshot()::text, "
    f"(SELECT count(*) FROM {SCHEMA}.record WHERE "
    "xid >= pg_snapshot_xmin($1::pg_snapshot) AND NOT pg_visible_in_snapshot(xid, $1::pg_snapshot) "
    "AND namespace IN (SELECT CASE WHEN n = 'user:global' THEN 'personal:' || session_user "
    "ELSE n END FROM jsonb_array_elements_text($2::jsonb) AS t(n)))::text"
)


def changes_since(url: str, prev: str, namespaces: Sequence[str]) -> tuple[str | None, ...] | None:
    """(login, its grants as JSON, the hub's snapshot now, how many changes in `namespaces` it
    sees that the snapshot `prev` did not), or None when it cannot be asked this way."""
    return query_one(
        url, _CHANGES_SQL, [prev, json.dumps(list(namespaces))],
        timeout=CONNECT_TIMEOUT_S, statement_ms=STATEMENT_TIMEOUT_MS,
    )  # fmt: skip
