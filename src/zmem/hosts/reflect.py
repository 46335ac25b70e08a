"""A session's failures, and the Stop / SubagentStop reflection built on them: failed tool calls
from the ops ring (and, on Codex, whose PostToolUse carries no exit code, from the session's
rollout file), and tool calls the user rejected, read from a Claude Code transcript. At turn
end, once per new batch of failures, the reflection asks the agent whether one of them taught a
reusable lesson; it never fires twice for the same failures and never while the host reports
the agent already continuing from a stop hook. Standard library only: the hook client runs
it."""

from __future__ import annotations

import json
import os
import time

from zmem.hosts import opsring
from zmem.hosts.events import HookEvent, Outcome

# typing costs the hook client ~2.5 ms to import; the names are for annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

WINDOW_S = 3600  # failures older than this are not this turn's business
TRANSCRIPT_TAIL = 512 * 1024
# What Claude Code writes into the tool result of a call the user refused or interrupted.
REJECTIONS = (
    "The user doesn't want to proceed with this tool use",
    "The user doesn't want to take this action",
    "[Request interrupted by user for tool use]",
)
SHOWN = 5


def ring_failures(data_dir: Path, session_id: str, since: float) -> list[dict[str, Any]]:
    out = []
    for line in opsring.recent_lines(data_dir, session_id):
        parts = line.split("\t")
        if len(parts) >= 4 and parts[3] == "failed" and parts[0].isdigit():
            at = int(parts[0])
            if at > since:
                detail = " ".join(t for t in parts[2].split(",") if t)
                out.append({"kind": "tool_failure", "at": at, "tool": parts[1], "detail": detail})
    return out


def _epoch(stamp: Any) -> float | None:
    if not isinstance(stamp, str):
        return None
    from datetime import datetime  # only when a transcript is read: not on the hook's cold path

    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _result_text(item: Any) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(c.get("text", "") for c in content if isinstance(c, dict))
    return ""


def transcript_rejections(path: str | None, since: float) -> list[dict[str, Any]]:
    """Tool calls the user rejected, from the transcript's last 512 KB. The transcript is the
    host's internal format and may lag the turn: it is read defensively, never trusted whole."""
    if not path:
        return []
    out = []
    for line in opsring.tail_lines(path, TRANSCRIPT_TAIL):
        if "tool_result" not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        message = entry.get("message") if isinstance(entry, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        at = _epoch(entry.get("timestamp"))
        if at is None or at <= since:
            continue
        for item in content:
            if not isinstance(item, dict) or item.get("type") != "tool_result":
                continue
            text = _result_text(item)
            if any(marker in text for marker in REJECTIONS):
                out.append({"kind": "user_rejection", "at": int(at), "tool": None,
                            "detail": " ".join(text.split())[:200]})  # fmt: skip
    return out


def rollout_failures(path: str | None, since: float) -> list[dict[str, Any]]:
    """Commands a Codex rollout records as exited non-zero (its `item_completed` events of
    type CommandExecution). Only the command's allowlisted tokens are kept, as the ring keeps
    them: never argument values."""
    if not path:
        return []
    out = []
    for line in opsring.tail_lines(path, TRANSCRIPT_TAIL):
        if "CommandExecution" not in line:
            continue
        try:
            entry = json.loads(line)
            item = entry["payload"]["item"]
        except (ValueError, KeyError, TypeError):
            continue
        if not isinstance(item, dict) or item.get("type") != "CommandExecution":
            continue
        code = item.get("exit_code")
        if not (isinstance(code, int) and code != 0) and item.get("status") != "failed":
            continue
        at = _epoch(entry.get("timestamp"))
        if at is None or at <= since:
            continue
        command = item.get("command")
        text = command[-1] if isinstance(command, list) and command else command
        tokens = opsring.command_tokens(text) if isinstance(text, str) else []
        out.append({"kind": "tool_failure", "at": int(at), "tool": "Bash",
                    "detail": " ".join(tokens)})  # fmt: skip
    return out


def session_failures(
    data_dir: Path, session_id: str, transcript: str | None, since: float
) -> list[dict[str, Any]]:
    """The ring's failed calls, plus what the transcript shows: a Claude Code transcript's
    rejected calls, a Codex rollout's failed commands (each parser skips the other's lines)."""
    found = (
        ring_failures(data_dir, session_id, since)
        + transcript_rejections(transcript, since)
        + rollout_failures(transcript, since)
    )
    return sorted(found, key=lambda f: f["at"])


def _marker(data_dir: Path, session_id: str) -> Path:
    return data_dir / "ops" / f"{opsring.session_key(session_id)}.reflected"


def _last_reflected(data_dir: Path, session_id: str) -> float:
    try:
        return float(_marker(data_dir, session_id).read_text().strip() or 0)
    except (OSError, ValueError):
        return 0.0


def _remember(data_dir: Path, session_id: str, upto: float) -> None:
    path = _marker(data_dir, session_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    tmp.write_text(f"{upto:.0f}\n")
    os.replace(tmp, path)


def reflect(data_dir: Path, ev: HookEvent, enabled: bool, now: float | None = None) -> Outcome:
    """Stop / SubagentStop: the reflection prompt when failures arrived since the last one."""
    sid = ev.session_id
    if not enabled or not sid:
        return Outcome(reason="skipped")
    if ev.stop_hook_active:
        return Outcome(reason="skipped", fields={"why": "stop-hook-active"})
    now = time.time() if now is None else now
    since = max(_last_reflected(data_dir, sid), now - WINDOW_S)
    transcript = ev.transcript_path if ev.host in ("claude", "codex") else None
    found = session_failures(data_dir, sid, transcript, since)
    if not found:
        return Outcome(reason="no-failures")
    _remember(data_dir, sid, max(f["at"] for f in found))
    # The next prompt's capture nudge (verbs._capture_prompt) would ask the same question.
    from zmem.hosts import sidecars

    sidecars.claim_marker(data_dir, "capture", sid)
    failed = [f for f in found if f["kind"] == "tool_failure"]
    rejected = [f for f in found if f["kind"] == "user_rejection"]
    what = []
    if failed:
        shown = ", ".join(dict.fromkeys(f["detail"] or f["tool"] for f in failed[-SHOWN:]))
        what.append(f"{len(failed)} failed tool call(s) ({shown})")
    if rejected:
        what.append(f"{len(rejected)} tool call(s) the user rejected")
    who = "this subagent's session" if ev.name == "SubagentStop" else "this session"
    text = (
        f"ZMem reflection: {who} had {' and '.join(what)}. If one taught something reusable "
        "(the fix for a failure, a hazard, a rule the user holds), capture it now with the "
        "memory skill: add --type lesson --signal test|compile|lint|user, grounded in what "
        "showed it. If nothing generalizes, stop without adding anything."
    )
    return Outcome(text, "reflect", {"failures": len(failed), "rejections": len(rejected)})
