"""A store handle's embedding state, shared by its write and read paths: the embedder of the
active profile, whether this store reads and writes vectors (sqlite-vec present, dimensions in
agreement with what is committed), and a long-lived process's in-memory copy of the index."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import apsw

from zmem.capture import writer
from zmem.config import Settings
from zmem.db import vectors
from zmem.db.connect import read_snapshot
from zmem.embedding import PROFILE_DIMS, PROFILE_MODELS, PROFILE_SEMANTIC
from zmem.embedding.profiles import load_embedder
from zmem.errors import Refusal

if TYPE_CHECKING:
    from zmem.retrieval.vector_cache import VectorCache


# Query embeddings a long-lived handle keeps (~1.5 KB each at 384-d): a session's working set
# of files and commands, not a history.
QUERY_MEMO = 256


class StoreVectors:
    def __init__(self, conn: apsw.Connection, settings: Settings):
        self._conn = conn
        self.settings = settings
        self.embedder: Any = load_embedder(settings.embed_profile, settings.data_dir)
        self.ready = False  # this store reads and writes vectors of the active profile
        self.cache: VectorCache | None = None
        self._checked: int | None = None  # data_version at the last committed-dim check
        self._memo: dict[str, bytes] = {}  # kept query embeddings, oldest ask first

    def prepare(self, check: bool) -> None:
        """Commit the store to this profile's vector index on first use; refuse a profile whose
        dimension differs from the vectors already committed (wrong-size vectors would make
        every similarity meaningless, so silence beats a degraded answer)."""
        self.ready = False
        if self.embedder is None:
            return  # model-absent: no vectors are written, none are read
        profile = self.settings.embed_profile
        dim = PROFILE_DIMS[profile]
        committed_profile, committed_dim = vectors.committed(self._conn)
        if committed_dim is not None and committed_dim != dim:
            if check:
                raise Refusal(
                    f"this store's vectors are {committed_dim}-d ({committed_profile}) but "
                    f"ZMEM_EMBED_PROFILE={profile} is {dim}-d; convert them with "
                    f"`zmem reembed --all --profile {profile}` (or set "
                    f"ZMEM_EMBED_PROFILE={committed_profile})"
                )
            return
        # The index is created by the first vector write, not here: opening a store must not
        # write (recall --explain and reembed --dry-run promise zero writes).
        self.ready = vectors.available(self._conn)

    def embed(self, content: str) -> writer.Vector:
        # Called outside the transaction: a model call must never hold the store's write lock.
        return self.embedder(content) if self.embedder is not None else None

    def embed_many(self, texts: list[str]) -> list[writer.Vector]:
        """Bulk ingest's vectors: one model call per batch where the embedder takes batches."""
        if self.embedder is None:
            return [None] * len(texts)
        many = getattr(self.embedder, "many", None)
        return many(texts) if many is not None else [self.embedder(t) for t in texts]

    def for_write(self, vector: writer.Vector) -> writer.Vector:
        """Inside a write transaction: the vector to store with the row, creating the index on
        first use. None when this store's vectors are of another size now (another process
        converted it since this handle opened): a wrong-size vector must never be stored."""
        if vector is None or not self.ready:
            # No sqlite-vec here: the row still keeps its vector, reembed indexes it later.
            return vector
        # Only another process can change the committed dimension; while the file's data
        # version is the one last checked, the index is known good (3 queries saved per add).
        version = vectors.data_version(self._conn)
        if version == self._checked:
            return vector
        profile = self.settings.embed_profile
        dim = PROFILE_DIMS[profile]
        _, committed_dim = vectors.committed(self._conn)
        if committed_dim not in (None, dim):
            return None
        if committed_dim is None or not vectors.table_exists(self._conn):
            vectors.create(self._conn, profile, dim)
        self._checked = version
        return vector

    def semantic(self) -> writer.Semantic | None:
        # Only vectors in this store's index are comparable, and only a real model's count.
        levels = PROFILE_SEMANTIC.get(self.settings.embed_profile)
        return writer.Semantic(*levels) if levels and self.ready else None

    def query(self, text: str, keep: bool = False) -> bytes | None:
        """The query's embedding, or None: recall then goes on lexically (fail-open). With
        `keep`, the embedding is remembered for the next ask of the same text (the resident
        process answers the same pending-tool query for every edit of a file): the model's
        run is most of a warm answer, and the same text gives the same vector."""
        memo = self._memo
        if keep:
            vector = memo.pop(text, None)
            if vector is not None:
                memo[text] = vector  # the newest end: the least recently asked go first
                return vector
        try:
            embedded = self.embedder(text) if self.embedder is not None else None
        except Exception:
            return None
        vector = embedded[0] if embedded else None
        if keep and vector is not None:
            memo[text] = vector
            if len(memo) > QUERY_MEMO:
                memo.pop(next(iter(memo), None), None)
        return vector

    def keep_in_memory(self) -> bool:
        """For long-lived processes (the hooks' resident process): hold a copy of the vector
        index in memory so a hybrid read's KNN is one matrix product, not a vec0 scan. Reads
        catch the copy up after other writers' commits (new rows, tombstones); when they cannot
        (vectors of existing rows rewritten) they use the index again. Call this between
        requests: it catches up, or rebuilds a copy that could not or has grown a long tail.
        True when a current copy is held; False when this store reads no vectors."""
        if not self.ready:
            return False
        cache = self.cache
        if cache is None:
            from zmem.retrieval.vector_cache import VectorCache

            profile = self.settings.embed_profile
            cache = VectorCache(self._conn, PROFILE_MODELS[profile], PROFILE_DIMS[profile])
            self.cache = cache
        if not cache.fresh(self._conn) or cache.worn:
            with read_snapshot(self._conn):
                if not cache.current(self._conn) or cache.worn:
                    cache.rebuild()
        return True
