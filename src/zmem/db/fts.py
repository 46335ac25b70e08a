"""Turning user text into FTS5 MATCH expressions. Every term is emitted as a quoted string, so no
user input (quotes, NEAR(, *, -, parentheses) can ever be parsed as FTS5 syntax."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def quote_term(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def or_query(terms: Iterable[str]) -> str | None:
    quoted = [quote_term(t) for t in dict.fromkeys(terms) if t]
    return " OR ".join(quoted) if quoted else None


def dedup_terms(namespace: str, tokens: Iterable[str]) -> list[str]:
    """Similarity tokens as dedup_fts indexes them: prefixed with a short namespace id so each
    posting list holds one namespace (see migration 0008). An id collision between namespaces
    only adds candidates, which the caller's namespace check drops."""
    space = hashlib.blake2b(namespace.encode("utf-8"), digest_size=4).hexdigest()
    return [f"n{space}q{t}" for t in tokens]
