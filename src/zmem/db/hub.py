"""The team hub's side in PostgreSQL (issue 32), through psycopg 3: connecting (libpq finds the
credentials: a password file, PG* variables, a service file; none ever reaches a message), the
hub schema and its versioned migrations, the member role and row level security grants, and
the statements a sync runs: a push batch written under one advisory lock (so that changes
become visible in sequence order) and a pull page read past a cursor."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

from zmem.errors import HubRefused, HubUnavailable, UsageError

if TYPE_CHECKING:
    import psycopg

SCHEMA = "zmem_hub"
MEMBER_ROLE = "zmem_hub_member"
# Held by every push batch until it commits (pg_advisory_xact_lock): sequence values become
# visible in the order they were drawn.
PUSH_LOCK = 0x7A6D656D  # "zmem"
CONNECT_TIMEOUT_S = 10
# A statement that runs longer than this is cancelled: a sync never hangs on a stuck hub.
STATEMENT_TIMEOUT_MS = 60_000


def _driver():
    try:
        import psycopg
    except ImportError as exc:  # a broken install: psycopg is a dependency
        from zmem import installation

        what = installation.missing_piece("the team hub", exc.name or "psycopg")
        raise UsageError(what) from None
    return psycopg


def describe(url: str) -> str:
    """The hub as a message may name it: user@host:port/dbname, never a password."""
    psycopg = _driver()
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        raise UsageError("the hub URL is not a PostgreSQL connection string") from None
    if info.get("service") and not info.get("host"):
        return f"service {info['service']}"
    host = info.get("host") or "localhost"
    where = f"{host}:{info['port']}" if info.get("port") else host
    user = f"{info['user']}@" if info.get("user") else ""
    return f"{user}{where}/{info.get('dbname') or info.get('user') or ''}"


def has_password(url: str) -> bool:
    psycopg = _driver()
    try:
        return bool(psycopg.conninfo.conninfo_to_dict(url).get("password"))
    except psycopg.ProgrammingError:
        raise UsageError("the hub URL is not a PostgreSQL connection string") from None


def without_password(url: str) -> str:
    """The URL with any password taken out (what is kept in the data dir)."""
    psycopg = _driver()
    info = psycopg.conninfo.conninfo_to_dict(url)
    info.pop("password", None)
    return psycopg.conninfo.make_conninfo(**info)


_REFUSED = (
    "password authentication failed",
    "no password supplied",
    "authentication failed",
    "does not exist",
    "permission denied",
    "not permitted to log in",
    "pg_hba.conf",
)


def connect(url: str, *, timeout: float = CONNECT_TIMEOUT_S) -> psycopg.Connection:
    """A connection to the hub, or HubRefused (the credentials or the role; exit 2) or
    HubUnavailable (down, unreachable, too slow; exit 3), one line naming the hub."""
    psycopg = _driver()
    where = describe(url)
    try:
        conn = psycopg.connect(
            url,
            connect_timeout=max(1, int(timeout)),
            application_name="zmem",
            # Each statement commits on its own; a transaction is always an explicit
            # conn.transaction() block (a push batch, a migration).
            autocommit=True,
            options=f"-c statement_timeout={STATEMENT_TIMEOUT_MS}",
        )
    except psycopg.OperationalError as exc:
        text = " ".join(str(exc).split()).lower()
        if any(s in text for s in _REFUSED):
            raise HubRefused(
                f"the hub {where} refused the connection ({_reason(text)}): check the role's "
                "password in ~/.pgpass, PGPASSWORD or the service file"
            ) from None
        why = _reason(text)
        raise HubUnavailable(f"the hub {where} is unreachable ({why}); nothing changed") from None
    return conn


def _reason(text: str) -> str:
    """The server's own reason, without the connection parameters libpq prefixes."""
    for marker in ("fatal:", "error:"):
        if marker in text:
            return text.split(marker, 1)[1].strip()[:160]
    return text.split(": ", 1)[-1][:160]


