"""ZMem's correction-pattern library: spotting a user correcting the agent ("no, use X",
"remember: ...", "we never ...") in one prompt, and mining a Claude Code transcript JSONL for
them. Deterministic regexes, no model; candidates are reviewed before anything is stored."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zmem.capture import secrets
from zmem.capture.controls import strip_controls

MAX_MESSAGE_CHARS = 2000
MIN_CONFIDENCE = 0.5


@dataclass(frozen=True)
class Pattern:
    name: str
    regex: re.Pattern[str]
    kind: str  # correction | preference | convention | remember
    weight: float


def _p(name: str, rx: str, kind: str, weight: float) -> Pattern:
    return Pattern(name, re.compile(rx, re.IGNORECASE | re.MULTILINE), kind, weight)


PATTERNS: tuple[Pattern, ...] = (
    _p("remember", r"^\s*(?:please\s+)?remember(?:\s+that|\s*:)", "remember", 0.8),
    _p(
        "note-for-future", r"\b(?:for (?:the )?future|from now on|going forward)\b", "remember", 0.5
    ),
    _p("no-use", r"^\s*no[,.!]?\s+(?:use|it'?s|that'?s|do|we|you should)\b", "correction", 0.7),
    _p(
        "not-x-but-y",
        r"\b(?:don'?t|do not|never)\s+\w+.{0,60}\b(?:instead|rather)\b",
        "correction",
        0.6,
    ),
    _p("use-instead", r"\buse\s+\S+(?:\s+\S+)?\s+instead(?:\s+of)?\b", "correction", 0.6),
    _p(
        "wrong",
        r"\b(?:that'?s|this is|you'?re)\s+(?:wrong|incorrect|not right)\b",
        "correction",
        0.5,
    ),
    _p("not-what", r"\bnot what I (?:asked|meant|wanted)\b", "correction", 0.5),
    _p("stop-doing", r"\bstop\s+(?:doing|using|adding|running)\b", "correction", 0.6),
    _p("actually", r"^\s*actually[,\s]", "correction", 0.3),
    _p("we-always", r"\b(?:we|I)\s+(?:always|never)\s+\w+", "convention", 0.5),
    _p(
        "our-convention",
        r"\b(?:our|the) (?:convention|rule|policy) (?:is|says)\b",
        "convention",
        0.6,
    ),
    _p("prefer", r"\bI (?:prefer|'d rather|would rather|like it when)\b", "preference", 0.5),
    _p("should-always", r"\byou (?:should|must) (?:always|never)\b", "convention", 0.6),
)
_NEGATIVE = re.compile(r"\b(?:no|wrong|don'?t|never|stop|incorrect|not)\b", re.IGNORECASE)
_POSITIVE = re.compile(r"\b(?:prefer|like|great|thanks|good)\b", re.IGNORECASE)
_DECAY_DAYS = {"correction": 90, "convention": 180, "preference": 180, "remember": 365}


def detect(message: str) -> dict[str, Any] | None:
    """One correction candidate, or None when the message does not read as one."""
    text = message.strip()
    if not text or len(text) > MAX_MESSAGE_CHARS or text.startswith(("<", "/")):
        return None  # slash commands and host-injected blocks are not the user correcting
    hits = [p for p in PATTERNS if p.regex.search(text)]
    if not hits:
        return None
    confidence = min(0.95, sum(p.weight for p in hits))
    if confidence < MIN_CONFIDENCE:
        return None
    kind = max(hits, key=lambda p: p.weight).kind
    neg, pos = len(_NEGATIVE.findall(text)), len(_POSITIVE.findall(text))
    sentiment = "negative" if neg > pos else "positive" if pos > neg else "neutral"
    return {
        "message": text,
        "type": kind,
        "patterns": [p.name for p in hits],
        "confidence": round(confidence, 2),
        "sentiment": sentiment,
        "decay_days": _DECAY_DAYS[kind],
    }


def _user_texts(entry: Any) -> list[str]:
    # Claude Code transcripts are internal and change: read them defensively. User turns are
    # {"type": "user", "message": {"role": "user", "content": str | [blocks]}}; tool results
    # arrive as user turns too and are skipped, as are meta and sidechain entries.
    if not isinstance(entry, dict) or entry.get("type") != "user":
        return []
    if entry.get("isMeta") or entry.get("isSidechain"):
        return []
    msg = entry.get("message")
    content = msg.get("content") if isinstance(msg, dict) else None
    if isinstance(content, str):
        return [content]
    out = []
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                text = block.get("text")
                if isinstance(text, str):
                    out.append(text)
    return out


def screen(found: dict[str, Any], capture_mode: str) -> dict[str, Any]:
    """A candidate through the capture policy before it is queued or printed, as an add's
    content would be: escapes and control characters removed; likely secrets redacted in
    `auto` mode, flagged (`secret_warning`) in the others, never written silently."""
    message, _ = strip_controls(found["message"])
    if capture_mode == "auto":
        message, redacted = secrets.redact(message)
        if redacted:
            found["redacted"] = redacted
    elif secrets.looks_like_secret(message):
        found["secret_warning"] = True
    found["message"] = message
    return found


def mine_transcript(path: Path, capture_mode: str = "manual") -> dict[str, Any]:
    """{"count", "items"} for the corrections in a transcript, each through screen()."""
    items: list[dict[str, Any]] = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            for text in _user_texts(entry):
                found = detect(text)
                if found is None:
                    continue
                items.append(screen(found, capture_mode))
    return {"count": len(items), "items": items}
