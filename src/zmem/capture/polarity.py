"""Negation polarity of a sentence, for the dedup guard: "always X" and "never X" look identical to
a similarity measure but must never merge. Deterministic word lists, no model."""

from __future__ import annotations

from zmem.tokens import NEGATIONS, words


def polarity(text: str) -> int:
    """+1 for an affirmative statement, -1 for a negated one (odd number of negations)."""
    count = sum(1 for w in words(text) if w in NEGATIONS)
    return -1 if count % 2 else 1
