"""Hermes tool calls into the ops ring, the way PostToolUse feeds it on the coding hosts: the
post_tool_call hook (the zmem_hooks plugin registers it; Hermes gives memory providers no
hooks) and, when that plugin is not enabled, the turn's tool calls read back from sync_turn's
messages. Only terminal, write_file and patch calls are recorded, and only allowlisted tokens
(zmem.hosts.opsring). The same plugin's pre_llm_call hook hands the provider's hazard
delivery to Hermes."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from zmem.hermes_provider import runtime
from zmem.hosts import events, opsring

log = logging.getLogger("zmem.hermes_provider")


def on_post_tool_call(
    tool_name: Any = None,
    args: Any = None,
    result: Any = None,
    session_id: Any = None,
    status: Any = None,
    **_: Any,
) -> None:
    """Hermes's post_tool_call callback. Records only for a session a ZMem provider serves in
    this process (its data dir and settings); never raises into Hermes, returns nothing."""
    try:
        if not isinstance(session_id, str) or not session_id:
            return
        target = runtime.route(session_id)
        if target is None or not target.may_write:
            return
        event = events.hermes_tool_event(
            tool_name, args, session_id=session_id, status=status, result=result
        )
        # Marked even when the tool is not one the ring records: the hook is live for this
        # session, so sync_turn must not record the turn a second time.
        runtime.mark_fed(session_id)
        if event is not None:
            opsring.record_event(target.query_context, target.data_dir, event)
    except Exception as exc:  # a memory side channel must never break a tool call
        log.warning("zmem post_tool_call failed (ignored): %s: %s", type(exc).__name__, exc)


def on_pre_llm_call(session_id: Any = None, **_: Any) -> dict[str, str] | None:
    """Hermes's pre_llm_call callback, once per turn before the model is asked: the hazard
    lessons the session's tool calls since the last turn touched (the pre-tool surface, after
    the fact: Hermes has no hook that adds context before a tool runs). Hermes appends the
    context to the turn's user message. None when there is nothing; never raises."""
    try:
        if not isinstance(session_id, str) or not session_id:
            return None
        target = runtime.route(session_id)
        if target is None or target.deliver is None or not target.query_context:
            return None
        text = target.deliver(session_id)
        return {"context": text} if text else None
    except Exception as exc:  # a memory side channel must never break a turn
        log.warning("zmem pre_llm_call failed (ignored): %s: %s", type(exc).__name__, exc)
        return None


def turn_events(messages: Iterable[Any], session_id: str) -> list[events.HookEvent]:
    """The ring events of the last turn in an OpenAI-style message list (everything after the
    last user message): each assistant tool call, failed when its tool message says so. Reads
    tool calls and tool results only, never a message's text or api_content."""
    msgs = [m for m in messages if isinstance(m, dict)]
    last_user = max((i for i, m in enumerate(msgs) if m.get("role") == "user"), default=-1)
    turn = msgs[last_user + 1 :]
    results = {m.get("tool_call_id"): m.get("content") for m in turn if m.get("role") == "tool"}
    out: list[events.HookEvent] = []
    for m in turn:
        if m.get("role") != "assistant" or not isinstance(m.get("tool_calls"), list):
            continue
        for call in m["tool_calls"]:
            fn = call.get("function") if isinstance(call, dict) else None
            if not isinstance(fn, dict):
                continue
            event = events.hermes_tool_event(
                fn.get("name"),
                _arguments(fn.get("arguments")),
                session_id=session_id,
                result=results.get(call.get("id")),
            )
            if event is not None:
                out.append(event)
    return out


def _arguments(raw: Any) -> Any:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return None
    return None


def record_turn(data_dir: Path, query_context: bool, session_id: str, messages: Any) -> int:
    """sync_turn's fallback: the turn's tool calls into the ring, unless post_tool_call already
    recorded them. Returns the number of events recorded."""
    if not query_context or not session_id or not isinstance(messages, list):
        return 0
    if runtime.fed(session_id):
        return 0
    recorded = 0
    for event in turn_events(messages, session_id):
        opsring.record_event(query_context, data_dir, event)
        recorded += 1
    return recorded