def failure(exc: Exception, where: str) -> Exception:
    """A psycopg error during a sync as the CLI's refusal: the hub went away (exit 3) or the
    hub refused a statement, row level security included (exit 2)."""
    psycopg = _driver()
    text = " ".join(str(exc).split())
    if isinstance(exc, psycopg.OperationalError | psycopg.errors.QueryCanceled):
        return HubUnavailable(f"the hub {where} stopped answering ({text[:160]}); run sync again")
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return HubRefused(f"the hub {where} refused a write ({text[:160]})")
    return HubRefused(f"the hub {where} refused the sync ({text[:160]})")


# ---- schema --------------------------------------------------------------------------------


def _migrations() -> list[tuple[int, str, str]]:
    out = []
    for entry in sorted(resources.files("zmem.db").joinpath("hub_migrations").iterdir(),
                        key=lambda e: e.name):  # fmt: skip
        if entry.name.endswith(".sql"):
            out.append((int(entry.name.split("_", 1)[0]), entry.name, entry.read_text("utf-8")))
    return out


SCHEMA_VERSION = max(v for v, _, _ in _migrations())


def version(conn: psycopg.Connection) -> int | None:
    """The hub schema's version, None when the database holds no hub."""
    row = conn.execute("SELECT to_regclass('zmem_hub.meta') IS NOT NULL").fetchone()
    if not row or not row[0]:
        return None
    found = conn.execute("SELECT value FROM zmem_hub.meta WHERE key = 'schema_version'").fetchone()
    return int(found[0]) if found else 0


def init(conn: psycopg.Connection) -> tuple[int | None, int]:
    """Create or migrate the hub schema, one transaction per migration, and the member role
    with its privileges. Returns (version before, version after)."""
    before = version(conn)
    with conn.transaction():
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {SCHEMA}.meta (key text PRIMARY KEY, value text NOT NULL)"
        )
    current = before or 0
    for number, _, sql in _migrations():
        if number <= current:
            continue
        with conn.transaction():
            conn.execute(sql)
            conn.execute(
                f"INSERT INTO {SCHEMA}.meta (key, value) VALUES ('schema_version', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(number),),
            )
        current = number
    with conn.transaction():
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (MEMBER_ROLE,))
        if exists.fetchone() is None:
            conn.execute(f"CREATE ROLE {MEMBER_ROLE} NOLOGIN")
        conn.execute(f"GRANT USAGE ON SCHEMA {SCHEMA} TO {MEMBER_ROLE}")
        conn.execute(f"GRANT SELECT, INSERT, UPDATE ON {SCHEMA}.record TO {MEMBER_ROLE}")
        conn.execute(f"GRANT SELECT ON {SCHEMA}.access, {SCHEMA}.meta TO {MEMBER_ROLE}")
        conn.execute(f"GRANT USAGE ON SEQUENCE {SCHEMA}.change_seq TO {MEMBER_ROLE}")
    return before, current


def grant(conn: psycopg.Connection, role: str, namespaces: Sequence[str], can_write: bool) -> None:
    """Let `role` (an existing login role) read, and unless read-only write, these namespaces."""
    from psycopg import sql

    with conn.transaction():
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is None:
            raise UsageError(
                f"no role {role!r} in this database's cluster: create it first "
                f"(CREATE ROLE {role} LOGIN PASSWORD '...')"
            )
        conn.execute(
            sql.SQL("GRANT {} TO {}").format(sql.Identifier(MEMBER_ROLE), sql.Identifier(role))
        )
        for ns in namespaces:
            conn.execute(
                f"INSERT INTO {SCHEMA}.access (role, namespace, can_write) VALUES (%s, %s, %s) "
                "ON CONFLICT (role, namespace) DO UPDATE SET can_write = excluded.can_write",
                (role, ns, can_write),
            )


def revoke(conn: psycopg.Connection, role: str, namespaces: Sequence[str]) -> int:
    with conn.transaction():
        cur = conn.execute(
            f"DELETE FROM {SCHEMA}.access WHERE role = %s AND namespace = ANY(%s)",
            (role, list(namespaces)),
        )
        return cur.rowcount


