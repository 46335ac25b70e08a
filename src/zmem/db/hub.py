"""The team hub's side in PostgreSQL (issue 32), through psycopg 3: connecting (libpq finds the
credentials: a password file, PG* variables, a service file; none ever reaches a message), the
hub schema and its versioned migrations, the member role, its grants and session bounds, the
admin's view of the team (members, removal), and the statements a sync runs: a push batch
through the hub's own push() function (the hub sets sequence, author and time) and a pull page
read between two snapshots (no lock orders visibility; docs/decisions.md)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zmem.errors import HubRefused, HubUnavailable, UsageError

if TYPE_CHECKING:
    import psycopg

SCHEMA = "zmem_hub"
KINDS = ("memory", "link", "episode", "episode_memory")  # the record table's CHECK says these
MEMBER_ROLE = "zmem_hub_member"
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


_LOOPBACK = ("localhost", "127.0.0.1", "::1", "[::1]")
_SECURE_MODES = ("require", "verify-ca", "verify-full")


def transport_warning(url: str) -> str | None:
    """A line to print when the hub is reached over the network in plain text: a host other
    than loopback or a local socket, with an sslmode below `require` (libpq's default,
    `prefer`, falls back to plain text without saying so)."""
    psycopg = _driver()
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return None
    if info.get("service") and not info.get("host"):
        return None  # the service file says; libpq reads it, not us
    hosts = [h for h in str(info.get("host") or "").split(",") if h]
    remote = [
        h for h in hosts
        if not h.startswith("/") and h.lower() not in _LOOPBACK and not h.startswith("127.")
    ]  # fmt: skip
    if not remote or str(info.get("sslmode") or "prefer") in _SECURE_MODES:
        return None
    return (
        f"the hub {remote[0]} is reached without sslmode=require: memories and the login would "
        "cross the network in plain text if the server offered no TLS; add "
        "?sslmode=verify-full (or require) to the URL"
    )


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
        raise connect_failure(str(exc), where) from None
    return conn


def connect_failure(message: str, where: str) -> Exception:
    """libpq's message for a connection that failed, as the CLI's refusal: the credentials or
    the role (HubRefused, exit 2) or a hub that does not answer (HubUnavailable, exit 3)."""
    text = " ".join(message.split()).lower()
    if any(s in text for s in _REFUSED):
        return HubRefused(
            f"the hub {where} refused the connection ({_reason(text)}): check the role's "
            "password in ~/.pgpass, PGPASSWORD or the service file"
        )
    return HubUnavailable(f"the hub {where} is unreachable ({_reason(text)}); nothing changed")


def _reason(text: str) -> str:
    """The server's own reason, without the connection parameters libpq prefixes."""
    for marker in ("fatal:", "error:"):
        if marker in text:
            return text.split(marker, 1)[1].strip()[:160]
    return text.split(": ", 1)[-1][:160]


def refused_errors() -> tuple[type[Exception], ...]:
    """psycopg's errors for a statement the server refuses this login (privileges)."""
    return (_driver().errors.InsufficientPrivilege,)


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
    # Imported here: reading the package's files is for `hub init`, not for every sync.
    from importlib import resources

    out = []
    for entry in sorted(resources.files("zmem.db").joinpath("hub_migrations").iterdir(),
                        key=lambda e: e.name):  # fmt: skip
        if entry.name.endswith(".sql"):
            out.append((int(entry.name.split("_", 1)[0]), entry.name, entry.read_text("utf-8")))
    return out


# The newest migration's number (hub_migrations/); tests/test_hub.py holds the two together.
SCHEMA_VERSION = 3


def version(conn: psycopg.Connection) -> int | None:
    """The hub schema's version, None when the database holds no hub."""
    row = conn.execute("SELECT to_regclass('zmem_hub.meta') IS NOT NULL").fetchone()
    if not row or not row[0]:
        return None
    found = conn.execute("SELECT value FROM zmem_hub.meta WHERE key = 'schema_version'").fetchone()
    return int(found[0]) if found else 0


