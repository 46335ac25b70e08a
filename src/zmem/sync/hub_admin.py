"""Administering the team hub and joining it (issues 32, 47): `hub init|grant|revoke|members|
remove` as the database's admin, `hub join|leave` as each machine. Every namespace named is
validated and given its one spelling; user:global is each member's own and never granted.
The URL's password is never kept; messages name the hub without it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from zmem import config
from zmem.db import hub as hubdb
from zmem.errors import UsageError
from zmem.models import GLOBAL_NAMESPACE, fold_namespace_case
from zmem.sync.hub import _as_refusal
from zmem.sync.hub_local import HubConfig, hub_dir, load_config, new_machine_id, save_config


def _admin(url: str, work: Callable[[Any], Any]) -> Any:
    """One admin statement run: the schema checked first, psycopg's errors as refusals."""
    conn = hubdb.connect(url)
    try:
        _require_schema(conn, url)
        return work(conn)
    except UsageError:
        raise
    except Exception as exc:
        raise _as_refusal(exc, hubdb.describe(url)) from None
    finally:
        conn.close()


def init(url: str) -> dict[str, Any]:
    """Create (or migrate) the hub schema in an existing database, as a role that may create
    schemas and roles. The URL is used once and kept nowhere."""
    conn = hubdb.connect(url)
    try:
        before, after = hubdb.init(conn)
        unbounded = [r for r in hubdb.member_logins(conn) if not hubdb.bound_member(conn, r)]
    except Exception as exc:
        raise _as_refusal(exc, hubdb.describe(url)) from None
    finally:
        conn.close()
    return {"hub": hubdb.describe(url), "schema_version_before": before,
            "schema_version": after, "member_role": hubdb.MEMBER_ROLE,
            "member_bounds": hubdb.MEMBER_BOUNDS, "unbounded_members": unbounded}  # fmt: skip


def grant(url: str, role: str, namespaces: Sequence[str], *, read_only: bool) -> dict[str, Any]:
    namespaces = _valid_namespaces(namespaces, sharing=False)
    bounded = _admin(url, lambda c: hubdb.grant(c, role, namespaces, can_write=not read_only))
    return {"role": role, "namespaces": list(namespaces), "write": not read_only,
            "bounded": bounded}  # fmt: skip


def revoke(url: str, role: str, namespaces: Sequence[str]) -> dict[str, Any]:
    namespaces = _valid_namespaces(namespaces, sharing=False)
    removed = _admin(url, lambda c: hubdb.revoke(c, role, namespaces))
    return {"role": role, "namespaces": list(namespaces), "removed": removed}


def members(url: str) -> list[dict[str, Any]]:
    return _admin(url, hubdb.members)


def remove(url: str, role: str, *, purge: bool, restore: bool) -> dict[str, Any]:
    """Take a member off the team (every grant, the member role); `purge` retires what the
    member wrote, `restore` brings back what the member retired of other members' rows."""
    reason = f"purged: written by {role}, who was removed from the team"

    def work(conn: Any) -> dict[str, Any]:
        known = {m["role"] for m in hubdb.members(conn)}
        if role not in known:
            raise UsageError(f"{role} is not a member of this hub (see `zmem hub members`)")
        return hubdb.remove(conn, role, purge=purge, restore=restore, reason=reason)

    return _admin(url, work)


def _valid_namespaces(namespaces: Sequence[str], *, sharing: bool = True) -> list[str]:
    """The namespaces named, each validated and in its one spelling. user:global is each
    member's own: shared across that member's machines, never granted to anyone."""
    from zmem.capture.namespaces import validate_namespace

    if not namespaces:
        raise UsageError("name at least one namespace to share (--namespace NS)")
    out = []
    for ns in namespaces:
        ns = fold_namespace_case(validate_namespace(ns))
        if ns.startswith(hubdb.PERSONAL_PREFIX) or (ns == GLOBAL_NAMESPACE and not sharing):
            raise UsageError(
                f"{ns} cannot be granted: user:global is each member's own, shared across that "
                "member's machines when they join with it, and never shown to anyone else"
            )
        out.append(ns)
    return list(dict.fromkeys(out))


