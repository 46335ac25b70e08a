"""CLI commands for the store's upkeep: reembed (derived state in bulk), backup, restore,
sweep, consolidate, organize and rekey-namespace."""

from __future__ import annotations

import click

from zmem.cli import output
from zmem.cli.app import cli
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
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
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
    settings = obj.settings()
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


@cli.command()
@click.option(
    "--retention",
    type=click.IntRange(0, MAX_LIMIT),
    default=7,
    show_default=True,
    help="Keep the newest N store-*.sqlite snapshots (0 keeps every one).",
)
@click.option(
    "--out-dir",
    default=None,
    metavar="DIR",
    help="Where snapshots go (default $ZMEM_BACKUP_DIR, else <store dir>/backups).",
)
@click.option(
    "--if-due",
    is_flag=True,
    help="Do nothing unless ZMEM_BACKUP_INTERVAL_DAYS (default 1) passed since the last backup.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@click.pass_obj
def backup(obj, retention, out_dir, if_due, as_json):
    """Write a verified snapshot of the store (safe while other sessions write).

    SQLite's Online Backup API copies the store; the copy counts only after integrity_check
    and a row-count comparison with the store pass. Retention then deletes the oldest
    store-*.sqlite files beyond --retention and nothing else. Exit 3 if another backup runs.
    """
    from zmem.maintenance import backup as job

    settings = obj.settings()
    bar = output.progress_bar("backup")
    try:
        result = job.backup(
            settings, out_dir=out_dir, retention=retention, if_due=if_due, progress=bar.update
        )
    finally:
        bar.close()
    if as_json:
        output.emit_json(result.to_dict())
    elif result.skipped:
        output.emit(f"backup skipped: {result.skipped} (last backup {result.last_backup})")
    else:
        line = f"backup {result.path}: {result.live} live / {result.total} rows, verified"
        if result.pruned:
            line += f"; removed {len(result.pruned)} old snapshot(s)"
        output.emit(line)


@cli.command()
@click.option("--from", "source", required=True, metavar="SNAPSHOT", help="The snapshot file.")
@click.option("--force", is_flag=True, help="Replace an existing store (a copy of it is kept).")
@click.option(
    "--out-dir",
    default=None,
    metavar="DIR",
    help="Where the prerestore-*.sqlite copy of the current store goes (default: the backup dir).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@click.pass_obj
def restore(obj, source, force, out_dir, as_json):
    """Replace the store with a snapshot.

    Verifies the snapshot first, keeps a prerestore-<UTC>.sqlite copy of the current store
    (never pruned by backup's retention), swaps the file in with one rename and verifies it
    again. Exit 2, nothing touched, if a backup or consolidate job holds its lock, if the store
    is on a network filesystem, or if a store exists and --force is not given. Run it when no
    session is writing.
    """
    from zmem.maintenance import backup as job

    settings = obj.settings()
    result = job.restore(settings, source, force=force, out_dir=out_dir)
    if as_json:
        output.emit_json(result.to_dict())
    else:
        kept = f"; the previous store is at {result.prerestore}" if result.prerestore else ""
        output.emit(
            f"restored {result.store} from {result.restored_from}: {result.live} live / "
            f"{result.total} rows, verified{kept}"
        )


@cli.command()
@click.option(
    "--marker-dir",
    "marker_dirs",
    multiple=True,
    metavar="DIR",
    help="Sweep this dir (repeatable). Default: the data dir, where the hooks write them.",
)
@click.option(
    "--max-age-days",
    type=click.FloatRange(0, 3650),
    default=None,
    help="Remove sentinels older than this (default $ZMEM_SENTINEL_SWEEP_DAYS, else 7).",
)
@click.option("--dry-run", is_flag=True, help="Count what would go; delete nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@click.pass_obj
def sweep(obj, marker_dirs, max_age_days, dry_run, as_json):
    """Prune stale sentinels (marker files a hook leaves to ask something once per session).

    The hooks name them .capture-prompted-<session> and .convention-prompted-<session>. Touches
    nothing but plain files named so; idempotent.
    """
    from zmem.maintenance import sweep as job

    settings = obj.settings()
    age = settings.sentinel_sweep_days if max_age_days is None else max_age_days
    result = job.sweep(marker_dirs or [settings.data_dir], age, dry_run=dry_run)
    if as_json:
        output.emit_json(result.to_dict())
    else:
        output.emit(result.summary_line())


def _run_job(what: str, start, summary, dry_run: bool, as_json: bool) -> dict | None:
    """Run consolidate or organize (`start(progress)`) with a progress bar and print what only
    this front end prints: the lock loser's clean skip (exit 0), the judge's diagnostics, the
    --json document, the gate's one line. Returns the report when the caller prints more."""
    from zmem.maintenance.consolidate import LockHeld

    bar = output.progress_bar(what) if not dry_run else None
    try:
        report = start(bar.update if bar else None).to_dict()
    except LockHeld:
        # The single-flight loser: several sessions may start together.
        if as_json:
            output.emit_json({"error": f"{what} lock busy", "skipped": "lock busy"})
        else:
            output.notice(f"{what}: - skipped (another consolidate or organize is running)")
        return None
    finally:
        if bar:
            bar.close()
    for w in report["warnings"]:
        output.notice(w)
    if as_json:
        output.emit_json(report)
        return None
    if report["skipped"]:
        line = summary(report).removeprefix("[zmem] ")
        output.notice(line.replace("skipped", "would skip", 1) if dry_run else line)
        return None
    return report


@cli.command()
@click.option(
    "--threshold",
    type=click.FloatRange(0.0, 1.0, min_open=True),
    default=0.80,
    show_default=True,
    help="Similarity (cosine, or token Jaccard without a model) at which rows are duplicates.",
)
@click.option("--prune", is_flag=True, help="Also retire never-used, low-confidence, old rows.")
@click.option("--dry-run", is_flag=True, help="Show every cluster and decision; write nothing.")
@click.option(
    "--namespace", default=None,
    help="Only this namespace. Default: every namespace, even inside a checkout (maintenance "
    "works on the whole store).",
)  # fmt: skip
@click.option(
    "--force", is_flag=True,
    help="Run even if the cadence gate (no automatic run while the last one is recent and the "
    "store grew little since) says it is not due.",
)  # fmt: skip
@click.option(
    "--merge-contested",
    is_flag=True,
    help="Also merge members parked because their stance disagrees (review --dry-run first); "
    "never a pair the judge would keep apart or ask about.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@click.pass_obj
def consolidate(obj, threshold, prune, dry_run, namespace, force, merge_contested, as_json):
    """Merge near-duplicate memories into one, history kept.

    Within a namespace and type, rows similar to a keeper (the row with the highest
    confidence x surface count) are absorbed: their whole text is appended to the keeper
    unless it already holds it, their ids go to merged_from, and they are tombstoned
    (retired: no longer recalled, still readable as history). A row
    with other numbers never merges; a cluster whose members disagree in polarity is parked
    (ZMEM_NLI_CMD can clear it). A pair merges only where the write path's judge would fold
    it; a pair it cannot decide stays live and its question is queued for `zmem review`
    (reviews_queued in --json). Skipped when the last run was under
    ZMEM_CONSOLIDATE_MIN_INTERVAL_DAYS (7) ago and the store grew under
    ZMEM_CONSOLIDATE_GROWTH_THRESHOLD (20 %); --force runs it anyway. --prune retires rows with
    signal none, confidence under 0.25, older than ZMEM_UNRECALLED_DAYS (30), never retrieved,
    and never surfaced (or not since that many days). A second run at the same time skips
    (exit 0). Interrupted, a rerun finishes the rest.
    """
    from zmem.maintenance import consolidate as job

    settings = obj.settings()
    with MemoryStore.open(settings=settings, create=False) as store:
        report = _run_job(
            "consolidate",
            lambda progress: store.consolidate(
                threshold=threshold, prune=prune, dry_run=dry_run, namespace=namespace,
                force=force, merge_contested=merge_contested, progress=progress,
            ),
            job.summary_line, dry_run, as_json,
        )  # fmt: skip
    if report is None:
        return
    if dry_run:
        for line in job.cluster_lines(report):
            output.emit(line)
    output.emit(job.summary_line(report))


@cli.command()
@click.option("--prune", is_flag=True, help="Also retire never-used rows of the working set.")
@click.option("--dry-run", is_flag=True, help="Count what each step would do; write nothing.")
@click.option("--force", is_flag=True, help="Run even if the cadence gate says it is not due.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@click.pass_obj
def organize(obj, prune, dry_run, force, as_json):
    """Sleep-time organization of the most recent memories.

    On the ZMEM_ORGANIZE_EPISODE_BOUND (256) newest live rows: backfills missing entity and
    memory links, merges near-duplicates exactly as consolidate does, compresses merged rows
    longer than ZMEM_KEEPER_COMPRESS_CHARS (4000) by dropping repeated and trailing
    sentences (the full text stays in history), and writes topic summaries (source_ref
    organize:...) for entities with 3 or more rows. Shares consolidate's cadence gate (no
    automatic run while the last one is recent and the store grew little since) and lock;
    with ZMEM_ORGANIZE_IDLE_HOURS set it waits until the store has been idle that long. The
    SessionStart upkeep runs it in the background when due.
    """
    from zmem.maintenance import organize as job

    settings = obj.settings()
    with MemoryStore.open(settings=settings, create=False) as store:
        report = _run_job(
            "organize",
            lambda progress: store.organize(
                prune=prune, dry_run=dry_run, force=force, progress=progress
            ),
            job.summary_line, dry_run, as_json,
        )  # fmt: skip
    if report is not None:
        output.emit(job.summary_line(report))


@cli.command("rekey-namespace")
@click.option("--from", "source", default=None, metavar="NS", help="Move this exact namespace.")
@click.option(
    "--near-miss-global", is_flag=True, help="Move every misspelling of user:global ('global'...)."
)
@click.option(
    "--to", "to", default=None, metavar="NS", help="Target (near-miss default: user:global)."
)
@click.option("--dry-run", is_flag=True, help="Preview only (also the default without --confirm).")
@click.option("--confirm", is_flag=True, help="Write the change.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@click.pass_obj
def rekey_namespace(obj, source, near_miss_global, to, dry_run, confirm, as_json):
    """Move live memories stranded under a wrong namespace (admin).

    With --near-miss-global, every live row under a misspelling of the global namespace
    (global, userglobal, ...) moves to --to (default user:global), where the hooks find it;
    with --from, one exact namespace moves. --to may not itself be a near-miss. Tombstoned
    (retired) rows keep their namespace: history stays as it was. Without --confirm, or with
    --dry-run, it only previews.
    """
    report = obj.store().rekey_namespace(
        source=source, near_miss_global=near_miss_global, to=to, apply=confirm and not dry_run
    )
    if as_json:
        output.emit_json(report)
        return
    verb = "moved" if report["applied"] else "would move"
    for ns, n in sorted(report["from"].items()):
        output.emit(f"{verb} {n} live row(s): {ns} -> {report['to']}")
    if not report["from"]:
        output.emit("nothing to move")
    elif not report["applied"]:
        output.emit("preview only: add --confirm to write")
