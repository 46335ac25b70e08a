"""The SessionStart upkeep: what a session start asks for in the background (a backup when one
is due, a sweep of stale sentinels once a day), decided by two stat calls so a session that
owes nothing pays nothing, and run under its own lease so two sessions starting together never
run it twice. Consolidate and organize join it with their issue."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from zmem import config
from zmem.errors import StoreBusy, ZMemError
from zmem.maintenance import backup, sweep

SWEEP_MARKER = "sweep.last"
SWEEP_EVERY_S = 86400.0


def due(settings: config.Settings) -> list[str]:
    """The jobs a session start should launch now (cheap: file stats only)."""
    jobs: list[str] = []
    if not settings.session_upkeep:
        return jobs
    if settings.store_path.is_file():
        marker = settings.data_dir / backup.MARKER
        try:
            age = time.time() - marker.stat().st_mtime
        except OSError:
            age = None
        if age is None or age >= settings.backup_interval_days * 86400:
            jobs.append("backup")
    try:
        swept = time.time() - (settings.data_dir / SWEEP_MARKER).stat().st_mtime
    except OSError:
        swept = None
    if swept is None or swept >= SWEEP_EVERY_S:
        jobs.append("sweep")
    return jobs


@dataclass
class TaskResult:
    ran: list[str] = field(default_factory=list)
    skipped: str | None = None
    backup: dict[str, Any] | None = None
    swept: int = 0
    errors: list[str] = field(default_factory=list)


def run(settings: config.Settings) -> TaskResult:
    """Run what is due. Each job fails on its own (a failed backup does not stop the sweep),
    and nothing raises: this runs detached, where nobody would see an exception."""
    result = TaskResult()
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(backup.maintenance_lock(settings.data_dir, "session-task"))
        except StoreBusy:
            result.skipped = "another session's upkeep is running"
            return result
        jobs = due(settings)
        if "backup" in jobs:
            try:
                done = backup.backup(settings, if_due=True)
                result.backup = done.to_dict()
                result.ran.append("backup")
            except ZMemError as exc:
                result.errors.append(f"backup: {exc}")
        if "sweep" in jobs:
            try:
                swept = sweep.sweep([settings.data_dir], settings.sentinel_sweep_days)
                result.swept = swept.removed
                result.ran.append("sweep")
                settings.data_dir.mkdir(parents=True, exist_ok=True)
                (settings.data_dir / SWEEP_MARKER).touch()
            except (ZMemError, OSError) as exc:
                result.errors.append(f"sweep: {exc}")
    return result
