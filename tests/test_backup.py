"""backup and restore through the real CLI: verified snapshots, --if-due, retention that
touches nothing but store-*.sqlite, the single-flight lock, restore's refusals (an existing
store without --force, a held maintenance lock, a damaged snapshot, a network filesystem) with
nothing touched, the prerestore copy, and kill -9 at ten points of each: the store whole, no
unverified file passing for a backup, and a rerun completing."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import apsw
import pytest

from zmem import MemoryStore
from zmem.db import backup as db
from zmem.maintenance import backup as job

ZMEM = [sys.executable, "-m", "zmem"]


def seed(path: Path, n: int, width: int = 40, tag: str = "a") -> None:
    with MemoryStore.open(path, create=True) as s:
        for i in range(n):
            s.add(f"fact {tag}{i} about service{i % 13}: " + "x" * width, namespace="project:b",
                  type="fact", signal="test")  # fmt: skip


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*ZMEM, *args], capture_output=True, text=True, env=env or dict(os.environ), timeout=120
    )


def snapshots(folder: Path) -> list[Path]:
    return sorted(folder.glob("store-*.sqlite"))


def file_state(path: Path) -> tuple:
    return tuple(
        (p.name, p.read_bytes()) for p in sorted(path.parent.glob(path.name + "*")) if p.is_file()
    )


# ---- backup --------------------------------------------------------------------------------


def test_backup_writes_a_verified_private_snapshot(store_path, isolated_env):
    seed(store_path, 30)
    with MemoryStore.open(store_path) as s:
        s.supersede(s.list(limit=1)[0].id)
    done = run("backup", "--json")
    assert done.returncode == 0, done.stderr
    import json

    doc = json.loads(done.stdout)
    path = Path(doc["path"])
    assert path.parent == store_path.parent / "backups" and path.name.startswith("store-")
    assert (doc["total"], doc["live"]) == (30, 29)
    assert db.verify(path) == ("ok", (30, 29))
    assert path.stat().st_mode & 0o077 == 0
    assert not list(path.parent.glob(".partial-*"))
    # The snapshot is a store: it opens and recalls.
    with MemoryStore.open(path) as copy:
        assert copy.stats()["live"] == 29


def test_if_due_and_the_interval(store_path, isolated_env):
    seed(store_path, 3)
    assert run("backup").returncode == 0
    skipped = run("backup", "--if-due")
    assert skipped.returncode == 0 and "not due" in skipped.stdout
    assert len(snapshots(store_path.parent / "backups")) == 1
    env = {**os.environ, "ZMEM_BACKUP_INTERVAL_DAYS": "0"}
    assert run("backup", "--if-due", env=env).returncode == 0
    assert len(snapshots(store_path.parent / "backups")) == 2


def test_retention_prunes_only_old_snapshots(store_path, isolated_env, tmp_path):
    seed(store_path, 3)
    out = tmp_path / "bk"
    out.mkdir()
    keep = [out / "prerestore-20200101T000000Z.sqlite", out / "notes.txt", out / "store-x.db"]
    for p in keep:
        p.write_text("mine")
    for _ in range(4):
        assert run("backup", "--out-dir", str(out), "--retention", "2").returncode == 0
    assert len(snapshots(out)) == 2
    assert all(p.read_text() == "mine" for p in keep)
    env = {**os.environ, "ZMEM_BACKUP_DIR": str(out)}
    assert run("backup", "--retention", "0", env=env).returncode == 0
    assert len(snapshots(out)) == 3


def test_backup_refusals_write_nothing(store_path, isolated_env, tmp_path):
    missing = run("backup")
    assert missing.returncode == 1 and not store_path.exists()
    assert not (store_path.parent / "backups").exists()
    seed(store_path, 3)
    bad = run("backup", "--retention", "-1")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    with held_lock(isolated_env / "data", "backup"):
        busy = run("backup")
    assert busy.returncode == 3 and "backup" in busy.stderr
    assert not (store_path.parent / "backups").exists() or not snapshots(
        store_path.parent / "backups"
    )


def test_a_snapshot_that_fails_verification_is_deleted(store_path, isolated_env, monkeypatch):
    from zmem import config

    seed(store_path, 5)
    monkeypatch.setattr(db, "verify", lambda path: ("ok", (4, 4)))
    with pytest.raises(Exception) as exc:
        job.backup(config.load_settings())
    assert "failed verification" in str(exc.value)
    folder = store_path.parent / "backups"
    assert not snapshots(folder) and not list(folder.glob(".partial-*"))
    assert not (isolated_env / "data" / job.MARKER).exists()


def test_backup_beside_a_writer(store_path, isolated_env):
    """Writers keep committing during the copy; the snapshot is one consistent moment."""
    seed(store_path, 200, width=2000)
    writer = subprocess.Popen(
        [sys.executable, "-c", (
            "import sys, time\nfrom zmem import MemoryStore\n"
            f"s = MemoryStore.open({str(store_path)!r})\n"
            "for i in range(400):\n"
            "    s.add(f'writer row {i} ' + 'y' * 500, namespace='project:w', type='fact',"
            " signal='test')\n"
        )],
        env=dict(os.environ),
    )  # fmt: skip
    try:
        results = [run("backup", "--retention", "0") for _ in range(3)]
    finally:
        assert writer.wait(timeout=120) == 0
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results]
    for snap in snapshots(store_path.parent / "backups"):
        status, counts = db.verify(snap)
        assert status == "ok" and counts is not None and 200 <= counts[0] <= 600


# ---- restore -------------------------------------------------------------------------------


class held_lock:
    def __init__(self, data_dir: Path, name: str):
        self.path = data_dir / "locks" / f"{name}.lock"

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc):
        os.close(self.fd)


def backed_up(store_path: Path) -> Path:
    assert run("backup").returncode == 0
    return snapshots(store_path.parent / "backups")[-1]


def test_restore_round_trip_keeps_a_prerestore_copy(store_path, isolated_env):
    seed(store_path, 10)
    snap = backed_up(store_path)
    seed(store_path, 5, tag="later")  # five more after the snapshot
    before = db.verify(store_path)
    assert before[1] == (15, 15)
    refused = run("restore", "--from", str(snap))
    assert refused.returncode == 2 and "--force" in refused.stderr
    assert db.verify(store_path) == before
    done = run("restore", "--from", str(snap), "--force", "--json")
    assert done.returncode == 0, done.stderr
    import json

    doc = json.loads(done.stdout)
    assert db.verify(store_path) == ("ok", (10, 10))
    kept = Path(doc["prerestore"])
    assert kept.name.startswith("prerestore-") and db.verify(kept) == ("ok", (15, 15))
    with MemoryStore.open(store_path) as s:
        assert s.stats()["live"] == 10
    # Retention never prunes the rollback copy.
    assert run("backup", "--retention", "1").returncode == 0
    assert kept.exists()


@pytest.mark.parametrize("lock", ["backup", "consolidate"])
def test_restore_refuses_while_a_maintenance_lock_is_held(store_path, isolated_env, lock):
    seed(store_path, 4)
    snap = backed_up(store_path)
    before = file_state(store_path)
    with held_lock(isolated_env / "data", lock):
        done = run("restore", "--from", str(snap), "--force")
    assert done.returncode == 2 and "nothing touched" in done.stderr
    assert file_state(store_path) == before
    assert not list((store_path.parent / "backups").glob("prerestore-*"))


@pytest.mark.parametrize("kind", ["garbage", "truncated", "missing", "not a store", "itself"])
def test_restore_refuses_a_bad_snapshot(store_path, isolated_env, tmp_path, kind):
    seed(store_path, 4)
    snap = backed_up(store_path)
    bad = tmp_path / "bad.sqlite"
    if kind == "garbage":
        bad.write_bytes(os.urandom(8192))
    elif kind == "truncated":
        bad.write_bytes(snap.read_bytes()[: snap.stat().st_size // 2])
    elif kind == "not a store":
        conn = apsw.Connection(str(bad))
        conn.execute("CREATE TABLE t(x)")
        conn.close()
    elif kind == "itself":
        bad = store_path
    before = file_state(store_path)
    done = run("restore", "--from", str(bad), "--force")
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert file_state(store_path) == before


def test_restore_refuses_a_network_filesystem(store_path, isolated_env, monkeypatch):
    from zmem import config
    from zmem.errors import UsageError

    seed(store_path, 2)
    snap = backed_up(store_path)
    monkeypatch.setattr(job, "_filesystem", lambda path: "nfs4")
    before = file_state(store_path)
    with pytest.raises(UsageError, match="nfs4"):
        job.restore(config.load_settings(), str(snap), force=True)
    assert file_state(store_path) == before
    with pytest.raises(UsageError, match="network path"):
        job.check_local(Path("//server/share/store.sqlite"))


def test_restore_into_an_empty_place(store_path, isolated_env, tmp_path):
    seed(store_path, 6)
    snap = backed_up(store_path)
    other = tmp_path / "elsewhere" / "store.sqlite"
    env = {**os.environ, "ZMEM_STORE": str(other)}
    done = run("restore", "--from", str(snap), env=env)
    assert done.returncode == 0, done.stderr
    assert db.verify(other) == ("ok", (6, 6))


# ---- kill -9 -------------------------------------------------------------------------------


def settled(path: Path) -> tuple:
    """verify() of a store after a kill, as the next session sees it: a killed WAL writer can
    leave a log that only a read-write open recovers (a read-only one cannot)."""
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA quick_check").fetchall()
    conn.close()
    return db.verify(path)


def _kill_after(args: list[str], delay: float) -> int:
    proc = subprocess.Popen([*ZMEM, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(delay)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    return proc.wait(timeout=60)


def _duration(args: list[str]) -> float:
    t0 = time.monotonic()
    assert subprocess.run([*ZMEM, *args], capture_output=True, timeout=120).returncode == 0
    return time.monotonic() - t0


def test_kill_backup_at_ten_points(store_path, isolated_env):
    seed(store_path, 300, width=3000)
    expected = db.verify(store_path)
    folder = store_path.parent / "backups"
    span = _duration(["backup", "--retention", "0"])
    killed = 0
    for k in range(1, 11):
        killed += _kill_after(["backup", "--retention", "0"], span * k / 11) == -signal.SIGKILL
        # Every file that passes for a backup is a whole, verified copy; the store is intact.
        for snap in snapshots(folder):
            assert db.verify(snap) == expected, snap
        assert settled(store_path) == expected
    assert killed >= 5  # most points landed inside the run
    before = len(snapshots(folder))
    assert run("backup", "--retention", "0").returncode == 0
    assert len(snapshots(folder)) == before + 1
    assert not list(folder.glob(".partial-*"))  # the rerun cleared killed runs' copies


def test_kill_restore_at_ten_points(store_path, isolated_env):
    seed(store_path, 300, width=3000)
    snap = backed_up(store_path)
    seed(store_path, 40, width=3000, tag="later")
    new, old = db.verify(snap), db.verify(store_path)
    assert new != old
    args = ["restore", "--from", str(snap), "--force"]
    # Each round starts from the old store again.
    pristine = store_path.parent / "pristine.sqlite"
    assert db.snapshot(apsw.Connection(str(store_path)), pristine) == old[1]
    span = _duration(args)
    killed = 0
    for k in range(1, 11):
        for suffix in ("", "-wal", "-shm"):
            Path(str(store_path) + suffix).unlink(missing_ok=True)
        pristine_copy = pristine.read_bytes()
        store_path.write_bytes(pristine_copy)
        killed += _kill_after(args, span * k / 11) == -signal.SIGKILL
        state = settled(store_path)
        assert state in (old, new), (k, state)  # the old store or the new one, whole
        done = run(*args)  # a rerun completes
        assert done.returncode == 0, done.stderr
        assert db.verify(store_path) == new
    assert killed >= 5


def test_the_global_store_option_is_honoured(isolated_env, tmp_path):
    other = tmp_path / "other" / "store.sqlite"
    seed(other, 3)
    done = run("--store", str(other), "backup", "--json")
    assert done.returncode == 0, done.stderr
    assert snapshots(other.parent / "backups") and not (isolated_env / "store.sqlite").exists()
    snap = snapshots(other.parent / "backups")[0]
    restored = run("--store", str(tmp_path / "third.sqlite"), "restore", "--from", str(snap))
    assert restored.returncode == 0 and db.verify(tmp_path / "third.sqlite") == ("ok", (3, 3))


def test_a_long_lived_hook_process_reopens_a_restored_store(store_path, isolated_env):
    """The resident process keeps its connection between prompts: after a restore it must read
    the restored file, not the old one it still has open (and must not write into that)."""
    from zmem import config
    from zmem.hosts.verbs import Hooks
    from zmem.retrieval.request import RecallRequest

    seed(store_path, 4)
    snap = backed_up(store_path)
    seed(store_path, 3, tag="later")
    hooks = Hooks(config.load_settings())
    assert hooks.store.stats()["live"] == 7
    assert hooks.reopen_if_replaced() is False  # nothing changed: no reopen
    assert run("restore", "--from", str(snap), "--force").returncode == 0
    assert hooks.reopen_if_replaced() is True
    assert hooks.store.stats()["live"] == 4
    hits = hooks.store.read(RecallRequest.prefetch("fact later0", namespace="project:b")).hits
    assert all("later" not in h.content for h in hits)
    hooks.close()
