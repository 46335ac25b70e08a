"""Plain Okapi BM25 in pure Python: the LoCoMo baseline ZMem's own ranking is compared with. It
tokenises exactly as the store does (zmem.tokens.words minus STOP_WORDS) so the difference
measured is the ranking, not the tokenizer."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from zmem.tokens import STOP_WORDS, words

K1 = 1.2
B = 0.75


def analyze(text: str) -> list[str]:
    """The index terms of a text, in order, duplicates kept."""
    return [w for w in words(text) if w not in STOP_WORDS]


class BM25:
    """An in-memory index over a fixed list of documents (one LoCoMo conversation's turns)."""

    def __init__(self, documents: Sequence[str], k1: float = K1, b: float = B):
        self.k1 = k1
        self.b = b
        self._tf = [Counter(analyze(doc)) for doc in documents]
        self._len = [sum(tf.values()) for tf in self._tf]
        self._avgdl = (sum(self._len) / len(self._len)) if self._len else 0.0
        df: Counter[str] = Counter()
        for tf in self._tf:
            df.update(tf.keys())
        n = len(self._tf)
        # Lucene's non-negative idf: the classic log((N - df + 0.5) / (df + 0.5)) goes negative
        # for a term in more than half the turns (a speaker's name), which would punish a match.
        self._idf = {t: math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}

    def scores(self, query: str) -> list[float]:
        """One score per document. Query terms count once each: a repeated word in a question
        is phrasing, not emphasis."""
        terms = [t for t in dict.fromkeys(analyze(query)) if t in self._idf]
        out = []
        for tf, dl in zip(self._tf, self._len, strict=True):
            norm = self.k1 * (1.0 - self.b + self.b * dl / self._avgdl) if self._avgdl else 0.0
            total = 0.0
            for t in terms:
                f = tf.get(t, 0)
                if f:
                    total += self._idf[t] * f * (self.k1 + 1.0) / (f + norm)
            out.append(total)
        return out

    def rank(self, query: str, limit: int) -> list[int]:
        """Indices of the documents sharing a term with the query, best first; ties keep
        document order. Non-matching documents are left out, as a lexical store returns none."""
        scored = [(s, i) for i, s in enumerate(self.scores(query)) if s > 0.0]
        scored.sort(key=lambda pair: (-pair[0], pair[1]))
        return [i for _, i in scored[:limit]]
