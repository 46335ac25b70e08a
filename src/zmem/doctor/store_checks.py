"""The store-side checks: resolved settings, the store's path (and split-brain risk), its
location and access, and the schema surfaces v9-v13 read through zmem.store.inspect, which
opens the file so that nothing can be created or written. Also the data dir and the project
namespace."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from zmem import config
from zmem.capture import project_namespace as namespace
from zmem.doctor import base, host_checks
from zmem.doctor.base import FAIL, NA, OK, WARN, check, existing
from zmem.errors import StoreUnavailable, ZMemError
from zmem.layout import LOG_NAME, SOCKET_NAME
from zmem.store import inspect

_SYNCED = ("OneDrive", "Dropbox", "iCloud", "Mobile Documents", "Google Drive", "GoogleDrive")
_NETWORK_FS = {
    *("nfs", "nfs4", "cifs", "smb", "smbfs", "smb3", "afs", "9p", "ceph", "glusterfs"),
    *("fuse.sshfs", "sshfs", "davfs", "fuse.rclone", "fuse.s3fs", "lustre", "gpfs"),
}
MOUNTS = "/proc/self/mounts"  # Linux's mount table; absent elsewhere (the check then says so)
# Below this many live memories, an empty entity table can just mean nothing was nameable.
ENTITY_MIN_LIVE = 10


# ---- settings and the store's path -------------------------------------------------------


def load_settings(
    env: Mapping[str, str], store_path: str | None
) -> tuple[config.Settings, str | None]:
    try:
        return config.load_settings(env, store_path=store_path), None
    except ZMemError as exc:
        # The refused value is the finding; the other checks still run on the defaults.
        keep = {
            k: v for k, v in env.items() if k not in ("ZMEM_CAPTURE_MODE", "ZMEM_EMBED_PROFILE")
        }
        return config.load_settings(keep, store_path=store_path), str(exc)


def settings_check(
    env: Mapping[str, str], settings: config.Settings, refused: str | None
) -> dict[str, Any]:
    names = sorted(k for k in env if k.startswith("ZMEM_"))  # names only: values may be secret
    if refused:
        return check("settings", FAIL, refused, set=names)
    if settings.warnings:
        return check("settings", WARN, "; ".join(settings.warnings), set=names)
    return check("settings", OK, f"{len(names)} ZMEM_* variable(s) set", set=names)


def _resolve_store(env: Mapping[str, str]) -> Path:
    raw = env.get("ZMEM_STORE", "").strip()
    if raw:
        return Path(raw).expanduser()
    return config.default_data_dir(env) / config.STORE_FILENAME


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a.expanduser().absolute() == b.expanduser().absolute()


def store_path(
    settings: config.Settings,
    env: Mapping[str, str],
    flag: str | None,
    home: Path,
    project: str | None,
) -> dict[str, Any]:
    store = settings.store_path
    source = (
        "--store"
        if flag
        else "ZMEM_STORE"
        if env.get("ZMEM_STORE", "").strip()
        else "ZMEM_DATA"
        if env.get("ZMEM_DATA", "").strip()
        else "default"
    )
    risks: list[str] = []
    # Other store files: a process that misses ZMEM_STORE/ZMEM_DATA (a host started from another
    # shell, a hook env without them) opens one of these instead, and memory splits in two.
    candidates = [
        settings.data_dir / config.STORE_FILENAME,
        Path(config.DEFAULT_DATA_DIR).expanduser() / config.STORE_FILENAME,
    ]
    for var in ("CLAUDE_PLUGIN_DATA", "PLUGIN_DATA"):
        if env.get(var):
            candidates.append(Path(env[var]) / config.STORE_FILENAME)
    others: list[str] = []
    for other in candidates:
        if other.is_file() and not _same(other, store) and str(other) not in others:
            others.append(str(other))
    if others:
        risks.append("other store files exist: " + ", ".join(others))
    # Claude Code passes a settings file's "env" block to its hooks.
    host_env: dict[str, str] = {}
    for path, doc in host_checks.claude_settings(env, home, project):
        overrides = {
            k: str(v) for k, v in (doc.get("env") or {}).items() if k in ("ZMEM_STORE", "ZMEM_DATA")
        }
        if overrides:
            merged = {**env, **overrides}
            hooked, hooked_data = _resolve_store(merged), config.default_data_dir(merged)
            host_env[str(path)] = str(hooked)
            names = ", ".join(sorted(overrides))
            if not _same(hooked, store):
                risks.append(f"{path} sets {names}: its hooks use {hooked}")
            elif not _same(hooked_data, settings.data_dir):
                risks.append(f"{path} sets {names}: its hooks keep core.md/queue in {hooked_data}")
    status = WARN if risks else OK
    detail = f"{store} (from {source})" + (
        ": split-brain risk: " + "; ".join(risks) if risks else ""
    )
    return check(
        "store-path",
        status,
        detail,
        path=str(store),
        source=source,
        others=others,
        host_settings=host_env,
        outside_data_dir=not _same(store.parent, settings.data_dir),
    )


def _mount_fstype(path: Path) -> str | None:
    """The filesystem type of the mount holding `path`, from Linux's mount table."""
    try:
        lines = Path(MOUNTS).read_text().splitlines()
    except OSError:
        return None
    target = str(path)
    best, fstype = "", None
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), parts[1])
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, fstype = point, parts[2]
    return fstype


