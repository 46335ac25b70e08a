"""`doctor`: read-only install diagnostics. Each check inspects one thing and reports ok, warn,
fail or n/a with a one-line detail and structured extras: the store side (store_checks), the
embeddings and MCP token (embedding_checks), the hosts' own configuration (host_checks), and the
runtime here. Nothing creates, migrates, repairs or rewrites anything: the store is opened
read-only (through zmem.store.inspect), host configs are only parsed, model hashes stay in
memory. Doctor sits at the store's level: front ends call it; it reads the store, never db/."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from zmem.doctor import embedding_checks, host_checks, hub_checks, store_checks
from zmem.doctor.base import FAIL, NA, OK, RANK, WARN, check
from zmem.store import inspect

PYTHON_FLOOR = (3, 11)


def run(
    project: str | None = None,
    repo_root: str | None = None,
    store_path: str | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Every check, in a fixed order; `ok` is False when any check failed."""
    env = os.environ if env is None else env
    settings, refused = store_checks.load_settings(env, store_path)
    store = settings.store_path
    home = Path.home()
    checks = [
        store_checks.settings_check(env, settings, refused),
        store_checks.store_path(settings, env, store_path, home, project),
        store_checks.store_location(store),
        _python(),
        _sqlite(),
        host_checks.windows_shell(env),
        store_checks.store_access(store),
    ]
    facts, schema = store_checks.schema_check(store, settings)
    checks += [
        schema,
        store_checks.lineage(facts, schema),
        store_checks.entities(facts, schema),
        store_checks.links(facts, schema),
        store_checks.episodes(facts, schema),
        embedding_checks.mcp_token(env),
        embedding_checks.embeddings(settings, facts),
        host_checks.native_memory(env, home, project),
        store_checks.data_dir_check(settings.data_dir),
        store_checks.namespace_check(project, settings),
        host_checks.surfaces(repo_root, home),
        host_checks.claude_plugin(env, Path(env.get("HOME") or home)),
        host_checks.wiring(env, Path(env.get("HOME") or home)),
        host_checks.codex_hooks(env, Path(env.get("HOME") or home)),
        hub_checks.hub(settings),
    ]
    summary = {s: sum(c["status"] == s for c in checks) for s in RANK}
    return {"ok": summary[FAIL] == 0, "summary": summary, "checks": checks}


def _python() -> dict[str, Any]:
    version = sys.version.split()[0]
    ok = sys.version_info >= PYTHON_FLOOR
    detail = f"{version} (supported floor {'.'.join(map(str, PYTHON_FLOOR))})"
    return check("python", OK if ok else FAIL, detail, version=version, executable=sys.executable)


def _sqlite() -> dict[str, Any]:
    version, fts5 = inspect.sqlite_features()
    return check(
        "sqlite", OK if fts5 else FAIL, f"SQLite {version}, FTS5 {fts5}", version=version, fts5=fts5
    )


def human(report: dict[str, Any]) -> str:
    lines = []
    for c in report["checks"]:
        lines.append(f"[{c['status']:4}] {c['check']}: {c['detail']}")
        health = c.get("embeddings_health") or {}
        if health.get("checksum_note"):
            lines.append(f"       note: {health['checksum_note']}")
            lines.append(f"       ({health['pinned']})")
    s = report["summary"]
    tally = f"{s[OK]} ok, {s[WARN]} warn, {s[FAIL]} fail, {s[NA]} n/a"
    lines.append(
        "doctor: " + ("no check failed" if report["ok"] else "problems found") + f" ({tally})"
    )
    return "\n".join(lines)
