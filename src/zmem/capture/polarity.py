"""Negation polarity of a sentence as a count of negation words. The write path and consolidate
decide by capture.stance now (what is negated, not how many negation words); this count stays
for bench/maintenance.py, which plants polarity variants of rows by it."""

from __future__ import annotations

from zmem.tokens import NEGATIONS, words


def polarity(text: str) -> int:
    """The number of negation words. Two statements agree in polarity only when their counts
    are equal. A parity (odd = negated) let a second negation anywhere in the text cancel the
    first: "dev is not wiped, keep nothing there" read as affirmative and folded into "dev is
    wiped each night" (found by scripts/eval_maintenance.py's adversarial set)."""
    return sum(1 for w in words(text) if w in NEGATIONS)
