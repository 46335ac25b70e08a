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


# ---- issue 31: the install's own entry point, --remove, refusals ---------------------------


def test_hooks_run_this_installs_entry_point(run_cli, home):
    from zmem import installation

    install = installation.detect()
    done = run_cli("setup", "claude", "--no-model", "--json")
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["install"]["launcher"] == str(install.launcher)
    doc = json.loads((home / ".claude" / "settings.json").read_text())
    command = doc["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    assert f"{install.python} -S {install.launcher} SessionStart --host claude" in command
    # This run is a checkout: its own tree, and setup says the wiring is not lasting.
    assert install.kind == "checkout" and install.launcher == installation.LAUNCHER
    human = run_cli("setup", "claude", "--no-model")
    assert "this install lives in a checkout" in human.stderr


def test_remove_puts_the_users_file_back_byte_for_byte(run_cli, home):
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    # Four-space indents and one line per hook: not the way ZMem writes JSON.
    mine = (
        '{\n    "theme": "dark",\n'
        '    "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo mine"}]}]}\n}\n'
    )
    settings.write_text(mine)
    assert run_cli("setup", "claude", "--no-model").exit_code == 0
    assert settings.read_text() != mine
    assert run_cli("setup", "claude", "--no-model").exit_code == 0  # a rerun changes nothing
    dry = run_cli("setup", "claude", "--remove", "--dry-run")
    assert dry.exit_code == 0 and "would be restored" in dry.stdout and settings.read_text() != mine
    done = run_cli("setup", "claude", "--remove")
    assert done.exit_code == 0 and "restored as it was before setup" in done.stdout
    assert settings.read_text() == mine
    assert not settings.with_name("settings.json.zmem-backup").exists()
    again = run_cli("setup", "claude", "--remove")
    assert again.exit_code == 0 and "unchanged (nothing of ZMem's)" in again.stdout


def test_remove_keeps_what_the_user_added_since_and_deletes_a_file_setup_made(
    run_cli, home, tmp_path, monkeypatch
):
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"theme": "dark"}')
    assert run_cli("setup", "claude", "--no-model").exit_code == 0
    doc = json.loads(settings.read_text())
    doc["model"] = "opus"  # the user's own change after setup
    doc["hooks"]["Stop"].insert(0, {"hooks": [{"type": "command", "command": "echo mine"}]})
    settings.write_text(json.dumps(doc))
    assert run_cli("setup", "claude", "--remove").exit_code == 0
    assert json.loads(settings.read_text()) == {
        "theme": "dark", "model": "opus",
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo mine"}]}]},
    }  # fmt: skip
    # Codex's hooks.json did not exist before setup: --remove leaves no file behind.
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    assert run_cli("setup", "codex", "--no-model").exit_code == 0
    hooks = tmp_path / "codex" / "hooks.json"
    assert hooks.exists()
    done = run_cli("setup", "codex", "--remove")
    assert done.exit_code == 0 and "deleted (setup had created it)" in done.stdout
    assert not hooks.exists()


def test_remove_mcp_entries(run_cli, home):
    (home / ".claude.json").write_text('{"numStartups": 3}')
    toml = home / ".codex" / "config.toml"
    toml.parent.mkdir()
    toml.write_text('model = "o4"\n')
    assert run_cli("setup", "mcp", "--no-model").exit_code == 0
    assert run_cli("setup", "mcp", "--remove").exit_code == 0
    assert json.loads((home / ".claude.json").read_text()) == {"numStartups": 3}
    assert toml.read_text() == 'model = "o4"\n'


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("setup", "vim"), "unknown host 'vim'"),
        (("setup", "claude", "--fetch-model", "--no-model"), "exclude each other"),
        (("setup", "claude", "--remove", "--fetch-model"), "--remove takes no model option"),
        (("setup", "codex", "--hermes-home", "/x"), "--hermes-home goes with"),
    ],
)
def test_bad_arguments_are_one_line_and_write_nothing(run_cli, home, args, message):
    done = run_cli(*args)
    assert done.exit_code == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and message in done.stderr
    assert list(home.iterdir()) == []


def _snapshot(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mode


@pytest.mark.parametrize(
    "content", ["{ not json", "[1, 2]", '{"hooks": []}', '{"hooks": {"Stop": 3}}']
)
def test_a_settings_file_zmem_cannot_read_is_refused_untouched(run_cli, home, content):
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(content)
    before = _snapshot(settings)
    for args in (("setup", "claude", "--no-model"), ("setup", "claude", "--remove")):
        done = run_cli(*args)
        assert done.exit_code == 2 and done.stderr.count("\n") == 1, done.output
        assert str(settings) in done.stderr and "fix it first" in done.stderr
        assert _snapshot(settings) == before
    assert sorted(p.name for p in settings.parent.iterdir()) == ["settings.json"]


def test_a_read_only_settings_file_is_refused_untouched(run_cli, home):
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"theme": "dark"}')
    settings.chmod(0o444)
    before = _snapshot(settings)
    done = run_cli("setup", "claude", "--no-model")
    assert done.exit_code == 2 and done.stderr.count("\n") == 1, done.output
    assert "is read-only" in done.stderr and "chmod u+w" in done.stderr
    assert _snapshot(settings) == before
    assert sorted(p.name for p in settings.parent.iterdir()) == ["settings.json"]


