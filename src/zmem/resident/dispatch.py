"""One hook event from the host's raw stdin to (stdout, reason, log fields), shared by the hook
client and the resident process. Every check that decides an event has no work lives here,
decided from the payload alone before anything opens the store; the verbs then only do the
work. Standard library only: the client runs this before it knows it needs the store."""

from __future__ import annotations

import json

from zmem.hosts import emit, events, nudges, opsring, reflect
from zmem.layout import HTTP_CONFIG
from zmem.resident import wire

# typing costs the hook client ~2.5 ms to import; the names are for annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

# Events that never need the store: nothing to do but log.
NO_WORK = frozenset({"SessionEnd", "PermissionRequest"})
# Turn ends: the reflection reads the ops ring and the transcript, never the store.
STOP_EVENTS = frozenset({"Stop", "SubagentStop"})
# Host notices that arrive as a prompt (Claude Code reports a finished background subagent as
# one) are not the user asking: recalling on them re-injects what the session already has.
HOST_NOTICES = ("<task-notification>",)


def skip_reason(host: str, ev: events.HookEvent, query_context: bool) -> str | None:
    """ "skipped" when this event has nothing to recall on, else None."""
    name = ev.name
    if name in NO_WORK:
        return "skipped"
    if name not in emit.CONTEXT_EVENTS.get(host, ()):
        return "skipped"  # the host would drop the context: no recall for nothing
    if name == "PreToolUse":
        if not query_context or ev.tool_name not in events.HAZARD_TOOLS:
            return "skipped"
        ev.query = opsring.tool_query(ev)  # the verb recalls on it; derived once
        if not ev.query:
            return "skipped"
    if name == "UserPromptSubmit":
        prompt = (ev.prompt or "").strip()
        if not prompt or prompt.startswith(HOST_NOTICES):
            return "skipped"
    return None


def _start_keeper(ddir: Path) -> str | None:
    """The keeper of Claude Code's http prompt hook, when `setup claude` wired one and nothing
    holds its port (a reboot, a kill): started before the session's first prompt. When another
    user's program holds the port, the hook moves (http_hook.guard): what to tell the person."""
    if not (ddir / HTTP_CONFIG).exists():
        return None  # a command-hook install: no keeper, and no import of http_hook's sockets
    try:
        from zmem.resident import port_guard  # not on any other event's path

        return port_guard.guard(ddir)
    except Exception:
        return None  # a hook never fails its host; the next SessionStart tries again


def respond(
    host: str,
    event_name: str,
    raw: str,
    ddir: Path,
    t0: float,
    execute: Callable[[events.HookEvent, float], tuple[events.Outcome | None, str]],
) -> tuple[str, str, dict[str, Any]]:
    """`execute` runs a verb that needs the store, returning (outcome, or None on timeout,
    and how it ran: "daemon" or "inproc")."""
    if host not in events.HOSTS or event_name not in events.HOST_EVENTS[host]:
        return "", "skipped", {"error": "unknown-host-or-event"}
    try:
        payload = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return "", "error", {"error": "bad-json"}
    ev = events.normalize(host, event_name, payload)
    notice = None
    if event_name == "SessionStart" and host == "claude":
        notice = _start_keeper(ddir)
    query_context = wire.flag("ZMEM_QUERY_CONTEXT")
    if event_name in ("PostToolUse", "PostToolUseFailure"):
        o = opsring.record_event(query_context, ddir, ev)  # the ring, never the store
        nudge = nudges.convention(ddir, ev)
        if nudge:
            return (
                emit.render(host, event_name, nudge),
                "nudged",
                {**o.fields, "nudge": "convention"},
            )
        return "", o.reason, o.fields
    if event_name in STOP_EVENTS:
        o = reflect.reflect(ddir, ev, wire.flag("ZMEM_REFLECT"))
        return emit.render_stop(host, event_name, o.context), o.reason, o.fields
    skipped = skip_reason(host, ev, query_context)
    if skipped is not None:
        return emit.render(host, event_name, notice, notice), skipped, {}
    outcome, via = execute(ev, t0)
    if outcome is None:
        return emit.render(host, event_name, notice, notice), "timeout", {"via": via}
    fields = dict(outcome.fields)
    fields["via"] = via
    if notice:
        fields["hook_port"] = "moved"
        context = "\n\n".join(x for x in (notice, outcome.context) if x)
        return emit.render(host, event_name, context, notice), outcome.reason, fields
    return emit.render(host, event_name, outcome.context), outcome.reason, fields
