"""The SessionStart upkeep: what a session start asks for in the background (a backup when one
is due, organize and a sweep of stale sentinels checked once a day, a sync with the team hub
every ZMEM_HUB_SYNC_MINUTES once this data dir joined one), decided by a few stat calls so a
session that owes nothing pays nothing, and run under its own lease so two sessions starting
together never run it twice. Organize applies its own cadence and idle gates; the hub is only
ever reached from this detached child, never from a hook."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from zmem import config
from zmem.errors import StoreBusy, ZMemError
from zmem.maintenance import backup, sweep

SWEEP_MARKER = "sweep.last"
SWEEP_EVERY_S = 86400.0
# organize's cadence gate lives in the store; this marker only spares a session start from
# opening the store to ask it more than once a day.
ORGANIZE_MARKER = "organize.last"
ORGANIZE_EVERY_S = 86400.0
# Touched when a sync starts, success or not: a hub that is down is asked again next interval,
# not at every session start.
HUB_CONFIG = ("hub", "hub.json")
HUB_MARKER = ("hub", "sync.last")


def _age(path: Any) -> float | None:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return None


def due(settings: config.Settings) -> list[str]:
    """The jobs a session start should launch now (cheap: file stats only)."""
    jobs: list[str] = []
    if not settings.session_upkeep:
        return jobs
    if settings.store_path.is_file():
        age = _age(settings.data_dir / backup.MARKER)
        if age is None or age >= settings.backup_interval_days * 86400:
            jobs.append("backup")
        organized = _age(settings.data_dir / ORGANIZE_MARKER)
        if organized is None or organized >= ORGANIZE_EVERY_S:
            jobs.append("organize")
    swept = _age(settings.data_dir / SWEEP_MARKER)
    if swept is None or swept >= SWEEP_EVERY_S:
        jobs.append("sweep")
    if settings.hub_sync_minutes > 0 and settings.data_dir.joinpath(*HUB_CONFIG).is_file():
        synced = _age(settings.data_dir.joinpath(*HUB_MARKER))
        if synced is None or synced >= settings.hub_sync_minutes * 60:
            jobs.append("sync")
    return jobs


@dataclass
class TaskResult:
    ran: list[str] = field(default_factory=list)
    skipped: str | None = None
    sync: dict[str, Any] | None = None
    backup: dict[str, Any] | None = None
    swept: int = 0
    organize: dict[str, Any] | None = None
    errors: list[str] = field(default_factory=list)


def run(
    settings: config.Settings,
    organize: Callable[[], dict[str, Any]] | None = None,
    sync: Callable[[], dict[str, Any]] | None = None,
) -> TaskResult:
    """Run what is due. Each job fails on its own (a failed backup does not stop the sweep),
    and nothing raises: this runs detached, where nobody would see an exception. `organize`
    runs the organize job on the store (the front end opens it) and returns its report; it
    runs after the backup, so the snapshot holds the store as it was before."""
    # Imported here: the session-start hook imports this module for due(), and consolidate's
    # modules are ~6 ms it would load for nothing.
    from zmem.maintenance.consolidate import LockHeld

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
        if "organize" in jobs and organize is not None:
            try:
                result.organize = organize()
                result.ran.append("organize")
                (settings.data_dir / ORGANIZE_MARKER).touch()
            except LockHeld:
                pass  # a manual consolidate or organize is running: ask again next session
            except (ZMemError, OSError) as exc:
                result.errors.append(f"organize: {exc}")
                (settings.data_dir / ORGANIZE_MARKER).touch()  # not again on every start
        if "sync" in jobs and sync is not None:
            marker = settings.data_dir.joinpath(*HUB_MARKER)
            try:
                marker.touch()
                result.sync = sync()
                result.ran.append("sync")
            except (ZMemError, OSError) as exc:  # a hub down or refusing: reported, not raised
                result.errors.append(f"sync: {exc}")
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
