"""`doctor`: read-only install diagnostics. It inspects the resolved store path (and env
split-brain), the Python and SQLite runtime, the store's schema, the data-dir sidecars and the
host surfaces (plugin manifests, hook configs, memory skill), and never creates, migrates or
repairs anything."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import apsw

from zmem import config
from zmem.db.migrate import SCHEMA_VERSION, schema_version
from zmem.hosts import client, namespace

OK, WARN, FAIL = "ok", "warn", "fail"
_SYNCED = ("OneDrive", "Dropbox", "iCloud", "Google Drive")


def _check(name: str, status: str, detail: str, **extra: Any) -> dict[str, Any]:
    return {"check": name, "status": status, "detail": detail, **extra}


def run(project: str | None = None, repo_root: str | None = None) -> dict[str, Any]:
    checks: list[dict[str, Any]] = []
    try:
        settings = config.load_settings()
    except Exception as exc:  # a refused setting is itself the finding
        return {"ok": False, "checks": [_check("settings", FAIL, str(exc))]}
    store = settings.store_path
    checks.append(_store_path(settings, store))
    checks.append(
        _check(
            "python",
            OK if sys.version_info >= (3, 11) else FAIL,
            f"{sys.version.split()[0]} (supported floor 3.11)",
        )
    )
    fts5 = "ENABLE_FTS5" in apsw.compile_options
    checks.append(
        _check("sqlite", OK if fts5 else FAIL, f"SQLite {apsw.sqlite_lib_version()}, FTS5 {fts5}")
    )
    checks.append(_schema(store))
    checks.append(_data_dir(settings.data_dir))
    checks.append(_surfaces(Path(repo_root) if repo_root else Path(__file__).resolve().parents[3]))
    if project:
        checks.append(_check("namespace", OK, namespace.derive(project), project=project))
    for w in settings.warnings:
        checks.append(_check("setting", WARN, w))
    return {"ok": all(c["status"] != FAIL for c in checks), "checks": checks}


def _store_path(settings: config.Settings, store: Path) -> dict[str, Any]:
    detail = str(store)
    status = OK
    env_store, env_data = os.environ.get("ZMEM_STORE"), os.environ.get("ZMEM_DATA")
    if env_store and env_data and Path(env_store).expanduser().parent != settings.data_dir:
        status, detail = WARN, f"{store} is outside ZMEM_DATA={env_data} (split brain: hooks log"
        detail += " and queue under ZMEM_DATA, the store lives elsewhere)"
    if any(part in str(store) for part in _SYNCED):
        status, detail = WARN, f"{store} is in a synced folder; SQLite WAL files do not sync safely"
    return _check("store-path", status, detail, path=str(store))


def _schema(store: Path) -> dict[str, Any]:
    if not store.exists():
        return _check("schema", WARN, f"no store yet at {store} (created on first write)")
    if not os.access(store, os.R_OK):
        return _check("schema", FAIL, f"{store} is not readable")
    try:
        conn = apsw.Connection(str(store), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            conn.set_busy_timeout(2000)
            version = schema_version(conn)
        finally:
            conn.close()
    except apsw.Error as exc:
        return _check("schema", FAIL, f"cannot read {store}: {exc}")
    if version > SCHEMA_VERSION:
        return _check("schema", FAIL, f"schema v{version} is newer than this client (v13)")
    status = OK if version == SCHEMA_VERSION else WARN
    detail = f"schema v{version}" + ("" if status == OK else " (migrates on next open)")
    writable = os.access(store, os.W_OK)
    return _check("schema", status, detail, version=version, writable=writable)


def _data_dir(data: Path) -> dict[str, Any]:
    log = data / client.LOG_NAME
    last = ""
    try:
        with open(log, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 400))
            last = fh.read().decode("utf-8", "replace").splitlines()[-1]
    except (OSError, IndexError):
        pass
    daemon = (data / client.SOCKET_NAME).exists()
    return _check(
        "data-dir",
        OK,
        f"{data}; resident process socket {'present' if daemon else 'absent'}",
        last_hook=last,
    )


def _surfaces(root: Path) -> dict[str, Any]:
    wanted = {
        "claude-plugin": root / ".claude-plugin" / "plugin.json",
        "claude-hooks": root / "hooks" / "hooks.json",
        "codex-plugin": root / ".codex-plugin" / "plugin.json",
        "codex-hooks": root / "hooks" / "codex.json",
        "zcode-hooks": root / "hooks" / "zcode.json",
        "memory-skill": root / "skills" / "memory" / "SKILL.md",
        "store-script": root / "skills" / "memory" / "scripts" / "store.py",
        "launcher": root / "hooks" / "zmem_hook.py",
    }
    found: dict[str, bool] = {}
    for name, path in wanted.items():
        ok = path.is_file()
        if ok and path.suffix == ".json":
            try:
                json.loads(path.read_text())
            except ValueError:
                ok = False
        found[name] = ok
    missing = [k for k, v in found.items() if not v]
    status = OK if not missing else WARN
    detail = f"{root}: " + ("all present" if not missing else "missing " + ", ".join(missing))
    return _check("host-surfaces", status, detail, surfaces=found)


def human(report: dict[str, Any]) -> str:
    lines = [f"[{c['status']:4}] {c['check']}: {c['detail']}" for c in report["checks"]]
    lines.append("doctor: " + ("all checks passed" if report["ok"] else "problems found"))
    return "\n".join(lines)
