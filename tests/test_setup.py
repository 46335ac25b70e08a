"""`zmem setup` through the real CLI: each host's file gets ZMem's entries (pointing at this
install, carrying the store's location), a dry run writes nothing, a second run changes
nothing, the user's own entries stay, a changed file is backed up once, and a file ZMem cannot
read as JSON is refused with nothing written. The real Claude Code CLI after `zmem setup
claude` is in tests/test_live_hosts.py."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import pytest


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    return home


def test_claude_hooks_merge_and_are_idempotent(run_cli, home, isolated_env):
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    mine = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo mine"}]}]},
            "theme": "dark"}  # fmt: skip
    settings.write_text(json.dumps(mine))
    dry = run_cli("setup", "claude", "--dry-run")
    assert dry.exit_code == 0 and "would change" in dry.stdout
    assert json.loads(settings.read_text()) == mine
    done = run_cli("setup", "claude", "--json")
    assert done.exit_code == 0, done.output
    doc = json.loads(settings.read_text())
    assert doc["theme"] == "dark"
    stop = [h["command"] for e in doc["hooks"]["Stop"] for h in e["hooks"]]
    assert stop[0] == "echo mine" and len(stop) == 2
    ours = doc["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
    assert sys.executable in ours and "zmem_hook.py UserPromptSubmit --host claude" in ours
    assert f"ZMEM_DATA={isolated_env / 'data'}" in ours
    assert {"PostToolUseFailure", "SubagentStop", "PreCompact"} <= set(doc["hooks"])
    backup = settings.with_name("settings.json.zmem-backup")
    assert json.loads(backup.read_text()) == mine
    first = settings.read_bytes()
    again = json.loads(run_cli("setup", "claude", "--json").stdout)
    assert settings.read_bytes() == first and again["written"] == []
    assert json.loads(backup.read_text()) == mine  # the first backup is kept


def test_codex_and_zcode_hooks(run_cli, home, tmp_path, monkeypatch):
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    assert run_cli("setup", "codex").exit_code == 0
    codex = json.loads((tmp_path / "codex" / "hooks.json").read_text())["hooks"]
    assert "--host codex" in codex["SessionStart"][0]["hooks"][0]["command"]
    assert "PreCompact" not in codex and "PostToolUseFailure" not in codex
    monkeypatch.setenv("ZMEM_ZCODE_SETTINGS", str(tmp_path / "zc" / "settings.json"))
    assert run_cli("setup", "zcode").exit_code == 0
    zcode = json.loads((tmp_path / "zc" / "settings.json").read_text())["hooks"]
    assert "SubagentStart" not in zcode and "--host zcode" in json.dumps(zcode)


def test_mcp_clients(run_cli, home, isolated_env):
    toml = home / ".codex" / "config.toml"
    toml.parent.mkdir()
    toml.write_text('model = "o4"\n\n[mcp_servers.other]\ncommand = "x"\n')
    assert run_cli("setup", "mcp").exit_code == 0
    claude = json.loads((home / ".claude.json").read_text())["mcpServers"]["zmem"]
    assert claude["command"] == sys.executable and claude["args"][-2:] == ["mcp", "--stdio"]
    assert claude["env"] == {
        "ZMEM_DATA": str(isolated_env / "data"), "ZMEM_STORE": str(isolated_env / "store.sqlite")
    }  # fmt: skip
    parsed = tomllib.loads(toml.read_text())
    assert parsed["model"] == "o4" and parsed["mcp_servers"]["other"]["command"] == "x"
    assert parsed["mcp_servers"]["zmem"]["args"] == ["-m", "zmem", "mcp", "--stdio"]
    first = toml.read_text()
    assert run_cli("setup", "mcp").exit_code == 0 and toml.read_text() == first


def test_a_settings_file_that_is_not_json_is_refused(run_cli, home):
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{ not json")
    result = run_cli("setup", "claude")
    assert result.exit_code == 2 and "not valid JSON" in result.stderr
    assert settings.read_text() == "{ not json"
    assert not settings.with_name("settings.json.zmem-backup").exists()
    assert run_cli("setup", "vim").exit_code == 2
