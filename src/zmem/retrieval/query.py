"""Turning user text into something the lanes can run: distinct non-stop-word terms, FTS5
expressions in which every term is quoted (user text can never be FTS syntax), and the
deterministic change-intent test that gates lineage unfold."""

from __future__ import annotations

import re

from zmem.tokens import STOP_WORDS, words

# A pasted log can hold thousands of words; an OR over all of them costs time in proportion to
# the rows each term matches. The first distinct terms carry the prompt's subject.
MAX_QUERY_TERMS = 32


def query_terms(text: str) -> list[str]:
    """Distinct non-stop-word tokens in order of first appearance, at most MAX_QUERY_TERMS."""
    seen: dict[str, None] = {}
    for w in words(text):
        if w not in STOP_WORDS and w not in seen:
            seen[w] = None
            if len(seen) == MAX_QUERY_TERMS:
                break
    return list(seen)


def fts_expression(terms: list[str], operator: str) -> str:
    """`"a" AND "b"` or `"a" OR "b"`. Tokens come from the unicode61-compatible tokenizer, so
    they hold no quote character; quoting still guards against FTS keywords (NEAR, AND, NOT)."""
    if operator not in ("AND", "OR"):
        raise ValueError(operator)
    return f" {operator} ".join(f'"{t}"' for t in terms)


_CHANGE_INTENT = re.compile(
    r"""
    \bwhat\s+(?:has\s+|have\s+)?changed\b
    | \bwhat\s+was\s+(?:it|the\s+\w+|\w+)\s+before\b
    | \bwhy\s+did\s+(?:we|you|i|they)\s+(?:switch|move|change|migrate|stop|drop|replace)\b
    | \b(?:we|you|i|they|it)\s+used\s+to\b
    | \bused\s+to\s+(?:be|use|run|have)\b
    | \b(?:switched|moved|migrated|changed)\s+(?:from|away\s+from)\b
    | \bno\s+longer\b
    | \b(?:previously|formerly)\b
    | \bbefore\s+(?:we|it)\s+(?:switched|moved|changed|migrated)\b
    | \bhistory\s+of\b
    | \bhow\s+(?:has|did)\s+\S+(?:\s+\S+)?\s+(?:change|evolve)\b
    | \bwhat\s+did\s+(?:we|it)\s+use\s+before\b
    | \bold\s+(?:value|setting|version|approach|way)\b
    """,
    re.IGNORECASE | re.VERBOSE,
)


def is_change_intent(text: str) -> bool:
    """Does the query ask about how something changed ("what changed about X", "why did we
    switch to Y", "we used to Z")? Deterministic: no model decides this."""
    return bool(_CHANGE_INTENT.search(text))
