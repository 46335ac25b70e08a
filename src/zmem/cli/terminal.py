"""Whether a person is at this command's terminal (issue 49): a `zmem add` typed by hand is the
`user` signal the spec names, and the type a note's words leave unclear is asked of that person.
The resident process runs commands for clients whose terminal it cannot see: the client says
whether it has one (set_interactive), and a question that needs a person sends the command back
to run in the client's own process (NeedsPerson)."""

from __future__ import annotations

import os
import sys

# An agent's shell can be a terminal too: Codex runs a command in a PTY when the model asks
# for one (exec_command tty=true). What the hosts put in their tools' environment says an agent
# typed it: Claude Code (2.1.332) sets CLAUDECODE=1 and AI_AGENT, Codex (0.171) CODEX_THREAD_ID
# and CODEX_TOOL_CALL_ID (seen in their tool calls' environment, tests/test_cli_first_minutes.py).
AGENT_VARS = ("CLAUDECODE", "AI_AGENT", "CODEX_THREAD_ID", "CODEX_TOOL_CALL_ID")

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
    if any(os.environ.get(name) for name in AGENT_VARS):
        return False
    try:
        return sys.stdin.isatty() and sys.stdout.isatty()
    except (AttributeError, ValueError):  # closed or replaced streams
        return False


def can_ask() -> bool:
    """A question can be put to the person here, in this process."""
    return _override[0] is None and interactive()
