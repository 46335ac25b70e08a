"""CLI commands that move memories out of the store: export-pack (the markdown hand-off)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from zmem.cli import cli, output
from zmem.errors import UsageError
from zmem.models import MAX_LIMIT


@cli.command("export-pack")
@click.option("--namespace", required=True, help="The project namespace to hand off.")
@click.option("--out", "out", default=None, metavar="FILE", help="Write here (default: stdout).")
@click.option("--project-limit", type=click.IntRange(0, MAX_LIMIT), default=50, show_default=True)
@click.option("--global-limit", type=click.IntRange(0, MAX_LIMIT), default=15, show_default=True)
@click.option("--min-confidence", type=click.FloatRange(0.0, 1.0), default=0.6, show_default=True)
@click.option(
    "--max-bytes", type=click.IntRange(256, 64 * 1024 * 1024), default=32768, show_default=True,
    help="UTF-8 budget of the whole pack; a memory that would pass it is left out whole.",
)  # fmt: skip
@click.pass_obj
def export_pack(obj, namespace, out, project_limit, global_limit, min_confidence, max_bytes):
    """Render live memories of NAMESPACE and user:global as a markdown pack.

    For a session with no store (a cloud agent, a teammate): the most confident rows first
    (then the most used, then the newest), one bullet each. Rows flagged as possible prompt
    injection are withheld and counted. Exit 2 when both sections would be empty.
    """
    done = obj.store().export_pack(
        namespace, project_limit=project_limit, global_limit=global_limit,
        min_confidence=min_confidence, max_bytes=max_bytes,
    )  # fmt: skip
    if out is None:
        output.emit_document(done.text)
        return
    path = Path(out).expanduser()
    if path.is_dir():
        raise UsageError(f"--out {out} is a directory")
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(done.text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UsageError(f"cannot write {out}: {exc.strerror or exc}") from None
    output.emit(f"wrote {done.shown} memories ({done.bytes} bytes) to {path}")
