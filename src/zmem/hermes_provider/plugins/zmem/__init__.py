"""ZMem as Hermes's memory provider (a MemoryProvider), activated by `memory: {provider: zmem}`
in $HERMES_HOME/config.yaml. A shim over the zmem package (zmem.hermes_provider): from Hermes's
own Python, or from the ZMem install that ran `zmem setup hermes` (zmem_bridge.py beside it)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zmem_bridge  # noqa: E402

sys.path.pop(0)
zmem_bridge.install(os.path.dirname(os.path.abspath(__file__)))
from zmem.hermes_provider import ZMemProvider  # noqa: E402


def register(ctx):
    # Hermes's memory-plugin loader passes a collector with register_memory_provider.
    ctx.register_memory_provider(ZMemProvider())