def test_a_settings_folder_zmem_cannot_write_is_refused(run_cli, home):
    """A read-only filesystem, made for real where the machine allows it (a tmpfs mounted
    read-only, as root), else a folder without write permission (as a user)."""
    import os
    import subprocess

    folder = home / ".claude"
    folder.mkdir()
    (folder / "settings.json").write_text('{"theme": "dark"}')
    before = _snapshot(folder / "settings.json")
    mounted = False
    if os.geteuid() == 0:
        shadow = home / "shadow"
        subprocess.run(["cp", "-a", str(folder), str(shadow)], check=True)
        mounted = (
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)],
                capture_output=True,
            ).returncode
            == 0
        )
        if mounted:  # an empty read-only folder: put the file back underneath first
            subprocess.run(["umount", str(folder)], check=True)
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)], check=True
            )
            subprocess.run(["cp", "-a", f"{shadow}/.", str(folder)], check=True)
            subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
    if not mounted:
        if os.geteuid() == 0:
            pytest.skip("cannot mount a read-only tmpfs here, and root ignores folder modes")
        folder.chmod(0o555)
    try:
        done = run_cli("setup", "claude", "--no-model")
        assert done.exit_code == 2 and done.stderr.count("\n") == 1, done.output
        assert str(folder / "settings.json") in done.stderr
        assert _snapshot(folder / "settings.json") == before
        assert sorted(p.name for p in folder.iterdir()) == ["settings.json"]
    finally:
        if mounted:
            subprocess.run(["umount", str(folder)], check=False)
        else:
            folder.chmod(0o755)


def test_setup_hermes_without_hermes_on_path_installs_and_says_how_to_activate(
    run_cli, home, tmp_path, monkeypatch
):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))  # no hermes beside
    hermes_home = tmp_path / "hermes"
    done = run_cli("setup", "hermes", "--hermes-home", str(hermes_home), "--no-model")
    assert done.exit_code == 0, done.output
    for name in ("zmem", "zmem_hooks"):
        plugin = hermes_home / "plugins" / name
        assert (plugin / "__init__.py").is_file() and (plugin / "zmem_bridge.py").is_file()
        record = json.loads((plugin / "zmem_install.json").read_text())
        assert "zmem" in record["modules"] and "mcp" not in record["modules"]
    assert "no hermes command on PATH" in done.stdout
    assert f"HERMES_HOME={hermes_home} hermes config set memory.provider zmem" in done.stdout
    assert not (hermes_home / "config.yaml").exists()  # nothing activated behind the user
    removed = run_cli("setup", "hermes", "--hermes-home", str(hermes_home), "--remove")
    assert removed.exit_code == 0 and "removed zmem" in removed.stdout
    assert list((hermes_home / "plugins").iterdir()) == []


def test_a_missing_piece_names_the_command_for_the_way_zmem_was_installed(tmp_path, monkeypatch):
    """One install is the whole product; a module missing from one (a broken or partial
    install) is one line with the repair command of that kind of install."""
    from zmem import installation

    pkg = tmp_path / "site-packages" / "zmem"
    pkg.mkdir(parents=True)
    uv = tmp_path / "uv-tool"
    (uv / "uv-receipt.toml").parent.mkdir()
    (uv / "uv-receipt.toml").write_text(
        '[tool]\nrequirements = [{ name = "zmem", path = "/w/zmem-0.2.0-py3-none-any.whl" }]\n'
    )
    pipx = tmp_path / "pipx"
    pipx.mkdir()
    meta = {"main_package": {"package_or_url": "/w/zmem-0.2.0-py3-none-any.whl"}}
    (pipx / "pipx_metadata.json").write_text(json.dumps(meta))
    plugin = tmp_path / "plugin-venv"
    plugin.mkdir()
    (plugin / ".zmem-plugin-venv").write_text("zmem-0.2.0-py3-none-any.whl\n")
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    found = {
        name: installation.detect(prefix, pkg)
        for name, prefix in (("uv", uv), ("pipx", pipx), ("plugin", plugin), ("venv", venv))
    }
    assert [i.kind for i in found.values()] == ["uv-tool", "pipx", "plugin", "venv"]
    assert found["uv"].repair_command() == (
        "uv tool install --reinstall /w/zmem-0.2.0-py3-none-any.whl"
    )
    assert found["pipx"].repair_command() == "pipx reinstall zmem"
    assert "bootstrap.py --repair" in found["plugin"].repair_command()
    assert found["venv"].repair_command().endswith("-m pip install --force-reinstall zmem")
    checkout = installation.detect()
    assert checkout.kind == "checkout" and checkout.repair_command().endswith(" install")
    # Through the real command: the inspector without the module it needs.
    import builtins

    real = builtins.__import__

    def no_webui(name, *args, **kw):
        if name == "zmem.webui" or (name == "zmem.webui.serve"):
            raise ModuleNotFoundError("No module named 'starlette'", name="starlette")
        return real(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_webui)
    from click.testing import CliRunner

    from zmem.cli import cli

    done = CliRunner().invoke(cli, ["ui", "--no-open"])
    assert done.exit_code == 2 and done.stderr.count("\n") == 1
    assert "the inspector needs the Python package 'starlette'" in done.stderr
    assert "make -C" in done.stderr and "install" in done.stderr
