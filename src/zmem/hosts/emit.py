"""What each host accepts on stdout, and nothing else: the hook emitter, the one place a hook
writes to stdout. Claude Code and ZCode take the hookSpecificOutput envelope on their context
events; Codex parses anything that starts with `{` or `[` against a strict schema (extra keys
fail the hook), so ZMem prints exactly the known keys or nothing. Standard library only."""

from __future__ import annotations

import json
import sys

# typing costs the hook client ~2.5 ms to import; the names are for annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Events whose additionalContext reaches the model, per host. Stop is absent everywhere on
# purpose: on Claude Code a Stop hook that returns context keeps the agent running. Claude Code
# 2.1.332 carries PreCompact's context into the compacted conversation (verified live: the first
# request after a /compact holds it; tests/test_live_hosts.py).
CONTEXT_EVENTS: dict[str, frozenset[str]] = {
    "claude": frozenset(
        {
            "SessionStart",
            "UserPromptSubmit",
            "PreToolUse",
            "PostToolUse",
            "SubagentStart",
            "PreCompact",
        }
    ),
    # Codex 0.171 delivers SubagentStart context to the subagent as a developer message
    # (verified live, docs/host-verification.md), though older output schemas left it out.
    "codex": frozenset({"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse"})
    | {"SubagentStart"},
    "zcode": frozenset({"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse"}),
}

# Codex output schemas set additionalProperties: false at both levels.
CODEX_TOP_KEYS = frozenset(
    {"continue", "stopReason", "suppressOutput", "systemMessage", "decision", "reason"}
    | {"hookSpecificOutput"}
)
CODEX_SPECIFIC_KEYS = frozenset({"hookEventName", "additionalContext"})

# Claude Code caps each output string at 10,000 characters (longer text goes to a file).
MAX_CONTEXT_CHARS = 9500


def render(host: str, event: str, context: str | None, notice: str | None = None) -> str:
    """The exact stdout for this host and event: an envelope, or "" (print nothing). A
    `notice` is shown to the person too (systemMessage), beside the model's context."""
    if notice and host == "claude" and event in CONTEXT_EVENTS.get(host, frozenset()):
        doc: dict = {"systemMessage": notice}
        if context and context.strip():
            text = (
                context
                if len(context) <= MAX_CONTEXT_CHARS
                else (context[: MAX_CONTEXT_CHARS - 1] + "\u2026")
            )
            doc["hookSpecificOutput"] = {"hookEventName": event, "additionalContext": text}
        return json.dumps(doc, ensure_ascii=False)
    if not context or not context.strip():
        return ""
    if event not in CONTEXT_EVENTS.get(host, frozenset()):
        return ""
    if len(context) > MAX_CONTEXT_CHARS:
        context = context[: MAX_CONTEXT_CHARS - 1] + "\u2026"
    doc = {"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}}
    if host == "codex" and not codex_valid(doc):
        return ""
    return json.dumps(doc, ensure_ascii=False)


# Where a stop hook may ask the agent to go on: the reflection (hosts/reflect.py). ZCode has no
# SubagentStop event.
STOP_EVENTS: dict[str, frozenset[str]] = {
    "claude": frozenset({"Stop", "SubagentStop"}),
    "codex": frozenset({"Stop", "SubagentStop"}),
    "zcode": frozenset({"Stop"}),
}


def render_stop(host: str, event: str, reason: str | None) -> str:
    """A stop hook's continuation: {"decision": "block", "reason": ...}, the one shape Claude
    Code, Codex (whose Stop stdout must be JSON or nothing) and ZCode all take; "" otherwise."""
    if not reason or event not in STOP_EVENTS.get(host, frozenset()):
        return ""
    doc = {"decision": "block", "reason": reason[:MAX_CONTEXT_CHARS]}
    if host == "codex" and not codex_valid(doc):
        return ""
    return json.dumps(doc, ensure_ascii=False)


def codex_valid(doc: Any) -> bool:
    """True when doc uses only keys Codex's output schemas know, with the right types."""
    if not isinstance(doc, dict) or not set(doc) <= CODEX_TOP_KEYS:
        return False
    spec = doc.get("hookSpecificOutput")
    if spec is None:
        return True
    if not isinstance(spec, dict) or not set(spec) <= CODEX_SPECIFIC_KEYS:
        return False
    if not isinstance(spec.get("hookEventName"), str):
        return False
    ctx = spec.get("additionalContext")
    return ctx is None or isinstance(ctx, str)


def write(out: str) -> None:
    """The rendered envelope to stdout; a closed pipe is the host's business, not an error."""
    try:
        if out:
            sys.stdout.write(out)
        sys.stdout.flush()
    except OSError:
        pass
