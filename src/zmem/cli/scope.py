"""Which namespace a command means when none is given: inside a git checkout, the one the hooks
derive for it (so a memory added by hand reaches the hooks, and a recall reads what they
read); elsewhere, a write must name one and a read spans every namespace."""

from __future__ import annotations

import os

from zmem.capture.project_namespace import checkout_namespace
from zmem.cli import output
from zmem.errors import UsageError


def for_write(namespace: str | None) -> str:
    if namespace is not None:
        return namespace
    found = checkout_namespace(os.getcwd())
    if found is None:
        raise UsageError(
            "no --namespace, and this directory is not in a git checkout: pass --namespace "
            "project:<repo> (or user:global for every project)"
        )
    output.notice(f"namespace {found[0]} (this checkout's; --namespace chooses another)")
    return found[0]


def for_read(namespace: str | None, all_namespaces: bool) -> tuple[str | None, bool]:
    """(namespace or None for all, whether it was derived from the checkout)."""
    if all_namespaces:
        if namespace is not None:
            raise UsageError("--all-namespaces and --namespace exclude each other")
        return None, False
    if namespace is not None:
        return namespace, False
    found = checkout_namespace(os.getcwd())
    return (found[0], True) if found is not None else (None, False)
