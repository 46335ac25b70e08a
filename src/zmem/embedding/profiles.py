"""Resolving ZMEM_EMBED_PROFILE to an embedder for the write path. "fake" is the deterministic
test profile; "minilm" needs the ONNX runtime and verified weights, and when those are not
installed the store runs model-absent, which is the spec's fail-open behaviour."""

from __future__ import annotations

from collections.abc import Callable

from zmem.embedding import fake

Embedder = Callable[[str], tuple[bytes, str] | None]


def load_embedder(profile: str) -> Embedder | None:
    if profile == "fake":
        return fake.embed_bytes
    # minilm: the ONNX runtime is not part of this build yet; model-absent is the documented
    # degraded mode (keyword + entity lanes only), never an error.
    return None
