"""CLI commands that write memories: add, update, invalidate, supersede."""

from __future__ import annotations

import sys

import click

from zmem.cli import output, scope, terminal, words
from zmem.cli.app import cli
from zmem.config import CAPTURE_MODES
from zmem.errors import UsageError
from zmem.models import MEMORY_TYPES, SIGNALS, TAINTS, WriteResult


def read_content(value: str) -> str:
    """`--content -` reads stdin (argv is capped far below 64K on Windows)."""
    if value != "-":
        return value
    text = sys.stdin.read()
    if text.endswith("\r\n"):
        return text[:-2]
    return text[:-1] if text.endswith("\n") else text


def _report(result: WriteResult, as_json: bool, include_created_new: bool) -> None:
    if as_json:
        output.emit_json(result.to_dict(include_created_new=include_created_new))
        return
    output.emit_warnings(result.warnings)
    if result.result == "stored":
        line = f"stored {result.id}"
        if result.replaced:
            line += f" (replaces {result.replaced})"
        extras = []
        if result.related:
            extras.append(f"linked to {len(result.related)} related")
        if result.contradicts:
            extras.append(f"contradicts {', '.join(result.contradicts)}")
        output.emit(line + (f"; {'; '.join(extras)}" if extras else ""))
        if result.reviews:
            from zmem.cli.reviews import review_lines

            for text in review_lines(result.id, list(result.reviews)):
                output.emit(text)
    else:
        note = f" (replaces {result.replaced})" if result.replaced else ""
        output.emit(f"deduped {result.id}: refreshed the existing near-identical memory{note}")


def _type_of(text: str) -> str:
    """The kind the words say; asked of the person at a terminal when they do not say it
    clearly; for a script, the default with a warning."""
    from zmem.capture.guess_type import guess

    kind, sure = guess(text)
    if sure:
        output.notice(f"type {kind} (read from the words; --type sets another)")
        return kind
    if terminal.interactive():
        if not terminal.can_ask():
            raise terminal.NeedsPerson()
        return output.choose("What kind of knowledge is it?", MEMORY_TYPES, kind)
    output.warn(f"type {kind} (the words do not say; --type sets it)")
    return kind


_TYPE = click.Choice(MEMORY_TYPES)
_SIGNAL = click.Choice(SIGNALS)
_TAINT = click.Choice(TAINTS)
_MODE = click.Choice(CAPTURE_MODES)


@cli.command()
@click.argument("text", required=False, metavar="[TEXT]")
@click.option(
    "--namespace", default=None,
    help="project:<repo> or user:global. Default inside a git checkout: the checkout's, as the "
    "hooks derive it (`zmem where` shows it).",
)  # fmt: skip
@click.option(
    "--type", "type_", type=_TYPE, default=None,
    help="What kind of knowledge. Default: read from the words when they say it clearly "
    "(never, must: constraint; always: convention; prefer: preference; decided: decision; "
    "turns out, fails when: lesson; lives in, runs on: fact); else asked at a terminal, and "
    "lesson for a script (with a warning).",
)  # fmt: skip
@click.option("--content", default=None, help="The knowledge (or as TEXT); '-' reads stdin.")
@click.option("--tags", default=None, help="Comma-separated tags (entity:Name links an entity).")
@click.option(
    "--signal",
    type=_SIGNAL,
    default=None,
    help="External grounding. Default: user when a person types the command at a terminal, "
    "else none = an agent's self-opinion (confidence 0.2, below the recall floor).",
)
@click.option(
    "--taint",
    type=_TAINT,
    default=None,
    help="Origin trust. Default: trusted_internal if grounded, else untrusted_tool.",
)
@click.option(
    "--source-ref",
    default=None,
    help="file:<path> (hashed; flagged [STALE SOURCE] when it changes), "
    "session:<id> or db:<table>:<rowid>.",
)
@click.option(
    "--capture-mode",
    type=_MODE,
    default=None,
    help="auto redacts secrets; manual/reviewed keep text and warn. "
    "Default: $ZMEM_CAPTURE_MODE or manual.",
)
@click.option("--json", "as_json", is_flag=True, help='Print {"id", "result", "warnings"}.')
@click.pass_obj
def add(
    obj, text, namespace, type_, content, tags, signal, taint, source_ref, capture_mode, as_json
):
    """Capture a memory: `zmem add "Never push to main directly"`.

    Near-identical live content in the namespace is refreshed instead of duplicated; a
    near-identical row of opposite polarity is kept and marked contradicting. Typed by a person
    at a terminal, the memory is grounded by that person (signal user, confidence 0.6); from a
    script or an agent, it is ungrounded (signal none) unless --signal says otherwise.
    """
    if text is not None and content is not None:
        raise UsageError("give the text once: as TEXT or as --content, not both")
    if text is None and content is None:
        raise UsageError("say what to remember: zmem add TEXT (or --content TEXT, '-' for stdin)")
    body = read_content(content if content is not None else text)
    if signal is None:
        # A person at a terminal is the `user` signal the spec names; an agent's note (no
        # terminal) stays ungrounded, below the recall floor (docs/decisions.md).
        signal = "user" if terminal.interactive() else "none"
    if type_ is None:
        type_ = _type_of(body)
    namespace = scope.for_one(namespace)
    result = obj.store(create=True).add(
        body,
        namespace=namespace,
        type=type_,
        tags=tags,
        signal=signal,
        taint=taint,
        source_ref=source_ref,
        capture_mode=capture_mode,
    )
    _report(result, as_json, include_created_new=False)


