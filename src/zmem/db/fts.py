"""Turning user text into FTS5 MATCH expressions. Every term is emitted as a quoted string, so no
user input (quotes, NEAR(, *, -, parentheses) can ever be parsed as FTS5 syntax."""

from __future__ import annotations

from collections.abc import Iterable


def quote_term(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def or_query(terms: Iterable[str]) -> str | None:
    quoted = [quote_term(t) for t in dict.fromkeys(terms) if t]
    return " OR ".join(quoted) if quoted else None
