"""The MCP server under the real hosts: Claude Code 2.1.332 starts it from the plugin's
.mcp.json, offers its tools to the model (the local stand-in of tests/test_live_hosts.py), and
runs the `recall` call the stand-in asks for; Codex 0.171.0 installs the plugin and lists the
server the plugin declares. Skipped, like the hook runs, unless the CLIs are installed."""

from __future__ import annotations

import json

from test_live_hosts import (
    CODEX,
    MARKER,
    NS,
    World,
    codex_cmd,
    codex_home,
    install_codex_plugin,
    needs_claude,
    needs_codex,
    run_claude,
)

TOOLS = {"add", "update", "invalidate", "supersede", "recall", "search", "recent", "get", "links",
         "contradict", "resolve", "stats", "session_start", "session_end"}  # fmt: skip
PREFIX = "mcp__plugin_zmem_zmem__"
# In `-p` mode Claude Code connects MCP servers in the background and defers their tools behind
# a tool-search step; these make the first model call carry them, as an interactive session's
# later turns do.
MCP_ENV = {"MCP_CONNECTION_NONBLOCKING": "false", "ENABLE_TOOL_SEARCH": "false"}


@needs_claude
def test_claude_lists_the_tools_and_runs_a_recall(tmp_path_factory):
    world = World(tmp_path_factory.mktemp("claude-mcp"))
    query = {"query": "run pytest before git push", "namespace": NS}
    s = run_claude(
        world,
        "What should I run before pushing?",
        "--allowedTools",
        PREFIX + "recall",
        env=MCP_ENV,
        mcp_tool=("recall", query),
    )
    assert s.done.returncode == 0, s.where()
    first = s.requests[0]["body"]
    offered = {t["name"] for t in first["tools"] if t["name"].startswith(PREFIX)}
    assert offered == {PREFIX + t for t in TOOLS}, s.where()
    recall = next(t for t in first["tools"] if t["name"] == PREFIX + "recall")
    assert recall["input_schema"]["required"] == ["query"]
    # The call the stand-in asked for ran: its result (the recall envelope) is in the next
    # request, the seeded lesson in it, marked as the tool_use's result.
    results = [
        block
        for r in s.requests[1:]
        for msg in r["body"].get("messages", [])
        if isinstance(msg.get("content"), list)
        for block in msg["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    assert results, s.where()
    envelope = json.loads(text_of(results[0]))
    assert envelope["count"] == 1 and not results[0].get("is_error"), s.where()
    (row,) = envelope["results"]
    assert MARKER in row["content"] and row["namespace"] == NS


def text_of(result: dict) -> str:
    content = result["content"]
    return content if isinstance(content, str) else content[0]["text"]


@needs_codex
def test_codex_plugin_declares_the_server(tmp_path_factory):
    world = World(tmp_path_factory.mktemp("codex-mcp"))
    home = codex_home(world)
    install_codex_plugin(world, home)
    assert CODEX is not None
    out = codex_cmd(home, world, "mcp", "list", "--json").stdout
    servers = {s["name"]: s for s in json.loads(out)}
    assert servers["zmem"]["enabled"] is True, out
    transport = servers["zmem"]["transport"]
    assert transport["type"] == "stdio" and "zmem" in transport["args"][-1]
    # Codex passes a plugin server only HOME, PATH and LANG unless told: the store settings are
    # forwarded so the server opens the store the hooks use.
    assert {"ZMEM_DATA", "ZMEM_STORE", "ZMEM_EMBED_PROFILE"} <= set(transport["env_vars"])