@cli.command()
@click.argument("id_arg", required=False, metavar="[ID]")
@click.option("--id", "memory_id", default=None, help=words.LIVE_ID + " The same as ID.")
@click.option("--content", required=True, help="The new content; '-' reads it from stdin.")
@click.option("--namespace", default=None, help="Move the revision here (default: the row's).")
@click.option("--type", "type_", type=_TYPE, default=None, help="New type (default: the row's).")
@click.option("--tags", default=None, help="Replace the tags (default: inherit).")
@click.option("--source-ref", default=None, help="New source ref (default: the row's).")
@click.option(
    "--confidence", type=float, default=None,
    help="Set confidence, 0 to 1 (default: kept, or the new --signal's).",
)  # fmt: skip
@click.option(
    "--signal", type=_SIGNAL, default=None,
    help="New grounding (default: the row's); sets its confidence unless --confidence.",
)  # fmt: skip
@click.option(
    "--taint",
    type=_TAINT,
    default=None,
    help="Can only worsen: the new row keeps the worse of old and given.",
)
@click.option(
    "--capture-mode", type=_MODE, default=None,
    help="As for add: auto redacts secrets. Default: $ZMEM_CAPTURE_MODE or manual.",
)  # fmt: skip
@click.option(
    "--json", "as_json", is_flag=True, help='Print {"id", "result", "created_new", "warnings"}.'
)
@click.pass_obj
def update(
    obj,
    id_arg,
    memory_id,
    content,
    namespace,
    type_,
    tags,
    source_ref,
    confidence,
    signal,
    taint,
    capture_mode,
    as_json,
):
    """Revise a memory append-only: `zmem update ID --content TEXT`. A new live row links back
    via update_of and the old row is tombstoned (retired: still readable with --as-of before
    now)."""
    from zmem.cli.reads import the_id

    memory_id = the_id(id_arg, memory_id)
    result = obj.store().update(
        memory_id,
        read_content(content),
        namespace=namespace,
        type=type_,
        tags=tags,
        source_ref=source_ref,
        confidence=confidence,
        signal=signal,
        taint=taint,
        capture_mode=capture_mode,
    )
    _report(result, as_json, include_created_new=True)


@cli.command()
@click.argument("id_arg", required=False, metavar="[ID]")
@click.option("--id", "memory_id", default=None, help=words.LIVE_ID + " The same as ID.")
@click.option("--reason", default=None, help="Why the fact is no longer true (required).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@click.pass_obj
def invalidate(obj, id_arg, memory_id, reason, as_json):
    """Record that a fact is no longer true: `zmem invalidate ID --reason WHY` (auditable: the
    reason is required)."""
    from zmem.cli.reads import the_id

    memory_id = the_id(id_arg, memory_id)
    if reason is None or not reason.strip():
        raise UsageError("invalidate requires a non-empty --reason")
    done = obj.store().invalidate(memory_id, reason)
    _tombstone_report(done, "invalidated", as_json)


@cli.command()
@click.argument("id_arg", required=False, metavar="[ID]")
@click.option("--id", "memory_id", default=None, help=words.LIVE_ID + " The same as ID.")
@click.option("--reason", default=None, help="Optional reason (default: superseded).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@click.pass_obj
def supersede(obj, id_arg, memory_id, reason, as_json):
    """Retire a memory: no longer recalled, still readable as history.

    The row is tombstoned (kept, marked superseded: --as-of and --include-superseded still read
    it). A general retirement; use invalidate for facts that became false.
    """
    from zmem.cli.reads import the_id

    done = obj.store().supersede(the_id(id_arg, memory_id), reason)
    _tombstone_report(done, "superseded", as_json)


@cli.command()
@click.option("--id", "memory_id", required=True, help=words.LIVE_ID)
@click.option("--applied", is_flag=True, help="It was followed and it worked.")
@click.option("--violated", is_flag=True, help="It was followed and it was wrong.")
@click.option("--json", "as_json", is_flag=True, help=words.ALWAYS_JSON)
@click.pass_obj
def feedback(obj, memory_id, applied, violated, as_json):
    """Record explicit usage feedback on a lesson (one of --applied / --violated).

    Adds one to the row's applied_count or violated_count and prints one JSON line: id,
    verdict, both counters, trust_score, trust_dropped. The second violation lowers the row's
    trust by 0.15, once. Only this command moves these counters (recall, hooks and MCP reads
    never do), and `promote` reads them. Exit 1 when the memory is missing or tombstoned
    (retired).
    """
    if applied == violated:
        raise UsageError("feedback takes exactly one of --applied or --violated")
    done = obj.store().feedback(memory_id, "applied" if applied else "violated")
    output.emit_json(done, indent=None)


def _tombstone_report(done, verb: str, as_json: bool) -> None:
    if as_json:
        output.emit_json(done.to_dict())
    else:
        output.emit(f"{verb} {done.id} at {done.superseded_at}: {done.reason}")
