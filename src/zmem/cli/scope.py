"""Which namespace a command means when none is given: inside a git checkout, the one the hooks
derive for it (so a memory added by hand reaches the hooks, and a recall reads what they
read); elsewhere, a command that works on one namespace must be given it and a read spans
every namespace. The help texts of --namespace share the words below."""

from __future__ import annotations

import os

from zmem.capture.project_namespace import checkout_namespace
from zmem.cli import output
from zmem.errors import UsageError

# The --namespace help of each kind of command, so every command says the same thing.
ONE_HELP = (
    "project:<repo> or user:global. Default inside a git checkout: the checkout's (as the "
    "hooks derive it); elsewhere required."
)
READ_HELP = (
    "Only this namespace (and its migration aliases: the old names ZMEM_NS_MIGRATION_MAP maps "
    "to it). Default inside a git checkout: the checkout's; elsewhere every namespace."
)
ALL_HELP = "Every namespace, even inside a git checkout."


def for_one(namespace: str | None) -> str:
    """The one namespace a command works on: the given one, else this checkout's."""
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
    """(namespace or None for all, whether it was derived from the checkout): a listing's."""
    if all_namespaces:
        if namespace is not None:
            raise UsageError("--all-namespaces and --namespace exclude each other")
        return None, False
    if namespace is not None:
        return namespace, False
    found = checkout_namespace(os.getcwd())
    return (found[0], True) if found is not None else (None, False)