def _windows_remote(path: Path) -> bool:
    import ctypes

    drive = path.drive
    if drive.startswith(("\\\\", "//")):
        return True
    return bool(drive) and ctypes.windll.kernel32.GetDriveTypeW(drive + "\\") == 4  # REMOTE


def store_location(store: Path) -> dict[str, Any]:
    anchor = existing(store).resolve()
    resolved = store.resolve() if store.exists() else store.expanduser().absolute()
    text = f"{resolved}|{anchor}".lower()
    synced = [name for name in _SYNCED if name.lower() in text]
    fstype = None
    remote = False
    if base.windows():
        remote = _windows_remote(anchor)
    else:
        fstype = _mount_fstype(anchor)
        remote = fstype in _NETWORK_FS
    if synced:
        status, detail = WARN, f"{resolved} is in a synced folder ({synced[0]}): SQLite's WAL "
        detail += "and lock files do not sync safely; keep the store on a local disk"
    elif remote:
        status = WARN
        detail = f"{resolved} is on a network filesystem ({fstype or 'remote drive'}): SQLite "
        detail += "locking is unreliable there; keep the store on a local disk"
    else:
        status = OK
        detail = f"local path ({fstype})" if fstype else "local path (no synced-folder marker)"
    return check("store-location", status, detail, synced=bool(synced), fstype=fstype)


def store_access(store: Path) -> dict[str, Any]:
    if store.is_dir():
        return check("store-access", FAIL, f"{store} is a directory, not a store file")
    if store.exists():
        readable, writable = os.access(store, os.R_OK), os.access(store, os.W_OK)
        dir_ok = os.access(store.parent, os.W_OK | os.X_OK)
        extra = {"exists": True, "readable": readable, "writable": writable, "dir_writable": dir_ok}
        if not readable:
            return check("store-access", FAIL, f"{store} is not readable", **extra)
        if not writable:
            return check("store-access", WARN, f"{store} is read-only: writes will fail", **extra)
        if not dir_ok:
            detail = f"{store.parent} is not writable: SQLite cannot create its -wal/-shm files"
            return check("store-access", WARN, detail, **extra)
        return check("store-access", OK, "readable and writable", **extra)
    anchor = existing(store)
    creatable = anchor.is_dir() and os.access(anchor, os.W_OK | os.X_OK)
    extra = {"exists": False, "creatable": creatable, "nearest_existing": str(anchor)}
    if creatable:
        return check("store-access", OK, "no store yet; the first write can create it", **extra)
    return check("store-access", FAIL, f"cannot be created: {anchor} is not writable", **extra)


# ---- the store's schema ------------------------------------------------------------------


