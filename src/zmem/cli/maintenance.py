"""CLI commands that rewrite derived state in bulk: reembed."""

from __future__ import annotations

import click

from zmem import config
from zmem.cli import cli, output
from zmem.embedding import PROFILES
from zmem.models import MAX_LIMIT
from zmem.store import MemoryStore


@cli.command()
@click.option("--all", "everything", is_flag=True, help="Rebuild EVERY live vector.")
@click.option(
    "--profile",
    type=click.Choice(PROFILES),
    default=None,
    help="With --all: the profile to convert to (default: ZMEM_EMBED_PROFILE).",
)
@click.option(
    "--batch",
    type=click.IntRange(1, MAX_LIMIT),
    default=64,
    show_default=True,
    help="Texts per model call; each batch commits on its own (at most 128 rows a transaction).",
)
@click.option("--dry-run", is_flag=True, help="Count the rows that would change; write nothing.")
@click.option(
    "--confirm",
    is_flag=True,
    help="Allow --all --profile fake over real vectors (irreversible without the model).",
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def reembed(obj, everything, profile, batch, dry_run, confirm, as_json):
    """Backfill missing embeddings, or convert every vector to another profile.

    Without flags: embeds live memories that have no vector (a graceful no-op when the model is
    unavailable). With --all: re-embeds every live memory under --profile; a second run changes
    0 rows. Work commits in short batches, so other sessions keep adding and recalling while it
    runs. A conversion to another profile builds the new index beside the live one and switches
    in one step: until then recall uses the old vectors, after it the new ones. Interrupted, it
    resumes where it stopped when run again (exit 3 while another reembed is still running).
    """
    settings = config.load_settings(store_path=obj.store_path)
    # Opened without the dimension check: converting a mismatched store is this command's job.
    with MemoryStore.open(settings=settings, check_vectors=False, create=False) as store:
        bar = output.progress_bar("reembed") if not dry_run else None
        try:
            report = store.reembed(
                all=everything, profile=profile, batch=batch, dry_run=dry_run, confirm=confirm,
                progress=bar.update if bar else None,
            )  # fmt: skip
        finally:
            if bar:
                bar.close()
    if as_json:
        output.emit_json(report.to_dict())
    else:
        output.emit(output.reembed_text(report.to_dict()))
