"""Resolving ZMEM_EMBED_PROFILE to an embedder for the write path. "fake" is the deterministic
test profile; "minilm" needs the ONNX runtime and verified model files, and when those are not
there (or fail to load) the store runs model-absent, which is the spec's fail-open behaviour."""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable
from pathlib import Path

Embedder = Callable[[str], tuple[bytes, str] | None]

_RUNTIME_MODULES = ("numpy", "onnxruntime", "tokenizers")


def runtime_available() -> bool:
    """Whether the minilm runtime is installed, answered without importing it (find_spec only
    reads the import path)."""
    return all(importlib.util.find_spec(name) is not None for name in _RUNTIME_MODULES)


def model_obtainable(data_dir: Path) -> bool:
    """A model is cached in the data dir, or the pinned offline weights are installed to build
    one. Cheap: no file is hashed or read here."""
    from zmem.embedding import model_files, weights

    return model_files.cached_model_present(data_dir) or weights.source_files() is not None


class _LazyMiniLM:
    """Loads the model on the first text, not when the store opens, so commands that never
    embed (recall without the vector lane, list, get) never pay the ~0.2 s model load. Any
    failure turns it off for the rest of the process and returns None: the write goes on
    without a vector rather than failing."""

    def __init__(self, data_dir: Path | None):
        self._data_dir = data_dir
        self._embedder = None
        self._failed = False
        self._lock = threading.Lock()
        self.error: str | None = None

    def __call__(self, text: str) -> tuple[bytes, str] | None:
        embedder = self._embedder or self._load()
        if embedder is None:
            return None
        try:
            vector = embedder.embed([text])[0]
        except Exception as exc:  # fail-open: a vector is optional on the write path
            self.error = f"minilm embedding failed: {exc}"
            return None
        return vector.astype("<f4").tobytes(), embedder.model_name

    def many(self, texts: list[str]) -> list[tuple[bytes, str] | None]:
        """One model call for a batch (bulk ingest); fail-open per batch, as above."""
        embedder = self._embedder or self._load()
        if embedder is None or not texts:
            return [None] * len(texts)
        try:
            matrix = embedder.embed(texts)
        except Exception as exc:
            self.error = f"minilm embedding failed: {exc}"
            return [None] * len(texts)
        return [(row.astype("<f4").tobytes(), embedder.model_name) for row in matrix]

    def _load(self):
        with self._lock:
            if self._embedder is None and not self._failed:
                from zmem.embedding import get_embedder

                try:
                    self._embedder = get_embedder("minilm", self._data_dir)
                except Exception as exc:  # fail-open, as above; the reason stays inspectable
                    self._failed = True
                    self.error = f"minilm unavailable: {exc}"
            return self._embedder


def load_embedder(profile: str, data_dir: Path | None = None) -> Embedder | None:
    """The write path's embedder: text -> (float32 little-endian bytes, model name), or None when
    the profile cannot run here. `data_dir` defaults to ZMEM_DATA, else ~/.zmem."""
    if profile == "fake":
        from zmem.embedding import fake  # tests' profile: its hashlib costs others ~3.7 ms

        return fake.embed_bytes
    if profile != "minilm" or not runtime_available():
        return None
    if data_dir is None:
        from zmem.config import default_data_dir

        data_dir = default_data_dir()
    if not model_obtainable(data_dir):
        return None
    return _LazyMiniLM(data_dir)
