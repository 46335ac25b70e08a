"""What a Claude Code transcript says about the context the host built, read defensively from
its last 512 KB (the transcript is the host's internal format and may lag the turn): the user's
recent prompts (what a compaction is about to fold away) and whether the host took a pre-tool
hook's context itself (Claude Code 2.1.9 and later do; older ones drop it). Standard library."""

from __future__ import annotations

import json

from zmem.hosts import opsring

TAIL = 512 * 1024


def recent_prompts(path: str | None, count: int = 3) -> list[str]:
    """The last `count` prompts the user typed, oldest first."""
    if not path:
        return []
    found: list[str] = []
    for line in reversed(opsring.tail_lines(path, TAIL)):
        if '"user"' not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        message = entry.get("message") if isinstance(entry, dict) else None
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):  # tool results come back as user turns: not typed text
            content = " ".join(c.get("text", "") for c in content
                               if isinstance(c, dict) and c.get("type") == "text")  # fmt: skip
        text = " ".join(str(content or "").split())
        if text and not text.startswith(("<", "/")):  # host notices, slash commands
            found.append(text)
            if len(found) == count:
                break
    return list(reversed(found))


def showed_pretool(path: str | None, block: str) -> bool:
    """True when the transcript records the host taking a PreToolUse hook's context that holds
    this block (an attachment of type hook_additional_context). False when it does not, or
    cannot tell: then the pending fence is delivered, as before."""
    if not path or not block:
        return False
    lines = block.splitlines()
    probe = lines[-2] if len(lines) > 1 else block  # one row line of the fence
    for line in opsring.tail_lines(path, TAIL):
        if "hook_additional_context" not in line or "PreToolUse" not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        attachment = entry.get("attachment") if isinstance(entry, dict) else None
        if not isinstance(attachment, dict) or attachment.get("hookEvent") != "PreToolUse":
            continue
        content = attachment.get("content")
        texts = content if isinstance(content, list) else [content]
        if any(isinstance(t, str) and probe in t for t in texts):
            return True
    return False