def schema_check(
    store: Path, settings: config.Settings
) -> tuple[inspect.StoreFacts | None, dict[str, Any]]:
    if not store.exists():
        return None, check("schema", NA, f"no store yet at {store} (created on first write)")
    try:
        facts = inspect.facts(store)
    except StoreUnavailable as exc:
        return None, check("schema", FAIL, str(exc))
    current, forward = inspect.schema_versions()
    v = facts.version
    extra = {"version": v, "expected": current, "open_mode": facts.open_mode}
    if v > current:
        detail = f"schema v{v} is newer than this client (v{current})"
        if v <= forward or settings.allow_newer_schema:
            return facts, check("schema", WARN, detail + ": used at your own risk", **extra)
        detail += ": every command refuses it; update zmem (or ZMEM_ALLOW_NEWER_SCHEMA=1)"
        return facts, check("schema", FAIL, detail, **extra)
    if "memory" not in facts.tables:
        return facts, check("schema", WARN, "not a zmem store yet (no memory table)", **extra)
    if v < current:
        detail = f"schema v{v}: migrates to v{current} on the next open"
        return facts, check("schema", WARN, detail, **extra)
    return facts, check("schema", OK, f"schema v{v}", **extra)


def _surface_gate(
    name: str, facts: inspect.StoreFacts | None, schema: dict[str, Any], added: int
) -> dict[str, Any] | None:
    """The n/a answer when a schema surface cannot be inspected, else None."""
    if facts is None:
        why = "no store yet" if schema["status"] == NA else "the store could not be read"
        return check(name, NA, why)
    if "memory" not in facts.tables:
        return check(name, NA, "not a zmem store yet")
    if facts.version < added:
        return check(name, NA, f"store is at v{facts.version}; migration {added} adds it")
    return None


def lineage(facts: inspect.StoreFacts | None, schema: dict[str, Any]) -> dict[str, Any]:
    gate = _surface_gate("lineage", facts, schema, 9)
    if gate or facts is None:
        return gate or {}
    missing = [c for c in inspect.LINEAGE_COLUMNS if c not in facts.memory_columns]
    superseded = facts.counts["memories"] - facts.counts["live"]
    if missing:
        detail = f"schema v{facts.version} lacks memory.{', memory.'.join(missing)}"
        return check("lineage", FAIL, detail, missing=missing)
    detail = "valid_until/update_of/taint present"
    return check("lineage", OK, detail, missing=[], superseded=superseded)


def entities(facts: inspect.StoreFacts | None, schema: dict[str, Any]) -> dict[str, Any]:
    gate = _surface_gate("entities", facts, schema, 10)
    if gate or facts is None:
        return gate or {}
    missing = [t for t in inspect.ENTITY_TABLES if t not in facts.tables]
    if missing:
        return check("entities", FAIL, f"missing tables: {', '.join(missing)}", missing=missing)
    counts = {t: facts.counts[t] for t in inspect.ENTITY_TABLES}
    live = facts.counts["live"]
    summary = (
        f"{counts['entity']} entities, {counts['entity_alias']} aliases, "
        f"{counts['memory_entity']} memory links"
    )
    hint = " (inspect with store.py entity-list)"
    if facts.entity_backfill_pending:
        detail = f"{summary}; entity backfill pending (runs on the next open)"
        return check("entities", WARN, detail + hint, counts=counts, backfill_pending=True)
    if live >= ENTITY_MIN_LIVE and counts["memory_entity"] == 0:
        detail = f"vacuous: no entity linked to any of {live} live memories"
        return check("entities", WARN, detail + hint, counts=counts, backfill_pending=False)
    return check("entities", OK, summary, counts=counts, backfill_pending=False)


