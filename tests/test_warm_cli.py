"""`zmem recall`, `search` and `recent` answered by the resident process (issue 20): the same
output and exit code as in-process, the caller's directory deciding the namespace, the hooks'
setting ZMEM_HOOK_DAEMON=0 keeping it in-process, and a process started for next time when none
was up. Through the real entry point in subprocesses, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_hooks import started_resident
from zmem.store import MemoryStore

NS = "project:github.com/acme/webapp"


def zmem(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "zmem", *args], cwd=cwd,
                          env=dict(os.environ, **env), capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    repo = tmp_path / "webapp"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text(
        '[remote "origin"]\n\turl = git@github.com:acme/webapp.git\n'
    )
    return repo


@pytest.fixture
def seeded(store_path: Path) -> None:
    with MemoryStore.open(store_path, create=True) as s:
        s.add("The staging database listens on port 5433", namespace=NS, type="fact",
              signal="user")  # fmt: skip
        s.add("Deploy tickets go to the billing team", namespace="project:billing", type="fact",
              signal="user")  # fmt: skip


def cli_lines(data: Path) -> list[str]:
    log = data / "zmem-bg.log"
    return [x for x in log.read_text().splitlines() if "host=cli" in x] if log.exists() else []


def test_reads_are_answered_by_the_resident_process(seeded, checkout, isolated_env, monkeypatch):
    monkeypatch.setenv("ZMEM_HOOKD_IDLE_S", "30")
    data = isolated_env / "data"
    here = zmem("recall", "--query", "database port", "--json", cwd=checkout,
                ZMEM_HOOK_DAEMON="0")  # fmt: skip
    assert here.returncode == 0 and not cli_lines(data)
    with started_resident(data, ZMEM_HOOKD_IDLE_S="30"):
        warm = zmem("recall", "--query", "database port", "--json", cwd=checkout,
                    ZMEM_HOOK_DAEMON="1")  # fmt: skip
        assert warm.returncode == 0, warm.stderr
        assert [r["id"] for r in json.loads(warm.stdout)["results"]] == [
            r["id"] for r in json.loads(here.stdout)["results"]
        ]
        assert {r["namespace"] for r in json.loads(warm.stdout)["results"]} == {NS}
        assert len(cli_lines(data)) == 1 and "reason=answered" in cli_lines(data)[0]
        bad = zmem("recall", "--query", "x", "--limit", "0", cwd=checkout, ZMEM_HOOK_DAEMON="1")
        local = zmem("recall", "--query", "x", "--limit", "0", cwd=checkout,
                     ZMEM_HOOK_DAEMON="0")  # fmt: skip
        assert bad.returncode == local.returncode == 2 and bad.stderr == local.stderr
        text = zmem("search", "--text", "billing", "--all-namespaces", cwd=checkout,
                    ZMEM_HOOK_DAEMON="1")  # fmt: skip
        assert text.returncode == 0 and "billing team" in text.stdout
        other = zmem("--store", str(isolated_env / "other.sqlite"), "recent", cwd=checkout,
                     ZMEM_HOOK_DAEMON="1")  # fmt: skip
        assert other.returncode == 1  # another store: run here, where it does not exist
        assert len(cli_lines(data)) == 3  # recall, the refused recall, search; not the other


def test_a_read_with_no_process_up_starts_one(seeded, checkout, isolated_env, monkeypatch):
    data = isolated_env / "data"
    done = zmem("recall", "--query", "database port", cwd=checkout, ZMEM_HOOK_DAEMON="1",
                ZMEM_HOOKD_IDLE_S="5")  # fmt: skip
    assert done.returncode == 0 and "5433" in done.stdout
    sock = data / "zmem-hookd.sock"
    for _ in range(200):
        if sock.exists():
            break
        time.sleep(0.05)
    assert sock.exists()  # for the next read
    again = zmem("recall", "--query", "database port", cwd=checkout, ZMEM_HOOK_DAEMON="1",
                 ZMEM_HOOKD_IDLE_S="5")  # fmt: skip
    assert again.stdout == done.stdout and cli_lines(data)
