"""ZMem: local-first long-term memory for AI coding agents. `MemoryStore` is the library every
front end uses; it is imported on first use, so `zmem --version` or a hook's launcher does not
pay for the whole library."""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["MemoryStore", "__version__"]

TYPE_CHECKING = False  # typing's own flag, without importing typing (a few ms per command)
if TYPE_CHECKING:
    from typing import Any

    from zmem.store import MemoryStore


def __getattr__(name: str) -> Any:
    if name == "MemoryStore":
        from zmem.store import MemoryStore

        return MemoryStore
    raise AttributeError(f"module 'zmem' has no attribute {name!r}")