def links(facts: inspect.StoreFacts | None, schema: dict[str, Any]) -> dict[str, Any]:
    gate = _surface_gate("links", facts, schema, 11)
    if gate or facts is None:
        return gate or {}
    missing = [
        *(["memory_link"] if "memory_link" not in facts.tables else []),
        *(["memory.trust_score"] if "trust_score" not in facts.memory_columns else []),
    ]
    if missing:
        return check("links", FAIL, f"missing {', '.join(missing)}", missing=missing)
    trust = facts.trust
    extra = {"links": facts.counts["memory_link"], "by_relation": facts.links_by_relation}
    if trust["out_of_range"]:
        detail = f"{trust['out_of_range']} row(s) with trust_score outside [0,1] "
        detail += f"(min {trust['min']}, max {trust['max']})"
        return check("links", FAIL, detail, trust=trust, **extra)
    span = "no rows" if trust["min"] is None else f"in [{trust['min']:g}, {trust['max']:g}]"
    detail = f"{extra['links']} link rows; trust_score {span}"
    return check("links", OK, detail + " (inspect with store.py links --id)", trust=trust, **extra)


def episodes(facts: inspect.StoreFacts | None, schema: dict[str, Any]) -> dict[str, Any]:
    gate = _surface_gate("episode-tables", facts, schema, 13)
    if gate or facts is None:
        return gate or {}
    missing = [t for t in inspect.EPISODE_TABLES if t not in facts.tables]
    if missing:
        return check("episode-tables", FAIL, f"missing tables: {', '.join(missing)}")
    counts = {
        "episodes": facts.counts["episode"],
        "open": facts.counts["episodes_open"],
        "memberships": facts.counts["episode_memory"],
    }
    detail = f"{counts['episodes']} episodes ({counts['open']} open), "
    detail += f"{counts['memberships']} memberships"
    return check("episode-tables", OK, detail, counts=counts)


def data_dir_check(data: Path) -> dict[str, Any]:
    log = data / LOG_NAME
    last = ""
    try:
        with open(log, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 400))
            last = fh.read().decode("utf-8", "replace").splitlines()[-1]
    except (OSError, IndexError):
        pass
    if not data.is_dir():
        return check("data-dir", OK, f"{data} does not exist yet (created on first use)")
    daemon = (data / SOCKET_NAME).exists()
    detail = f"{data}; resident process socket {'present' if daemon else 'absent'}"
    exposed = _readable_by_others(data)
    if exposed:
        detail = (
            f"{len(exposed)} path(s) other local users can read, e.g. {exposed[0]}: memories may "
            f"hold secrets; tighten with `chmod -R go-rwx {data}`"
        )
        return check("data-dir", WARN, detail, last_hook=last, socket=daemon, exposed=exposed)
    return check("data-dir", OK, detail, last_hook=last, socket=daemon)


def _readable_by_others(data: Path) -> list[str]:
    """The data dir itself and the files in it (not below: the model cache is public data)
    that grant group or other any access."""
    out = []
    for path in (data, *sorted(data.iterdir())):
        try:
            if path.is_symlink() or (path != data and path.is_dir()):
                continue
            if path.stat().st_mode & 0o077:
                out.append(str(path))
        except OSError:
            continue
    return out


def namespace_check(project: str | None, settings: config.Settings) -> dict[str, Any]:
    if not project:
        return check("namespace", NA, "pass --project <repo> to derive its namespace")
    ns = namespace.derive(project)
    root, gitdir = namespace.find_checkout(project)
    remote = bool(gitdir and namespace.remote_url(gitdir))
    legacy = namespace.migration_pairs(settings.ns_migration_map, ns)
    extra = {"project": project, "namespace": ns, "checkout": str(root), "remote": remote}
    raw = settings.ns_migration_map
    try:
        valid_map = raw is None or isinstance(json.loads(raw), dict)
    except ValueError:
        valid_map = False
    if not valid_map:
        detail = f"{ns}; ZMEM_NS_MIGRATION_MAP is not a JSON object (ignored by every open)"
        return check("namespace", WARN, detail, legacy=[], **extra)
    detail = f"{ns} (from the {'remote' if remote else 'checkout name'})"
    if legacy:
        detail += f"; legacy keys {', '.join(legacy)}"
    return check("namespace", OK, detail, legacy=legacy, **extra)
