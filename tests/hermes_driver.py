"""Runs inside .venv-hermes (the real hermes-agent 0.19.0) for tests/test_hermes_live.py, with
HERMES_HOME pointing at a temporary home where `zmem hermes-install --activate` put the
plugins. `manager <out.json>` drives the provider the way Hermes's agent loop does, through
discovery, the loader and MemoryManager; `agent <out.json> <base_url> <turns.json>` runs full
agent turns against the test's model stand-in. Each writes what it saw as one JSON file."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

SESSION = "20261204_120000_abc123"


def mcp_modules() -> list[str]:
    return sorted(m for m in sys.modules if m.split(".")[0] == "mcp")


def manager(prompt: str, correction: str) -> dict[str, Any]:
    from agent.memory_manager import MemoryManager, build_memory_context_block
    from agent.memory_provider import MemoryProvider
    from hermes_cli.plugins import discover_plugins, get_plugin_manager, has_hook
    from plugins.memory import discover_memory_providers, load_memory_provider

    out: dict[str, Any] = {}
    out["discovered"] = [list(p) for p in discover_memory_providers() if p[0] == "zmem"]
    provider = load_memory_provider("zmem")
    # Loaded from $HERMES_HOME/plugins/zmem (the shim), the class from the zmem package.
    out["plugin_module"] = "_hermes_user_memory.zmem" in sys.modules
    out["provider_class"] = f"{type(provider).__module__}.{type(provider).__name__}"
    out["is_memory_provider"] = isinstance(provider, MemoryProvider)
    out["zmem_from"] = sys.modules["zmem"].__file__
    # The general loader: zmem_hooks enabled and hooked, zmem left to the memory loader.
    discover_plugins()
    out["general"] = {
        p["name"]: {"kind": p["kind"], "enabled": p["enabled"], "hooks": p["hooks"]}
        for p in get_plugin_manager().list_plugins()
        if p["name"].startswith("zmem")
    }
    out["post_tool_call_hooked"] = has_hook("post_tool_call")
    out["pre_llm_call_hooked"] = has_hook("pre_llm_call")

    mm = MemoryManager()
    mm.add_provider(provider)
    mm.initialize_all(session_id=SESSION, platform="cli", agent_context="primary")
    out["system"] = mm.build_system_prompt()
    out["tools"] = [s["name"] for s in mm.get_all_tool_schemas()]
    mm.on_turn_start(1, prompt)
    context = mm.prefetch_all(prompt)  # the agent loop passes no session id here
    out["prefetch"] = context
    out["fenced"] = build_memory_context_block(context)
    out["recall"] = json.loads(mm.handle_tool_call("zmem_recall", {"query": prompt}))
    out["bad_add"] = json.loads(mm.handle_tool_call("zmem_add", {"content": "no namespace"}))
    messages = [
        {"role": "user", "content": correction, "api_content": correction + "\n\n" + context},
        {"role": "assistant", "content": "Noted."},
    ]
    mm.sync_all(correction, "Noted.", session_id=SESSION, messages=messages)
    mm.queue_prefetch_all(correction, session_id=SESSION)
    out["flushed"] = mm.flush_pending(timeout=10)
    history = [{"role": "user", "content": prompt}, {"role": "assistant", "content": "ok"}]
    out["pre_compress"] = mm.on_pre_compress(history)
    mm.on_session_end(messages)
    mm.shutdown_all()
    out["drain"] = mm.shutdown_drain_state
    out["mcp"] = mcp_modules()
    return out


def agent(base_url: str, turns: list[str]) -> dict[str, Any]:
    from run_agent import AIAgent

    bot = AIAgent(
        base_url=base_url,
        api_key="sk-standin",
        provider="custom",
        model="standin-model",
        quiet_mode=True,
        max_iterations=6,
        # "memory" keeps the provider's tools on; "terminal" is the tool the ring records.
        enabled_toolsets=["memory", "terminal"],
        platform="cli",
        session_id=SESSION,
    )
    out: dict[str, Any] = {"finals": [], "memory_manager": bot._memory_manager is not None}
    history = None
    for text in turns:
        result = bot.run_conversation(text, conversation_history=history)
        history = result.get("messages")
        out["finals"].append(result.get("final_response"))
        if bot._memory_manager is not None:
            bot._memory_manager.flush_pending(timeout=10)
    out["user_rows"] = [
        {"content": m.get("content"), "api_content": m.get("api_content")}
        for m in history or []
        if m.get("role") == "user"
    ]
    bot.shutdown_memory_provider(history)
    out["mcp"] = mcp_modules()
    return out


def main() -> None:
    mode, target = sys.argv[1], Path(sys.argv[2])
    if mode == "manager":
        result = manager(sys.argv[3], sys.argv[4])
    else:
        result = agent(sys.argv[3], json.loads(sys.argv[4]))
    target.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
