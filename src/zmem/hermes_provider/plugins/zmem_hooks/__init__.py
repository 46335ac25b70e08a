"""ZMem's tool-event plugin for Hermes: feeds terminal, write_file and patch calls to the ops
ring that the zmem memory provider's recall reads (Hermes gives memory providers no hooks, so
this is a general plugin, enabled with `plugins: {enabled: [zmem_hooks]}`). A shim over the
zmem package; `zmem hermes-install` copies this directory."""

from zmem.hermes_provider import on_post_tool_call


def register(ctx):
    ctx.register_hook("post_tool_call", on_post_tool_call)
