"""Maximal Marginal Relevance: re-order a scored pool so near-paraphrases cannot crowd out a
distinct fact. Similarity is embedding cosine when both rows carry a vector of the same size,
else Jaccard on their normalized content tokens, so it also works on model-absent stores."""

from __future__ import annotations

import math
import operator
import struct
import sys
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, TypeVar

from zmem.tokens import jaccard

K = TypeVar("K", bound=Hashable)


# Similarity below this counts as none (0 = classic MMR, every shared word or direction
# penalised). Chosen on the tune projects of the coding dev set (docs/benchmarks.md).
SIMILARITY_FLOOR = 0.7


def mmr_order(
    order: Sequence[K],
    score: Mapping[K, float],
    similarity: Callable[[K, K], float],
    lam: float,
    picks: int,
) -> list[K]:
    """The first `picks` rows chosen greedily by lam*score - (1-lam)*max similarity to the rows
    already chosen; the rest follow in their original order. lam=1.0 returns `order` as is."""
    if lam >= 1.0 or len(order) <= 1 or picks <= 1:
        return list(order)
    floor = SIMILARITY_FLOOR

    def overlap(a: K, b: K) -> float:
        # Only the part of a similarity above the floor counts: rows on the same topic keep
        # their order, near-copies of a chosen row give way.
        sim = similarity(a, b)
        return (sim - floor) / (1.0 - floor) if sim > floor else 0.0

    remaining = list(order)
    chosen = [remaining.pop(0)]
    closest = {k: overlap(k, chosen[0]) for k in remaining}
    while remaining and len(chosen) < picks:
        # max() keeps the first of equals, so ties fall back to the composite order.
        best = max(remaining, key=lambda k: lam * score[k] - (1.0 - lam) * closest[k])
        remaining.remove(best)
        chosen.append(best)
        for k in remaining:
            closest[k] = max(closest[k], overlap(k, best))
    return chosen + remaining


def _unit(blob: bytes) -> tuple[float, ...]:
    v = struct.unpack(f"<{len(blob) // 4}f", blob)
    norm = math.sqrt(sum(x * x for x in v))
    return tuple(x / norm for x in v) if norm else v


class Similarity:
    """Pairwise similarity over candidates, decoding each row's tokens and vector once. With
    numpy already loaded (whenever the vector lane ran), all cosines come from one matrix
    product; otherwise (a lexical recall, e.g. a cold hook, which must not pay ~90 ms to import
    numpy) each pair MMR asks for is a dot product of unit vectors in Python."""

    def __init__(self, norms: Mapping[K, str], vectors: Mapping[K, bytes | None]):
        self._tokens = {k: frozenset(v.split()) for k, v in norms.items()}
        blobs = {k: b for k, b in vectors.items() if b}
        self._index: dict[K, int] = {}
        self._cos: Any = None
        self._vectors: dict[K, tuple[float, ...]] = {}
        sizes = {len(b) for b in blobs.values()}
        if len(sizes) == 1:
            np = sys.modules.get("numpy")
            if np is not None:
                keys = list(blobs)
                matrix = np.frombuffer(b"".join(blobs[k] for k in keys), dtype="<f4").reshape(
                    len(keys), -1
                )
                norms_ = np.linalg.norm(matrix, axis=1, keepdims=True)
                unit = matrix / np.where(norms_ == 0, 1.0, norms_)
                self._cos = unit @ unit.T
                self._index = {k: i for i, k in enumerate(keys)}
            else:
                self._vectors = {k: _unit(b) for k, b in blobs.items()}

    def __call__(self, a: K, b: K) -> float:
        ia, ib = self._index.get(a), self._index.get(b)
        if ia is not None and ib is not None:
            return float(self._cos[ia, ib])
        va, vb = self._vectors.get(a), self._vectors.get(b)
        if va is not None and vb is not None and len(va) == len(vb):
            return sum(map(operator.mul, va, vb))
        return jaccard(self._tokens.get(a, frozenset()), self._tokens.get(b, frozenset()))