def _require_schema(conn: Any, url: str) -> None:
    found = hubdb.version(conn)
    if found is None:
        raise UsageError(f"{hubdb.describe(url)} holds no ZMem hub: run `zmem hub init --url ...`")
    if found > hubdb.SCHEMA_VERSION:
        raise UsageError(
            f"the hub's schema is v{found}, newer than this ZMem knows (v{hubdb.SCHEMA_VERSION}):"
            " upgrade ZMem"
        )
    if found < hubdb.SCHEMA_VERSION:
        raise UsageError(
            f"the hub's schema is v{found}; this ZMem needs v{hubdb.SCHEMA_VERSION}: an admin "
            "runs `zmem hub init --url ...` to migrate it"
        )


def join(
    settings: config.Settings, url: str, namespaces: Sequence[str]
) -> tuple[HubConfig, list[str]]:
    """Record the hub and the namespaces this data dir shares, after checking that the hub
    answers, holds a current schema, and grants this role each namespace (a read-only grant
    joins too: its rows are pulled, never pushed). Nothing is written when any check fails;
    nothing is pushed until a sync. Returns the record and the warnings to print (the
    transport's own, hubdb.transport_warning, is the caller's to print before connecting)."""
    namespaces = _valid_namespaces(namespaces)
    if hubdb.has_password(url):
        raise UsageError(
            "the URL holds a password, which would be kept in plain text: put it in ~/.pgpass "
            "(host:port:dbname:user:password, mode 0600), PGPASSWORD or a service file, and "
            "give the URL without it"
        )
    existing = load_config(settings.data_dir)
    kept = hubdb.without_password(url)
    if existing is not None and existing.url != kept:
        raise UsageError(
            f"this data dir already shares with {hubdb.describe(existing.url)}: "
            "`zmem hub leave` first"
        )
    warnings: list[str] = []
    conn = hubdb.connect(url)
    try:
        _require_schema(conn, url)
        role, allowed = hubdb.access(conn)
    except UsageError:
        raise
    except Exception as exc:
        raise _as_refusal(exc, hubdb.describe(url)) from None
    finally:
        conn.close()
    wanted = list(dict.fromkeys([*(existing.namespaces if existing else []), *namespaces]))
    denied = [ns for ns in wanted if ns != GLOBAL_NAMESPACE and ns not in allowed]
    if denied:
        raise UsageError(
            f"the role {role} is not granted {', '.join(denied)} on this hub: an admin runs "
            f"`zmem hub grant --role {role} --namespace ...`"
        )
    read_only = [ns for ns in wanted if ns != GLOBAL_NAMESPACE and not allowed[ns]]
    if read_only:
        warnings.append(f"read-only for {role}: {', '.join(read_only)} (pulled, never pushed)")
    cfg = HubConfig(
        url=kept, namespaces=wanted,
        machine=existing.machine if existing else new_machine_id(),
        store=str(Path(settings.store_path).resolve()),
        joined_at=existing.joined_at if existing else config.now_iso(), role=role,
    )  # fmt: skip
    save_config(settings.data_dir, cfg)
    return cfg, warnings


def leave(settings: config.Settings, namespaces: Sequence[str] = ()) -> HubConfig | None:
    """Stop sharing: the hub record and this side's bookkeeping go; the store and the hub keep
    every row they hold. With namespaces, stop sharing only those."""
    import shutil

    cfg = load_config(settings.data_dir)
    if namespaces and cfg is not None:
        drop = {fold_namespace_case(ns) for ns in namespaces}
        unknown = sorted(drop - set(cfg.namespaces))
        if unknown:
            raise UsageError(f"this data dir does not share {', '.join(unknown)}")
        left = [ns for ns in cfg.namespaces if ns not in drop]
        if left:
            cfg.namespaces = left
            save_config(settings.data_dir, cfg)
            return cfg
    folder = hub_dir(settings.data_dir)
    if folder.exists():
        shutil.rmtree(folder)
    return cfg
