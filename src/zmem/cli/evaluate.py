"""CLI commands that measure rather than change the store: tune-weights (dry run only)."""

from __future__ import annotations

from pathlib import Path

import click

from zmem.cli import output, words
from zmem.cli.app import cli
from zmem.errors import UsageError
from zmem.models import MAX_LIMIT


@cli.command("tune-weights")
@click.option("--dry-run", is_flag=True, help="Required: the command never writes.")
@click.option(
    "--gold",
    "gold_path",
    required=True,
    type=click.Path(path_type=Path),
    help="Gold JSONL set (eval/gold.jsonl) whose fixture keys this store holds.",
)
@click.option(
    "--k", type=click.IntRange(1, MAX_LIMIT), default=5, show_default=True,
    help="Cut-off of the ranking the weights are scored on (hit@k).",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help=words.ALWAYS_JSON)
@click.pass_obj
def tune_weights(obj, dry_run, gold_path, k, as_json):
    """Suggest composite recall weights for a gold set (prints JSON, writes nothing).

    Scores the shipped W_BM25/W_CONFIDENCE/W_RECENCY/W_POPULARITY on the current store, tries
    moving 0.05 between pairs of weights until nothing improves, and prints both vectors with
    their metrics. Applying one is a manual edit of src/zmem/retrieval/fusion.py."""
    from zmem.evaluation import gold, tune

    if not dry_run:
        raise UsageError("tune-weights only runs with --dry-run (there is no --apply)")
    items = gold.load(gold_path)
    output.emit_json(tune.tune(obj.store(), items, k, track=output.track))
