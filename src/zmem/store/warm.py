"""What a long-lived process (the hooks' resident process, the MCP server, the inspector) does
so its first real request answers as fast as the rest: load the model, hold the vector index in
memory, and touch the pages and modules a read needs. Mixed into MemoryStore."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zmem.retrieval.request import RecallRequest

if TYPE_CHECKING:
    from zmem.store.vectors import StoreVectors


class Warm:
    """Mixed into MemoryStore, which provides the vectors and the read path."""

    vectors: StoreVectors
    read: Any  # MemoryStore.read: RecallRequest -> RecallReport

    def keep_vectors_in_memory(self) -> bool:
        """Hold the vector index in memory (see StoreVectors.keep_in_memory)."""
        return self.vectors.keep_in_memory()

    def load_model(self) -> None:
        """Load the embedder now rather than on the first text. It touches no connection, so a
        server may call it on a thread of its own while this handle answers requests; a read
        that needs the model meanwhile waits for the same load (it happens once)."""
        self.vectors.embed("warm up")

    def warm_up(self) -> None:
        """Before the first real call: one passive read with no telemetry loads pages, the
        embedder and lazily imported modules; vectors stay in memory."""
        self.read(RecallRequest.prefetch("warm up"))
        self.keep_vectors_in_memory()
