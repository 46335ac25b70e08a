"""Negation polarity of a sentence, for the dedup and consolidation guards: "always X" and "never
X" look identical to a similarity measure but must never merge. Deterministic word lists, no
model."""

from __future__ import annotations

from zmem.tokens import NEGATIONS, words


def polarity(text: str) -> int:
    """The number of negation words. Two statements agree in polarity only when their counts
    are equal. A parity (odd = negated) let a second negation anywhere in the text cancel the
    first: "dev is not wiped, keep nothing there" read as affirmative and folded into "dev is
    wiped each night" (found by scripts/eval_maintenance.py's adversarial set)."""
    return sum(1 for w in words(text) if w in NEGATIONS)