def access(conn: psycopg.Connection) -> dict[str, bool]:
    """The connected role's namespaces: namespace -> may write."""
    rows = conn.execute(
        f"SELECT namespace, can_write FROM {SCHEMA}.access WHERE role = current_user"
    ).fetchall()
    return {ns: bool(w) for ns, w in rows}


# ---- a sync's statements ---------------------------------------------------------------------


@dataclass(frozen=True)
class HubRow:
    seq: int
    kind: str
    key: str
    namespace: str
    body: dict[str, Any]
    written_by: str
    machine: str


def existing(
    conn: psycopg.Connection, keys: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], dict]:
    """The bodies the hub holds for these (kind, key) pairs, locked until the transaction ends."""
    if not keys:
        return {}
    rows = conn.execute(
        f"SELECT r.kind, r.key, r.body FROM {SCHEMA}.record r "
        "JOIN unnest(%s::text[], %s::text[]) AS k(kind, key) ON r.kind = k.kind AND r.key = k.key "
        "FOR UPDATE OF r",
        ([k for k, _ in keys], [k for _, k in keys]),
    ).fetchall()
    return {(kind, key): body for kind, key, body in rows}


def lock_for_push(conn: psycopg.Connection) -> None:
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (PUSH_LOCK,))


def insert(
    conn: psycopg.Connection, rows: Iterable[tuple[str, str, str, dict]], machine: str
) -> int:
    """New objects (kind, key, namespace, body), each with the next sequence value."""
    params = [(kind, key, ns, json.dumps(body, ensure_ascii=False), machine)
              for kind, key, ns, body in rows]  # fmt: skip
    if not params:
        return 0
    with conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {SCHEMA}.record (kind, key, namespace, seq, body, machine) "
            f"VALUES (%s, %s, %s, nextval('{SCHEMA}.change_seq'), %s::jsonb, %s)",
            params,
        )
    return len(params)


def update(conn: psycopg.Connection, rows: Iterable[tuple[str, str, dict]], machine: str) -> int:
    """Changed objects (kind, key, merged body): a new sequence value, this writer."""
    params = [
        (json.dumps(body, ensure_ascii=False), machine, kind, key) for kind, key, body in rows
    ]
    if not params:
        return 0
    with conn.cursor() as cur:
        cur.executemany(
            f"UPDATE {SCHEMA}.record SET body = %s::jsonb, machine = %s, "
            f"seq = nextval('{SCHEMA}.change_seq'), written_by = current_user, written_at = now() "
            "WHERE kind = %s AND key = %s",
            params,
        )
    return len(params)


def page(
    conn: psycopg.Connection, after: int, namespaces: Sequence[str], limit: int
) -> list[HubRow]:
    """The next changes past `after` in these namespaces, in sequence order."""
    rows = conn.execute(
        f"SELECT seq, kind, key, namespace, body, written_by, machine FROM {SCHEMA}.record "
        "WHERE seq > %s AND namespace = ANY(%s) ORDER BY seq LIMIT %s",
        (after, list(namespaces), limit),
    ).fetchall()
    return [HubRow(*r) for r in rows]


def behind(conn: psycopg.Connection, after: int, namespaces: Sequence[str]) -> int:
    row = conn.execute(
        f"SELECT count(*) FROM {SCHEMA}.record WHERE seq > %s AND namespace = ANY(%s)",
        (after, list(namespaces)),
    ).fetchone()
    return int(row[0]) if row else 0


def counts(
    conn: psycopg.Connection, namespaces: Sequence[str]
) -> list[tuple[str, str, str, str, int]]:
    """(namespace, kind, role, machine, rows) the connected role may see: who wrote what."""
    return [tuple(r) for r in conn.execute(
        f"SELECT namespace, kind, written_by, machine, count(*) FROM {SCHEMA}.record "
        "WHERE namespace = ANY(%s) GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
        (list(namespaces),),
    ).fetchall()]  # fmt: skip
