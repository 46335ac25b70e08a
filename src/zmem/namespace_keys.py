"""The spelling of namespace keys, needed by code that must not pay for the models: the global
namespace's name and the one spelling of a project namespace named after a git remote
(models re-exports both)."""

from __future__ import annotations

GLOBAL_NAMESPACE = "user:global"
# A project namespace named after a git remote (project:<host.tld>/<path>): hosts and the big
# forges compare owner and repository without case, so the key is lower-cased (ASCII only, the
# same in every locale, as the team hub's SQL does it).
_REMOTE_NAMESPACE_PREFIX = "project:"
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def fold_namespace_case(namespace: str) -> str:
    """The one spelling of a remote-derived project namespace; any other namespace as it is."""
    if not namespace.startswith(_REMOTE_NAMESPACE_PREFIX):
        return namespace
    head = namespace[len(_REMOTE_NAMESPACE_PREFIX) :].split("/", 1)
    if len(head) < 2 or "." not in head[0]:
        return namespace
    return namespace.translate(_ASCII_LOWER)
