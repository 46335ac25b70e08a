"""ZMem as Hermes's memory provider (a MemoryProvider), activated by `memory: {provider: zmem}`
in $HERMES_HOME/config.yaml. A shim: the provider is the zmem package (zmem.hermes_provider),
which must be installed in Hermes's own Python. `zmem hermes-install` copies this directory."""

from zmem.hermes_provider import ZMemProvider


def register(ctx):
    # Hermes's memory-plugin loader passes a collector with register_memory_provider.
    ctx.register_memory_provider(ZMemProvider())
