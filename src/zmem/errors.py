"""The ZMemError tree. Each class carries its process exit code, so front ends map any library
failure to the right exit status without a lookup table. The table (docs/cli.md): 0 success,
1 target missing or not live, 2 usage error, refusal or an unusable store (nothing written),
3 store busy (nothing written: run it again), 4 internal error (a bug; no class carries it)."""

from __future__ import annotations


class ZMemError(Exception):
    """Base class: a refusal or usage error (exit 2). The message is one stable line."""

    exit_code = 2


class UsageError(ZMemError):
    """Bad input from the caller: invalid value, missing argument, over-long content."""


class Refusal(ZMemError):
    """A well-formed request the store declines by policy (tombstone twice, near-miss namespace)."""


class ConfigError(ZMemError):
    """A ZMEM_* setting that cannot be honoured (unknown capture mode or embedding profile)."""


class SchemaError(ZMemError):
    """The store's schema is newer than this client supports, or otherwise unusable."""


class StoreUnavailable(ZMemError):
    """The store file cannot be opened or used: damaged, not a database, unreadable."""


class StoreBusy(ZMemError):
    """Another session held the write lock past the busy timeout: nothing was written, and the
    same command can simply be run again (exit 3, apart from 1 so a script can tell "retry"
    from "gone")."""

    exit_code = 3


class NotFound(ZMemError):
    """The target id does not exist (exit 1)."""

    exit_code = 1


class HubRefused(ZMemError):
    """The team hub refused: the role's credentials, its grants, or row level security (exit 2:
    nothing changed locally)."""


class HubUnavailable(ZMemError):
    """The team hub is down, unreachable or too slow: nothing changed locally, and the same
    sync can simply be run again (exit 3, as a busy store)."""

    exit_code = 3
