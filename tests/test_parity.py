"""Issue 33: every host gets every surface, and the CLI speaks one language. The migration map
applies wherever a store opens; the convention-capture nudge keeps its cooldown marker, which
sweep prunes; the MCP server serves the checkout it runs in; and one CLI language: --json on
every command that prints data, the checkout's namespace for every command that takes one,
help that says what its words mean, and a closed pipe that ends quietly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zmem import MemoryStore

CANONICAL = "project:github.com/acme/widget"


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    repo = tmp_path / "widget"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text(
        '[core]\n\tbare = false\n[remote "origin"]\n\turl = git@github.com:acme/widget.git\n'
    )
    return repo


def test_the_migration_map_applies_when_any_store_opens(run_cli, store_path, checkout, monkeypatch):
    with MemoryStore.open(store_path) as s:
        s.add("Run the integration suite with --reruns 2.", namespace="project:oldname",
              type="lesson", signal="test")  # fmt: skip
    monkeypatch.setenv("ZMEM_NS_MIGRATION_MAP", json.dumps({"project:oldname": str(checkout)}))
    # No hook has run: the CLI's own open records the alias.
    done = run_cli("recent", "--namespace", CANONICAL, "--json")
    assert [r["content"] for r in json.loads(done.stdout)["results"]] == [
        "Run the integration suite with --reruns 2."
    ]
    monkeypatch.chdir(checkout)
    found = json.loads(run_cli("recall", "--query", "integration suite reruns", "--json").stdout)
    assert found["count"] == 1
    with MemoryStore.open(store_path) as s:  # the library's open too, once
        assert s.namespace_set(CANONICAL).count("project:oldname") == 1


def _post_tool(run_cli, checkout: Path, path: str, session: str = "s-conv", tool: str = "Edit"):
    payload = {"session_id": session, "cwd": str(checkout), "hook_event_name": "PostToolUse",
               "tool_name": tool, "tool_input": {"file_path": str(checkout / path)},
               "tool_response": {"success": True}}  # fmt: skip
    done = run_cli("hook", "PostToolUse", "--host", "claude", input=json.dumps(payload))
    assert done.exit_code == 0
    return done.output


def test_editing_a_conventions_file_nudges_once_a_session_and_sweep_prunes_the_marker(
    run_cli, checkout, isolated_env
):
    import os
    import time

    data = isolated_env / "data"
    assert _post_tool(run_cli, checkout, "src/app.py") == ""  # an ordinary file: no nudge
    out = _post_tool(run_cli, checkout, "AGENTS.md")
    ctx = json.loads(out)["hookSpecificOutput"]
    assert (
        ctx["hookEventName"] == "PostToolUse"
        and "AGENTS.md holds this project's" in (ctx["additionalContext"])
    )
    marker = next(data.glob(".convention-prompted-*"))
    assert _post_tool(run_cli, checkout, ".github/workflows/ci.yml") == ""  # once a session
    assert _post_tool(run_cli, checkout, "ruff.toml", session="another") != ""
    log = (data / "zmem-bg.log").read_text()
    assert log.count("reason=nudged") == 2
    old = time.time() - 30 * 86400
    os.utime(marker, (old, old))
    assert run_cli("sweep").exit_code == 0
    assert not marker.exists()
