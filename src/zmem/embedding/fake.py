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


def embed(text: str) -> list[float]:
    vector = [0.0] * DIM
    for word in words(text):
        digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
        bucket = digest[0] % DIM
        vector[bucket] += 1.0 if digest[1] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vector))
    if norm == 0.0:
        vector[0], norm = 1.0, 1.0
    return [v / norm for v in vector]


def embed_bytes(text: str) -> tuple[bytes, str]:
    """float32 little-endian, the layout sqlite-vec reads."""
    return struct.pack(f"<{DIM}f", *embed(text)), MODEL_NAME
