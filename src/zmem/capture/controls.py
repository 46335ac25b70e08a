"""Control characters in text the store keeps: terminal escape sequences (colour, cursor moves,
titles) and the other C0/C1 control characters. Read back into a terminal or a model's context
they act instead of reading. Tab, newline and carriage return are text. Content has them
stripped; identifiers (namespaces, source refs, tags) that hold one are refused."""

from __future__ import annotations

import re

_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]?")
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# In an identifier, tab and newline are control characters too.
_IN_IDENTIFIER = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def strip_controls(text: str) -> tuple[str, int]:
    """The text without escape sequences and control characters, and how many were removed."""
    text, escapes = _ESCAPES.subn("", text)
    text, controls = _CONTROLS.subn("", text)
    return text, escapes + controls


def has_controls(identifier: str) -> bool:
    return _IN_IDENTIFIER.search(identifier) is not None
