"""ZMem: local-first long-term memory for AI coding agents. `MemoryStore` is the library every
front end uses."""

from zmem.store import MemoryStore

__version__ = "0.1.0"
__all__ = ["MemoryStore", "__version__"]
