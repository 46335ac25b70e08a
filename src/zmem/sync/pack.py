"""The Tier 1 hand-off pack: live memories of a namespace and of user:global rendered as
markdown within a UTF-8 byte budget, for a session that has no store (a cloud agent, a
teammate's prompt). Pure rendering: the rows come from the caller."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from zmem.models import Memory


@dataclass(frozen=True)
class Pack:
    text: str
    shown: int
    omitted_budget: int  # rows left out because they would pass --max-bytes
    bytes: int


def order(rows: Sequence[Memory]) -> list[Memory]:
    """Confidence, then use (retrievals + surfaces), then the newest first."""
    by_time = sorted(rows, key=lambda m: m.ingestion_ts, reverse=True)
    return sorted(by_time, key=lambda m: (-m.confidence, -(m.retrieval_count + m.surfaced_count)))


def _bullet(m: Memory) -> str:
    # One line per memory: a multi-line text must not open a heading or a fence in the pack.
    text = " ".join(m.content.split())
    return f"- [{m.type}] {text} (confidence {m.confidence:.2f})\n"


def render(
    namespace: str,
    project: Sequence[Memory],
    global_rows: Sequence[Memory],
    max_bytes: int,
    withheld: int = 0,
) -> Pack:
    """Sections in order; a bullet that would take the pack past `max_bytes` is left out whole
    and later, smaller ones still go in. Only what follows the walk (an empty section's note,
    the omitted count) may pass the budget."""
    out = f"# Memory pack: {namespace}\n\n"
    size = len(out.encode("utf-8"))
    shown = omitted = 0
    sections = [(f"## Project ({namespace})\n", project)]
    if global_rows is not project:
        sections.append(("## Global (user:global)\n", global_rows))
    for heading, rows in sections:
        head = ("\n" if shown else "") + heading
        out += head
        size += len(head.encode("utf-8"))
        placed = 0
        for m in rows:
            line = _bullet(m)
            cost = len(line.encode("utf-8"))
            if size + cost > max_bytes:
                omitted += 1
                continue
            out += line
            size += cost
            placed += 1
        if placed == 0:
            out += "_(nothing here)_\n"
        shown += placed
    notes = []
    if omitted:
        notes.append(f"{omitted} more memories did not fit the {max_bytes}-byte budget")
    if withheld:
        notes.append(f"{withheld} flagged as possible prompt injection were withheld")
    if notes:
        out += "\n_" + "; ".join(notes) + "._\n"
    return Pack(out, shown, omitted, len(out.encode("utf-8")))
