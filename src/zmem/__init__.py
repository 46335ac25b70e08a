"""ZMem: local-first long-term memory for AI coding agents. `MemoryStore` is the library every
front end uses; it is imported on first use, so `zmem --version` or a hook's launcher does not
pay for the whole library."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["MemoryStore", "__version__"]

if TYPE_CHECKING:
    from zmem.store import MemoryStore


def __getattr__(name: str) -> Any:
    if name == "MemoryStore":
        from zmem.store import MemoryStore

        return MemoryStore
    raise AttributeError(f"module 'zmem' has no attribute {name!r}")
