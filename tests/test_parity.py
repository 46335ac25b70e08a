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


# ---- the MCP server serves the checkout it runs in -------------------------------------------


def _mcp_session(env: dict, cwd: Path, calls: list[tuple[str, dict]], roots: list[Path] = ()):
    import asyncio
    import sys

    from mcp import Client, StdioServerParameters
    from mcp import types as mcp_types

    zmem = Path(sys.executable).with_name("zmem")
    params = StdioServerParameters(command=str(zmem), args=["mcp"], env=env, cwd=str(cwd))

    async def list_roots(context):
        return mcp_types.ListRootsResult(
            roots=[mcp_types.Root(uri=f"file://{p}", name=p.name) for p in roots]
        )

    async def session():
        # Roots are the older handshake's (as Claude Code's stdio client speaks it).
        kw = {"list_roots_callback": list_roots, "mode": "legacy"} if roots else {}
        async with Client(params, **kw) as c:
            out = []
            for name, args in calls:
                result = await c.call_tool(name, args)
                out.append((result.is_error, json.loads(result.content[0].text)))
            return out

    return asyncio.run(session())


def _mcp_env(tmp_path: Path, **extra: str) -> dict:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZMEM_", "CLAUDE_"))}
    env.update(ZMEM_STORE=str(tmp_path / "store.sqlite"), ZMEM_DATA=str(tmp_path / "data"),
               ZMEM_EMBED_PROFILE="fake", **extra)  # fmt: skip
    return env


def _seed_global(tmp_path: Path) -> str:
    with MemoryStore.open(tmp_path / "store.sqlite") as s:
        return s.add("Prefer rg over grep -r everywhere.", namespace="user:global",
                     type="preference", signal="user").id  # fmt: skip


ADD = ("add", {"content": "Widget's migrations run with make migrate.", "type": "convention",
               "signal": "user"})  # fmt: skip


def test_a_stdio_server_started_in_a_checkout_serves_its_namespace(tmp_path, checkout):
    glob = _seed_global(tmp_path)
    (added, start) = _mcp_session(_mcp_env(tmp_path), checkout, [ADD, ("session_start", {})])
    assert not added[0] and added[1]["result"] == "stored"
    with MemoryStore.open(tmp_path / "store.sqlite") as s:
        assert s.get(added[1]["id"]).namespace == CANONICAL
    assert not start[0] and start[1]["namespace"] == CANONICAL
    assert set(start[1]["ids"]) == {added[1]["id"], glob}  # the project's and user:global


def test_the_clients_workspace_root_wins_over_the_folder_the_server_started_in(tmp_path, checkout):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (added,) = _mcp_session(_mcp_env(tmp_path), elsewhere, [ADD], roots=[checkout / "src"])
    with MemoryStore.open(tmp_path / "store.sqlite") as s:
        assert s.get(added[1]["id"]).namespace == CANONICAL


def test_outside_a_checkout_add_needs_a_namespace_and_a_scoped_token_still_bounds_it(
    tmp_path, checkout
):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    glob = _seed_global(tmp_path)
    (added, start) = _mcp_session(_mcp_env(tmp_path), elsewhere, [ADD, ("session_start", {})])
    assert added[0] and added[1]["error"] == "invalid_arguments"
    assert "serves no checkout" in added[1]["message"]
    assert start[1]["namespace"] == "user:global" and start[1]["ids"] == [glob]
    token = tmp_path / "token.json"
    token.write_text(json.dumps({"token": "t" * 32, "namespaces": ["user:global"]}))
    env = _mcp_env(tmp_path, ZMEM_MCP_TOKEN_FILE=str(token))
    (scoped,) = _mcp_session(env, checkout, [ADD])
    assert scoped[0] and scoped[1]["error"] == "namespace_not_allowed"