def init(conn: psycopg.Connection) -> tuple[int | None, int]:
    """Create or migrate the hub schema, one transaction per migration, and the member role
    with its privileges; every member login gets the session bounds (member_bounds). Returns
    (version before, version after)."""
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
        # Members read through row level security and write only through push() (0002):
        # the sequence, the author and an object's first content are the hub's.
        conn.execute(f"REVOKE INSERT, UPDATE, DELETE ON {SCHEMA}.record FROM {MEMBER_ROLE}")
        conn.execute(f"REVOKE ALL ON SEQUENCE {SCHEMA}.change_seq FROM {MEMBER_ROLE}")
        conn.execute(f"GRANT SELECT ON {SCHEMA}.record TO {MEMBER_ROLE}")
        conn.execute(f"GRANT SELECT ON {SCHEMA}.access, {SCHEMA}.meta TO {MEMBER_ROLE}")
        conn.execute(f"GRANT EXECUTE ON FUNCTION {SCHEMA}.push(jsonb, text) TO {MEMBER_ROLE}")
    for role in member_logins(conn):
        bound_member(conn, role)
    return before, current


# What `hub init` and `hub grant` set on every member login (ALTER ROLE ... SET): a statement
# that runs longer, or a transaction left open and idle longer, is ended by the server. No
# member's open transaction can hold back another member's sync anyway (pulls read past a
# snapshot, pushes skip an object another session holds); these bound what one costs the hub.
MEMBER_BOUNDS = {
    "statement_timeout": "60s",
    "idle_in_transaction_session_timeout": "30s",
    "lock_timeout": "10s",
}


def member_logins(conn: psycopg.Connection) -> list[str]:
    """Every role granted the member role, and every role an access row names."""
    rows = conn.execute(
        "SELECT r.rolname FROM pg_roles r JOIN pg_auth_members m ON m.member = r.oid "
        "JOIN pg_roles g ON g.oid = m.roleid AND g.rolname = %s "
        f"UNION SELECT role FROM {SCHEMA}.access ORDER BY 1",
        (MEMBER_ROLE,),
    ).fetchall()
    return [r[0] for r in rows]


def bound_member(conn: psycopg.Connection, role: str) -> bool:
    """Set MEMBER_BOUNDS on one login; False when this admin may not alter that role (it is
    reported, not fatal: the bounds protect the hub's load, not any member's correctness)."""
    from psycopg import sql

    psycopg = _driver()
    try:
        with conn.transaction():
            for name, value in MEMBER_BOUNDS.items():
                conn.execute(
                    sql.SQL("ALTER ROLE {} SET {} = {}").format(
                        sql.Identifier(role), sql.Identifier(name), sql.Literal(value)
                    )
                )
    except psycopg.Error:
        return False
    return True


PERSONAL_PREFIX = "personal:"


def hub_namespace(namespace: str, role: str) -> str:
    """Where the hub keeps a local namespace: user:global is the role's personal namespace."""
    from zmem.models import GLOBAL_NAMESPACE

    return PERSONAL_PREFIX + role if namespace == GLOBAL_NAMESPACE else namespace


def local_namespace(namespace: str) -> str:
    from zmem.models import GLOBAL_NAMESPACE

    return GLOBAL_NAMESPACE if namespace.startswith(PERSONAL_PREFIX) else namespace


def grant(conn: psycopg.Connection, role: str, namespaces: Sequence[str], can_write: bool) -> bool:
    """Let `role` (an existing login role) read, and unless read-only write, these namespaces.
    Returns whether the member bounds could be set on the login."""
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
    return bound_member(conn, role)


def revoke(conn: psycopg.Connection, role: str, namespaces: Sequence[str]) -> int:
    with conn.transaction():
        cur = conn.execute(
            f"DELETE FROM {SCHEMA}.access WHERE role = %s AND namespace = ANY(%s)",
            (role, list(namespaces)),
        )
        return cur.rowcount


