"""The store layer: MemoryStore, the one front door to a store file, with its read path
(reads.Reader) and embedding state (vectors.StoreVectors) as objects it owns."""

from zmem.store.memory_store import MemoryStore

__all__ = ["MemoryStore"]
