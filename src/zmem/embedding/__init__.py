"""Embedding profiles: which model turns text into vectors, resolved from ZMEM_EMBED_PROFILE.
`get_embedder(profile)` is the public entry; numpy, onnxruntime and tokenizers are imported only
when an embedder is actually built, so importing this package stays free."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np

PROFILES = ("minilm", "fake")
# Known without loading a model: the store checks its committed vectors against these on open.
PROFILE_DIMS = {"minilm": 384, "fake": 16}
PROFILE_MODELS = {"minilm": "all-MiniLM-L6-v2", "fake": "fake-16"}
# Cosine similarity below `floor` is what unrelated texts reach (MiniLM: 90 % of the random
# pairs of the paraphrase dev set stay under 0.19; its true targets: p10 0.23, median 0.35,
# p90 0.55); at `strong` a match is as good as it gets. 0.20 beat 0.15 on all three dev sets
# (docs/benchmarks.md). The fake profile's 16 hashed dimensions put unrelated texts anywhere,
# so only near-identical ones count.
PROFILE_SIMILARITY = {"minilm": (0.2, 0.55), "fake": (0.8, 1.0)}
# Write-time cosine levels (dedup, link) per real profile. MiniLM: 0.92 is a rewording of the
# same sentence, 0.70 clearly the same subject. The fake profile takes no part: its 16 hashed
# dimensions would fold unrelated rows.
PROFILE_SEMANTIC = {"minilm": (0.92, 0.70)}


class Embedder(Protocol):
    dim: int
    model_name: str

    def embed(self, texts: list[str]) -> np.ndarray:
        """float32 array of shape (len(texts), dim), each row of unit length."""
        ...


class FakeEmbedder:
    """The deterministic 16-d test profile behind the same interface as the real one."""

    def __init__(self) -> None:
        from zmem.embedding import fake

        self._fake = fake
        self.dim = fake.DIM
        self.model_name = fake.MODEL_NAME

    def embed(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        if isinstance(texts, str):
            raise TypeError("embed() takes a list of texts, not one string")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row] = self._fake.embed(text)
        return out


_lock = threading.Lock()
_loaded: dict[str, Embedder] = {}


def load_minilm(data_dir: Path | None = None, *, build: bool = True) -> Embedder:
    """A fresh MiniLM embedder from the verified model files of `data_dir` (default: ZMEM_DATA,
    else ~/.zmem), building them from the installed weights when missing and `build` is set.
    Raises ModelFileError when no verified model can be had."""
    from zmem.config import default_data_dir
    from zmem.embedding import model_files
    from zmem.embedding.minilm import MiniLMEmbedder

    directory = default_data_dir() if data_dir is None else Path(data_dir)
    return MiniLMEmbedder(model_files.resolve(directory, build=build))


def get_embedder(profile: str, data_dir: Path | None = None) -> Embedder:
    """The process-wide embedder of `profile`. The minilm model is loaded once per process: every
    source of it (download or offline build) is pinned to the same weights, so the first data
    dir's verified copy serves all."""
    if profile not in PROFILES:
        from zmem.errors import ConfigError

        raise ConfigError(f"unknown embedding profile {profile!r} ({', '.join(PROFILES)})")
    with _lock:
        found = _loaded.get(profile)
        if found is None:
            found = FakeEmbedder() if profile == "fake" else load_minilm(data_dir)
            _loaded[profile] = found
        return found
