"""CLI commands for the write-time judge's questions: `resolve` answers one (same, replaces,
contradicts, distinct) and `review` lists the ones still waiting."""

from __future__ import annotations

from typing import Any

import click

from zmem.capture.judge import ANSWERS
from zmem.cli import output, words
from zmem.cli.app import cli


def _differs(evidence: dict[str, Any]) -> str:
    """What the judge read as different between the two notes, in words."""
    return "; ".join(evidence.get("differs") or []) or "worded differently"


def review_lines(new_id: str, reviews: list[dict[str, Any]]) -> list[str]:
    """One line per question a write returned, naming the command that answers it."""
    lines = []
    for r in reviews:
        differs = _differs(r["evidence"])
        lines.append(
            f"review: is {new_id[:8]} the same as {r['id'][:8]} "
            f'("{output.preview(r["text"], 60)}"; {differs}; leans {r["likely"]})? '
            f"zmem resolve {new_id} {r['id']} --as {'|'.join(ANSWERS)}"
        )
    return lines


@cli.command()
@click.argument("new_id", metavar="NEW")
@click.argument("old_id", metavar="OLD")
@click.option("--as", "answer", required=True, type=click.Choice(ANSWERS),
              help="same: fold NEW into OLD (OLD is corroborated); replaces: NEW supersedes OLD; "
              "contradicts: both stay, linked, each loses trust; distinct: two facts, never "
              "asked again.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help=words.JSON)
@click.pass_obj
def resolve(obj, new_id, old_id, answer, as_json):
    """Answer a review: what the memory NEW is to OLD (`zmem resolve NEW OLD --as same`).

    An add or update that the write-time judge could not decide returns a review naming both
    ids; so does `zmem review`. Each answer maps onto what the store already does, history
    kept: same retires NEW as a duplicate of OLD, replaces retires OLD as updated by NEW,
    contradicts links them (both stay live), distinct records that they are two facts. Ids
    take an unambiguous prefix. Nothing is written when a row is not live or the pair was
    answered otherwise before (exit 2).
    """
    done = obj.store().resolve(new_id, old_id, answer)
    if as_json:
        output.emit_json(done)
        return
    output.emit(f"{done['result']}: {done['new']} / {done['old']} ({done['answer']}); "
                f"live: {', '.join(done['live']) or 'neither'}")  # fmt: skip


@cli.command()
@click.option("--namespace", "namespaces", multiple=True,
              help="Only this namespace's questions (repeat for more); default: all.")  # fmt: skip
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000),
              help="Most questions to list, oldest first.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help=words.JSON)
@click.pass_obj
def review(obj, namespaces, limit, as_json):
    """The judge's questions still waiting for an answer, oldest first.

    Writes with no agent to ask (ingest, hub pulls, organize) queue what the write-time judge
    could not decide; an agent's add or update returns its questions at once and they wait
    here too until answered. Answer each with the `zmem resolve` line it shows.
    """
    found = obj.store().reviews(list(namespaces) or None, limit)
    if as_json:
        output.emit_json({"reviews": found, "count": len(found)})
        return
    if not found:
        output.emit("no reviews waiting")
        return
    for r in found:
        differs = _differs(r["evidence"])
        output.emit(
            f'{r["new"][:8]} "{output.preview(r["new_text"] or "", 60)}"\n'
            f'  vs {r["old"][:8]} "{output.preview(r["old_text"] or "", 60)}"\n'
            f"  {differs}; leans {r['likely']}; {r['answer']}"
        )
