"""ZMem's tool-event plugin for Hermes: feeds terminal, write_file and patch calls to the ops
ring that the zmem memory provider's recall reads, and on each turn's pre_llm_call delivers the
hazard lessons those calls touched (Hermes gives memory providers no hooks, so this is a
general plugin, enabled with `plugins: {enabled: [zmem_hooks]}`). A shim over
zmem.hermes_provider, reached as the zmem plugin reaches it (zmem_bridge.py beside it)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zmem_bridge  # noqa: E402

sys.path.pop(0)
zmem_bridge.install(os.path.dirname(os.path.abspath(__file__)))
from zmem.hermes_provider import on_post_tool_call, on_pre_llm_call  # noqa: E402


def register(ctx):
    ctx.register_hook("post_tool_call", on_post_tool_call)
    ctx.register_hook("pre_llm_call", on_pre_llm_call)