def access(conn: psycopg.Connection) -> tuple[str, dict[str, bool]]:
    """(the login, its namespaces: namespace -> may write). The personal namespace is not
    listed: every member reads and writes its own."""
    role = conn.execute("SELECT session_user").fetchone()[0]
    rows = conn.execute(
        f"SELECT namespace, can_write FROM {SCHEMA}.access WHERE role = session_user"
    ).fetchall()
    return role, {ns: bool(w) for ns, w in rows}


# ---- administering a team (the admin: the tables' owner) ------------------------------------


def members(conn: psycopg.Connection) -> list[dict[str, Any]]:
    """Every member: grants (namespace, may write), memories written, retired by them, and
    the time of their last change."""
    grants: dict[str, list[tuple[str, bool]]] = {r: [] for r in member_logins(conn)}
    for role, ns, can_write in conn.execute(
        f"SELECT role, namespace, can_write FROM {SCHEMA}.access ORDER BY 1, 2"
    ).fetchall():
        grants.setdefault(role, []).append((ns, bool(can_write)))
    written = {
        r[0]: (r[1], r[2], r[3])
        for r in conn.execute(
            f"SELECT written_by, count(*) FILTER (WHERE kind = 'memory'), "
            "count(*), max(written_at) "
            f"FROM {SCHEMA}.record GROUP BY 1"
        ).fetchall()
    }
    retired = {
        r[0]: (r[1], r[2])
        for r in conn.execute(
            f"SELECT retired_by, count(*), max(retired_at) FROM {SCHEMA}.record "
            "WHERE retired_by IS NOT NULL GROUP BY 1"
        ).fetchall()
    }
    member_set = set(member_logins(conn))
    out = []
    for role in sorted(set(grants) | set(written)):
        memories, objects, last_write = written.get(role, (0, 0, None))
        n_retired, last_retire = retired.get(role, (0, None))
        last = max((t for t in (last_write, last_retire) if t is not None), default=None)
        out.append({
            "role": role,
            "member": role in member_set,
            "grants": [{"namespace": ns, "write": w} for ns, w in grants.get(role, [])],
            "memories_written": int(memories),
            "objects_written": int(objects),
            "retired": int(n_retired),
            "last_change": last.isoformat() if last is not None else None,
        })  # fmt: skip
    return out


def remove(
    conn: psycopg.Connection, role: str, *, purge: bool, restore: bool, reason: str
) -> dict[str, Any]:
    """Take every grant and the member role from `role`; with `purge`, retire every live
    memory it wrote (a change each, so every machine pulls the retirement and its reason);
    with `restore`, bring back as new live rows (their predecessor named in update_of) the
    memories of other members that `role` retired. One transaction."""
    from psycopg import sql

    with conn.transaction():
        grants = conn.execute(f"DELETE FROM {SCHEMA}.access WHERE role = %s", (role,)).rowcount
        was_member = role in member_logins(conn)
        if was_member:
            conn.execute(
                sql.SQL("REVOKE {} FROM {}").format(
                    sql.Identifier(MEMBER_ROLE), sql.Identifier(role)
                )
            )
        purged = 0
        if purge:
            purged = conn.execute(
                f"UPDATE {SCHEMA}.record SET body = body || jsonb_build_object("
                "'superseded_at', to_char(now() AT TIME ZONE 'UTC', "
                "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), 'valid_until', to_char(now() AT TIME "
                "ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), 'supersede_reason', %s::text), "
                "retired_by = session_user, retired_machine = 'hub', retired_at = now() "
                "WHERE kind = 'memory' AND written_by = %s AND jsonb_typeof(body) = 'object' "
                "AND body->>'superseded_at' IS NULL",
                (reason, role),
            ).rowcount
        restored = 0
        if restore:
            restored = conn.execute(
                f"INSERT INTO {SCHEMA}.record (kind, key, namespace, seq, body, written_by, "
                "machine) "
                "SELECT 'memory', n.id, r.namespace, 0, (r.body - '{superseded_at,valid_until,"
                "supersede_reason,merged_from}'::text[]) || jsonb_build_object('id', n.id, "
                "'update_of', r.key, 'ingestion_ts', n.at, 'valid_from', n.at, 'refreshed_at', "
                "NULL, 'merged_from', '[]'::jsonb), r.written_by, 'restored by ' || session_user "
                f"FROM {SCHEMA}.record r CROSS JOIN LATERAL (SELECT gen_random_uuid()::text AS id, "
                "to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') AS at) n "
                "WHERE r.kind = 'memory' AND r.retired_by = %s AND r.written_by <> %s "
                "AND jsonb_typeof(r.body) = 'object' AND NOT EXISTS (SELECT 1 FROM "
                f"{SCHEMA}.record x WHERE x.kind = 'memory' AND x.body->>'update_of' = r.key "
                "AND x.machine LIKE 'restored by %%')",
                (role, role),
            ).rowcount
    return {"role": role, "grants_removed": grants, "was_member": was_member,
            "purged": purged, "restored": restored}  # fmt: skip


