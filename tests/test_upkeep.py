"""The session-start upkeep: what is due (three stat calls), what one run does (a verified
backup when due, organize and the sentinel sweep once a day), its lease (two sessions never run
it twice), the off switch, and the real hook launching it detached: the backup appears and one
upkeep line is logged, while a second session start right after launches nothing."""

from __future__ import annotations

import json
import time

import pytest

from zmem import MemoryStore, config
from zmem.hosts import sidecars, upkeep
from zmem.maintenance import backup, session_task


@pytest.fixture
def upkeep_on(monkeypatch, store_path, isolated_env):
    monkeypatch.setenv("ZMEM_SESSION_UPKEEP", "1")
    with MemoryStore.open(store_path, create=True) as s:
        s.add("Run make lint before pushing", namespace="project:u", type="convention",
              signal="user")  # fmt: skip
    return config.load_settings()


def _organize(settings):
    def job():
        with MemoryStore.open(settings=settings, create=False) as store:
            return store.organize().to_dict()

    return job


def test_due_and_one_run(upkeep_on):
    settings = upkeep_on
    assert session_task.due(settings) == ["backup", "organize", "sweep"]
    stale = sidecars.marker_path(settings.data_dir, "capture", "s1")
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.touch()
    import os

    os.utime(stale, (time.time() - 30 * 86400,) * 2)
    result = session_task.run(settings, _organize(settings))
    assert result.ran == ["backup", "organize", "sweep"] and not result.errors
    assert result.swept == 1 and result.organize["episode_ids"] and not result.organize["skipped"]
    snap = backup.backup_dir(settings, None)
    assert len(list(snap.glob("store-*.sqlite"))) == 1
    assert session_task.due(settings) == []  # nothing owed until the interval passes
    again = session_task.run(settings, _organize(settings))
    assert again.ran == [] and again.backup is None


def test_a_running_consolidate_defers_organize_to_the_next_session(upkeep_on):
    settings = upkeep_on
    with backup.maintenance_lock(settings.data_dir, "consolidate"):
        result = session_task.run(settings, _organize(settings))
    assert "organize" not in result.ran and not result.errors
    assert session_task.due(settings) == ["organize"]  # asked again next time
    assert session_task.run(settings, _organize(settings)).ran == ["organize"]


def test_the_lease_and_the_off_switch(upkeep_on, monkeypatch):
    settings = upkeep_on
    with backup.maintenance_lock(settings.data_dir, "session-task"):
        result = session_task.run(settings)
    assert result.skipped and result.ran == []
    assert not backup.backup_dir(settings, None).exists()
    monkeypatch.setenv("ZMEM_SESSION_UPKEEP", "0")
    assert session_task.due(config.load_settings()) == []
    assert upkeep.spawn(config.load_settings()) is False


def test_a_failed_backup_does_not_stop_the_sweep(upkeep_on, monkeypatch):
    settings = upkeep_on
    monkeypatch.setattr(backup.db, "verify", lambda path: ("damaged", None))
    result = session_task.run(settings)
    assert result.ran == ["sweep"] and result.errors and "backup" in result.errors[0]
    # still owed: the next session retries (organize was not offered to this run)
    assert session_task.due(settings) == ["backup", "organize"]


def test_the_session_start_hook_launches_it_detached(upkeep_on, run_cli, tmp_path):
    settings = upkeep_on
    payload = {"session_id": "s-up", "cwd": str(tmp_path), "hook_event_name": "SessionStart",
               "source": "startup"}  # fmt: skip
    result = run_cli("hook", "SessionStart", "--host", "claude", input=json.dumps(payload))
    assert result.exit_code == 0
    folder = backup.backup_dir(settings, None)
    log = settings.data_dir / "zmem-bg.log"
    deadline = time.time() + 60
    while time.time() < deadline:
        if log.exists() and "host=upkeep" in log.read_text():
            break
        time.sleep(0.1)
    lines = [line for line in log.read_text().splitlines() if "host=upkeep" in line]
    assert len(lines) == 1 and "reason=backup+organize+sweep" in lines[0], lines
    assert len(list(folder.glob("store-*.sqlite"))) == 1
    # The next session start owes nothing: no child, no second backup.
    assert session_task.due(settings) == []
    assert upkeep.spawn(settings) is False
