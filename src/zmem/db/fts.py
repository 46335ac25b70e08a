"""Turning user text into FTS5 MATCH expressions. Every term is emitted as a quoted string, so no
user input (quotes, NEAR(, *, -, parentheses) can ever be parsed as FTS5 syntax."""

from __future__ import annotations

from collections.abc import Iterable


def quote_term(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def or_query(terms: Iterable[str]) -> str | None:
    quoted = [quote_term(t) for t in dict.fromkeys(terms) if t]
    return " OR ".join(quoted) if quoted else None


def namespace_token(namespace: str) -> str:
    """The single FTS token memory.ns_token indexes for a namespace (see migration 0008)."""
    return "ns" + namespace.encode("utf-8").hex()
