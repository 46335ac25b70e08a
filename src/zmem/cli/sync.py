"""CLI commands that move memories between stores and sessions: export-pack (the markdown
hand-off), export-jsonl and ingest-jsonl (box-to-box sync)."""

from __future__ import annotations

from pathlib import Path

import click

from zmem import outputs
from zmem.cli import output, scope
from zmem.cli.app import cli
from zmem.config import CAPTURE_MODES
from zmem.errors import UsageError
from zmem.models import MAX_LIMIT


def _write_atomically(out: str, fill) -> Path:
    """`fill(write)` into OUT, whole or not at all: a failed export never leaves half a file
    where a good one was, and a read-only or full disk is one line (zmem.outputs)."""
    return outputs.write_text(Path(out).expanduser(), fill, f"write {out}")


@cli.command("export-pack")
@click.option("--namespace", default=None, help=scope.ONE_HELP)
@click.option("--out", "out", default=None, metavar="FILE", help="Write here (default: stdout).")
@click.option(
    "--project-limit", type=click.IntRange(0, MAX_LIMIT), default=50, show_default=True,
    help="Most rows from the namespace.",
)  # fmt: skip
@click.option(
    "--global-limit", type=click.IntRange(0, MAX_LIMIT), default=15, show_default=True,
    help="Most rows from user:global.",
)  # fmt: skip
@click.option(
    "--min-confidence", type=click.FloatRange(0.0, 1.0), default=0.6, show_default=True,
    help="Leave out rows less confident than this.",
)  # fmt: skip
@click.option(
    "--max-bytes", type=click.IntRange(256, 64 * 1024 * 1024), default=32768, show_default=True,
    help="UTF-8 budget of the whole pack; a memory that would pass it is left out whole.",
)  # fmt: skip
@click.option(
    "--json", "as_json", is_flag=True,
    help='Print {"namespace", "shown", "omitted_budget", "bytes", "out", "text"} (text: the '
    "pack, when it is not written to --out).",
)  # fmt: skip
@click.pass_obj
def export_pack(
    obj, namespace, out, project_limit, global_limit, min_confidence, max_bytes, as_json
):
    """Render live memories of a namespace and user:global as a markdown pack.

    For a session with no store (a cloud agent, a teammate): the most confident rows first
    (then the most used, then the newest), one bullet each. Rows flagged as possible prompt
    injection are withheld and counted. Exit 2 when both sections would be empty.
    """
    namespace = scope.for_one(namespace)
    done = obj.store().export_pack(
        namespace, project_limit=project_limit, global_limit=global_limit,
        min_confidence=min_confidence, max_bytes=max_bytes,
    )  # fmt: skip
    path = None if out is None else _write_atomically(out, lambda write: write(done.text))
    if as_json:
        output.emit_json({
            "namespace": namespace, "shown": done.shown, "omitted_budget": done.omitted_budget,
            "bytes": done.bytes, "out": str(path) if path else None,
            "text": None if path else done.text,
        })  # fmt: skip
    elif path is None:
        output.emit_document(done.text)
    else:
        output.emit(f"wrote {done.shown} memories ({done.bytes} bytes) to {path}")


@cli.command("export-jsonl")
@click.option("--out", "out", default=None, metavar="FILE", help="Write here (default: stdout).")
@click.option(
    "--namespace", default=None,
    help="Only this namespace. Default: every namespace, even inside a checkout (the file "
    "moves a whole store).",
)  # fmt: skip
@click.option(
    "--include-superseded", is_flag=True,
    help="Also export tombstoned (retired) rows, kept as history.",
)  # fmt: skip
@click.option(
    "--json", "as_json", is_flag=True,
    help="With --out: print the counts as one JSON document. Without it stdout is the JSON "
    "lines themselves.",
)  # fmt: skip
@click.pass_obj
def export_jsonl(obj, out, namespace, include_superseded, as_json):
    """Write the store as sync JSONL, one record per line, for ingest-jsonl on another machine.

    Live rows of every namespace by default, each with its outgoing links (to rows in the same
    file); episodes and their memberships follow. Vectors and entity links are not written:
    the receiving store derives them again.
    """
    store = obj.store()
    if out is None:
        store.export_jsonl(
            output.emit_document, namespace=namespace, include_superseded=include_superseded
        )
        return
    counts = {}

    def fill(write):
        counts.update(
            store.export_jsonl(write, namespace=namespace, include_superseded=include_superseded)
        )

    path = _write_atomically(out, fill)
    if as_json:
        output.emit_json({"out": str(path), **counts})
        return
    output.notice(
        f"exported {counts['memories']} memories, {counts['links']} links, "
        f"{counts['episodes']} episodes, {counts['memberships']} memberships to {path}"
    )


@cli.command("ingest-jsonl")
@click.option("--in", "in_", required=True, metavar="FILE", help="A file export-jsonl wrote.")
@click.option("--source-ref", default=None, help="Set this source_ref on every row inserted.")
@click.option(
    "--allow-tombstones", is_flag=True,
    help="Let the file's tombstones (its records of retired rows) retire live local rows of the "
    "same id (trusted files only).",
)  # fmt: skip
@click.option(
    "--capture-mode", type=click.Choice(CAPTURE_MODES), default=None,
    help="Capture policy for every row (default: $ZMEM_CAPTURE_MODE, else manual); use auto "
    "for a file from elsewhere: secrets are redacted.",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.pass_obj
def ingest_jsonl(obj, in_, source_ref, allow_tombstones, capture_mode, as_json):
    """Import a sync JSONL file through the capture policy.

    Every line is validated before anything is written; a bad line is named by its number and
    left out, the good ones land. Rows keep their ids, times, counters and trust; a row that
    repeats a live local one folds into it; links, episodes and memberships are applied after
    every row. Ingesting the same file again changes nothing. Exit 2 when no line of the file
    could be used.
    """
    path = Path(in_).expanduser()
    if not path.is_file():
        raise UsageError(f"--in {in_}: no such file")
    from zmem.sync.prepare import has_records

    if not has_records(path):  # before the store is opened: a blank file creates nothing
        raise UsageError(f"{in_} holds no record (it is empty or blank); nothing was written")
    bar = output.progress_bar("ingest")
    try:
        report = obj.store(create=True).ingest_jsonl(
            path, source_ref=source_ref, allow_tombstones=allow_tombstones,
            capture_mode=capture_mode, progress=bar.update,
        ).to_dict()  # fmt: skip
    finally:
        bar.close()
    if as_json:
        output.emit_json(report)
    else:
        for e in report["errors"]:
            output.warn(f"{in_}:{e['line']}: {e['error']}")
        if report["errors_not_listed"]:
            output.warn(f"... and {report['errors_not_listed']} more")
        output.emit(output.ingest_text(report))
    refused = report["malformed"] + report["capture_refused"]
    if report["lines"] and refused == report["lines"]:
        raise UsageError(f"no line of {in_} could be ingested; nothing was written")
