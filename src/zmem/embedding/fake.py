"""The fake embedding profile: deterministic 16-dimensional vectors from token hashes, for unit
tests and benchmarks only. Similar token sets give similar vectors, which is all a test needs;
it carries no meaning and must never serve real recall."""

from __future__ import annotations

import hashlib
import math
import struct

from zmem.tokens import words

DIM = 16
MODEL_NAME = "fake-16"
_PACK = struct.Struct(f"<{DIM}f")

# word -> (bucket, +1.0/-1.0). A word's hash never changes, and a store's vocabulary repeats
# (the benchmark's 100k rows hold ~11k distinct words), so each word is hashed once per process:
# 23 -> 9 us per add. Bounded so a long-running process cannot grow it without limit.
_CACHE_MAX = 200_000
_contribution: dict[str, tuple[int, float]] = {}


def _hash_word(word: str) -> tuple[int, float]:
    digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
    found = (digest[0] % DIM, 1.0 if digest[1] & 1 else -1.0)
    if len(_contribution) >= _CACHE_MAX:
        _contribution.clear()
    _contribution[word] = found
    return found


def embed(text: str) -> list[float]:
    vector = [0.0] * DIM
    cached = _contribution.get
    for word in words(text):
        bucket, sign = cached(word) or _hash_word(word)
        vector[bucket] += sign
    norm = math.sqrt(sum(v * v for v in vector))
    if norm == 0.0:
        vector[0], norm = 1.0, 1.0
    return [v / norm for v in vector]


def embed_bytes(text: str) -> tuple[bytes, str]:
    """float32 little-endian, the layout sqlite-vec reads."""
    return _PACK.pack(*embed(text)), MODEL_NAME
