"""The LoCoMo file format, read once for both of its users (the retrieval benchmark and the gold
adapter): dialog ids and evidence tokens, session numbering and dates, and the text a dialog
turn becomes as a memory."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

_DIA_ID = re.compile(r"D(\d+):(\d+)")
_SESSION_KEY = re.compile(r"session_(\d+)")
_SESSION_DATE = re.compile(
    r"(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})", re.IGNORECASE
)
# Parsed by hand rather than with strptime's %B, which follows the process locale.
_MONTHS = {
    name: number
    for number, name in enumerate(
        "january february march april may june july august september october november "
        "december".split(),
        start=1,
    )
}


def parse_evidence(raw: Any) -> list[str]:
    """Every D<n>:<m> token of an evidence field, canonical ("D08:6" -> "D8:6"), first-seen
    order. The upstream file joins lists into one string ("D8:6; D9:17") and has stray text
    ("D", "D:11:26") that yields nothing rather than a guess."""
    items = raw if isinstance(raw, list) else [] if raw is None else [raw]
    found = [f"D{int(n)}:{int(m)}" for item in items for n, m in _DIA_ID.findall(str(item))]
    return list(dict.fromkeys(found))


def session_of(dia_id: str) -> int:
    match = _DIA_ID.fullmatch(dia_id)
    if match is None:
        raise ValueError(f"not a dialog id: {dia_id!r}")
    return int(match.group(1))


def session_numbers(conversation: dict[str, Any]) -> list[int]:
    """The conversation's session numbers in numeric order (session_10 after session_9)."""
    return sorted(int(m.group(1)) for k in conversation if (m := _SESSION_KEY.fullmatch(k)))


def parse_session_date(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> an aware UTC datetime (LoCoMo dates carry no zone)."""
    match = _SESSION_DATE.search(text)
    month = _MONTHS.get(match.group(5).lower()) if match else None
    if match is None or month is None:
        raise ValueError(f"unrecognised LoCoMo session date: {text!r}")
    hour = int(match.group(1)) % 12 + (12 if match.group(3).lower() == "pm" else 0)
    return datetime(
        int(match.group(6)), month, int(match.group(4)), hour, int(match.group(2)), tzinfo=UTC
    )


def session_date_iso(text: str) -> str:
    return parse_session_date(text).strftime("%Y-%m-%dT%H:%M:%SZ")


def turn_content(date_text: str, speaker: str, text: str, caption: str | None) -> str:
    """A dialog turn as a memory: `[<session date>] <speaker>: <text>` plus the photo caption."""
    out = f"[{date_text}] {speaker}: {text}".rstrip()
    if caption:
        out += f" [shares {caption.strip()}]"
    return out
