"""The ZMemError tree. Each class carries the process exit code the spec assigns to it, so front
ends map any library failure to the right exit status without a lookup table."""

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
    """The store file cannot be opened or used: not a database, unreadable, or locked too long."""


class NotFound(ZMemError):
    """The target id does not exist (exit 1)."""

    exit_code = 1
