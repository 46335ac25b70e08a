"""ZMem inside the Hermes agent (hermes-agent 0.19.0): the memory provider Hermes loads from
$HERMES_HOME/plugins/zmem, and the post_tool_call and pre_llm_call callbacks the zmem_hooks
plugin registers. The plugin directories (plugins/, package data) only import these names and
register them; nothing here imports `mcp`, which Hermes pins at another major version."""

from __future__ import annotations

from zmem.hermes_provider.provider import ZMemProvider
from zmem.hermes_provider.tool_events import on_post_tool_call, on_pre_llm_call

__all__ = ["ZMemProvider", "on_post_tool_call", "on_pre_llm_call"]
