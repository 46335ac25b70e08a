"""`zmem sweep` through the CLI: stale cooldown sentinels go, fresh ones and every other file
stay (lookalike names, directories, symlinks, the store itself), --dry-run deletes nothing,
ZMEM_SENTINEL_SWEEP_DAYS sets the default age, and the hooks' own markers are what it sweeps."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from zmem.hosts import sidecars


def age(path: Path, days: float) -> None:
    t = time.time() - days * 86400
    os.utime(path, (t, t), follow_symlinks=False)


def layout(data: Path) -> dict[str, Path]:
    data.mkdir(parents=True, exist_ok=True)
    assert sidecars.claim_marker(data, "capture", "old-session")
    files = {
        "old_capture": sidecars.marker_path(data, "capture", "old-session"),
        "old_convention": data / ".convention-prompted-abc",
        "fresh": data / ".capture-prompted-new",
        "lookalike": data / "capture-prompted-x",
        "other": data / ".captured-prompted-y",
        "store": data / "store.sqlite",
    }
    for name, p in files.items():
        p.touch()
        if name != "fresh":
            age(p, 30)
    (data / ".capture-prompted-dir").mkdir()
    age(data / ".capture-prompted-dir", 30)
    target = data / "precious.txt"
    target.write_text("keep")
    (data / ".convention-prompted-link").symlink_to(target)
    age(data / ".convention-prompted-link", 30)
    return files


def test_sweep_removes_only_stale_sentinels(run_cli, isolated_env):
    data = isolated_env / "data"
    files = layout(data)
    dry = json.loads(run_cli("sweep", "--dry-run", "--json").output)
    assert dry["removed"] == 2 and dry["dry_run"] and all(p.exists() for p in files.values())
    done = json.loads(run_cli("sweep", "--json").output)
    assert done["removed"] == 2 and done["kept"] == 1
    assert not files["old_capture"].exists() and not files["old_convention"].exists()
    for name in ("fresh", "lookalike", "other", "store"):
        assert files[name].exists(), name
    assert (data / ".capture-prompted-dir").is_dir()
    assert (data / ".convention-prompted-link").is_symlink()
    assert (data / "precious.txt").read_text() == "keep"
    again = json.loads(run_cli("sweep", "--json").output)
    assert again["removed"] == 0  # idempotent
    # The marker is claimable again once swept.
    assert sidecars.claim_marker(data, "capture", "old-session")


def test_age_from_the_environment_and_other_dirs(run_cli, isolated_env, monkeypatch, tmp_path):
    data = isolated_env / "data"
    files = layout(data)
    monkeypatch.setenv("ZMEM_SENTINEL_SWEEP_DAYS", "60")
    assert json.loads(run_cli("sweep", "--json").output)["removed"] == 0
    assert json.loads(run_cli("sweep", "--max-age-days", "0", "--json").output)["removed"] == 3
    assert not files["fresh"].exists()
    other = tmp_path / "elsewhere"
    other.mkdir()
    stale = other / ".convention-prompted-zz"
    stale.touch()
    age(stale, 90)
    out = run_cli("sweep", "--marker-dir", str(other), "--marker-dir", str(tmp_path / "none"))
    assert out.exit_code == 0 and "removed 1 of 1" in out.output and not stale.exists()


def test_bad_input_is_refused(run_cli, isolated_env):
    data = isolated_env / "data"
    files = layout(data)
    result = run_cli("sweep", "--max-age-days", "-1")
    assert result.exit_code == 2
    assert all(p.exists() for p in files.values())
