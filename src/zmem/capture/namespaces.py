"""Namespace validation on write: the `<kind>:<name>` shape (`project:<repo>`, `user:global`,
`project:github.com/acme/webapp`), with no empty, `.` or `..` path parts in the name. The
automatic hooks read exactly `user:global`, so an obvious misspelling of it would strand a
memory where nothing ever recalls it: refuse those."""

from __future__ import annotations

import functools
import re
import unicodedata

from zmem.capture.controls import has_controls
from zmem.errors import Refusal, UsageError
from zmem.models import GLOBAL_NAMESPACE, MAX_NAMESPACE_CHARS

_SQUASH = re.compile(r"[^a-z0-9]")
_SHAPE = re.compile(r"^([a-z][a-z0-9_-]*):(.+)$")
_CANONICAL_SQUASHED = "userglobal"
# Format (zero-width, bidi), private-use, surrogate and unassigned code points.
_INVISIBLE = frozenset({"Cf", "Co", "Cs", "Cn"})


def _edit_distance(a: str, b: str, cap: int) -> int:
    """Levenshtein distance, giving up (returning cap + 1) once it must exceed cap."""
    if abs(len(a) - len(b)) > cap:
        return cap + 1
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        if min(current) > cap:
            return cap + 1
        previous = current
    return previous[-1]


@functools.lru_cache(maxsize=256)  # one process writes to a handful of namespaces
def is_near_miss_global(namespace: str) -> bool:
    if namespace == GLOBAL_NAMESPACE:
        return False
    squashed = _SQUASH.sub("", namespace.lower())
    if squashed in ("global", "globals", "globaluser", "globalusers"):
        return True
    return _edit_distance(squashed, _CANONICAL_SQUASHED, 2) <= 2


def validate_namespace(namespace: str) -> str:
    if isinstance(namespace, str) and namespace in _valid:
        return namespace
    _check(namespace)
    if len(_valid) >= 256:  # one process writes to a handful of namespaces
        _valid.clear()
    _valid.add(namespace)
    return namespace


# Namespaces that passed _check: every add validates its namespace, and they repeat.
_valid: set[str] = set()


def _check(namespace: str) -> None:
    if not isinstance(namespace, str) or not namespace.strip():
        raise UsageError("namespace must not be empty (e.g. project:<repo> or user:global)")
    if len(namespace) > MAX_NAMESPACE_CHARS:
        raise UsageError(f"namespace is longer than {MAX_NAMESPACE_CHARS} characters")
    if any(ch.isspace() for ch in namespace) or has_controls(namespace):
        raise UsageError(f"namespace {namespace!r} contains whitespace or control characters")
    if any(unicodedata.category(ch) in _INVISIBLE for ch in namespace):
        # A zero-width space or a direction mark makes a namespace that looks like another one
        # and matches nothing (scoped tokens, the hooks' derived key).
        raise UsageError(
            f"namespace {namespace!r} contains invisible or unassigned characters "
            "(zero-width, direction marks, private use)"
        )
    shape = _SHAPE.match(namespace)
    if shape is None and not is_near_miss_global(namespace):
        raise UsageError(
            f"namespace {namespace!r} is not <kind>:<name> (e.g. project:<repo> or user:global)"
        )
    if shape is not None and any(part in ("", ".", "..") for part in shape.group(2).split("/")):
        raise UsageError(f"namespace {namespace!r} has an empty, '.' or '..' part")
    if is_near_miss_global(namespace):
        raise Refusal(
            f"namespace {namespace!r} looks like a misspelling of the global namespace; "
            f"use {GLOBAL_NAMESPACE}"
        )
