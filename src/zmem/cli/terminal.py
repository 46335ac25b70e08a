"""Whether a person is at this command's terminal (issue 49): a `zmem add` typed by hand is the
`user` signal the spec names, and the type a note's words leave unclear is asked of that person.
The resident process runs commands for clients whose terminal it cannot see: the client says
whether it has one (set_interactive), and a question that needs a person sends the command back
to run in the client's own process (NeedsPerson)."""

from __future__ import annotations

import sys

_override: list[bool | None] = [None]


class NeedsPerson(Exception):
    """The command must ask the person at the terminal, and none is here to answer."""


def set_interactive(value: bool | None) -> None:
    _override[0] = value


def interactive() -> bool:
    """stdin and stdout are both a terminal (a person typing, reading): not a pipe, a script, an
    agent's tool call or a hook."""
    if _override[0] is not None:
        return _override[0]
    try:
        return sys.stdin.isatty() and sys.stdout.isatty()
    except (AttributeError, ValueError):  # closed or replaced streams
        return False


def can_ask() -> bool:
    """A question can be put to the person here, in this process."""
    return _override[0] is None and interactive()