# ---- a sync's statements ---------------------------------------------------------------------


@dataclass(frozen=True)
class HubRow:
    seq: int
    kind: str
    key: str
    namespace: str  # as the hub keeps it: what row level security checked
    body: Any  # whatever the hub holds: a puller validates it before anything is applied
    written_by: str
    machine: str
    retired_by: str | None = None
    retired_machine: str | None = None
    retired_at: str | None = None


def push(
    conn: psycopg.Connection, objects: Sequence[tuple[str, str, str, dict]], machine: str
) -> list[str]:
    """Hand a batch of (kind, key, local namespace, body) to the hub's push(); one outcome per
    object (new, retired, closed, unchanged, busy, refused: why)."""
    if not objects:
        return []
    doc = json.dumps(
        [{"kind": k, "key": key, "namespace": ns, "body": body} for k, key, ns, body in objects],
        ensure_ascii=False,
    )
    rows = conn.execute(
        f"SELECT ord, outcome FROM {SCHEMA}.push(%s::jsonb, %s) ORDER BY ord", (doc, machine)
    ).fetchall()
    out = ["refused: no answer"] * len(objects)
    for ord_, outcome in rows:
        out[int(ord_) - 1] = outcome
    return out


# A reader that has never pulled: every committed change is past it.
FIRST_SNAPSHOT = "1:1:"


def snapshot(conn: psycopg.Connection) -> str:
    """The hub's current snapshot: every change committed before it is visible in it, and a
    change still in flight is not, whenever it commits."""
    return str(conn.execute("SELECT pg_current_snapshot()::text").fetchone()[0])


_PAST = (
    "xid >= pg_snapshot_xmin(%(prev)s::pg_snapshot) "
    "AND NOT pg_visible_in_snapshot(xid, %(prev)s::pg_snapshot) "
)


def page(
    conn: psycopg.Connection,
    prev: str,
    window: str,
    after: int,
    namespaces: Sequence[str],
    limit: int,
) -> list[HubRow]:
    """The next changes in these namespaces that the snapshot `prev` did not see and `window`
    does, past sequence `after`, in sequence order: a change in flight when `prev` was taken
    is read once it commits, so no cursor passes a change it has not seen."""
    rows = conn.execute(
        "SELECT seq, kind, key, namespace, body, written_by, machine, retired_by, "
        "retired_machine, to_char(retired_at AT TIME ZONE 'UTC', "
        '\'YYYY-MM-DD"T"HH24:MI:SS.US"Z"\') '
        f"FROM {SCHEMA}.record WHERE "
        + _PAST
        + "AND pg_visible_in_snapshot(xid, %(window)s::pg_snapshot) "
        "AND seq > %(after)s AND namespace = ANY(%(ns)s) ORDER BY seq LIMIT %(limit)s",
        {"prev": prev, "window": window, "after": after, "ns": list(namespaces), "limit": limit},
    ).fetchall()
    return [HubRow(*r) for r in rows]


def behind(conn: psycopg.Connection, prev: str, namespaces: Sequence[str]) -> int:
    row = conn.execute(
        f"SELECT count(*) FROM {SCHEMA}.record WHERE " + _PAST + "AND namespace = ANY(%(ns)s)",
        {"prev": prev, "ns": list(namespaces)},
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
