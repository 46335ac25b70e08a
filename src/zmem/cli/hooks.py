"""The host-integration commands: `hook` (the hosts' entry point), `queue-list` /
`queue-clear` (the capture-correction queue, store-independent), `corrections --transcript`
(read-only mining), `doctor` (read-only diagnostics) and `hermes-install` (the Hermes agent's
plugins)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from zmem import config
from zmem.capture import corrections
from zmem.cli import output, scope, words
from zmem.cli.app import cli
from zmem.hosts import emit, events, sidecars
from zmem.resident import client


@cli.command("hook")
@click.argument("event", metavar="EVENT")
@click.option(
    "--host", "host", type=click.Choice(["claude", "codex", "zcode"]), required=True,
    help="The host that sent the payload on stdin; its output rules apply.",
)  # fmt: skip
def hook(event: str, host: str) -> None:
    """Run one host hook: the host's JSON on stdin, what the host accepts on stdout.

    Always exits 0 and prints nothing on failure; the decision is logged to
    <data dir>/zmem-bg.log. Hosts call hooks/zmem_hook.py, which skips this CLI's imports.
    """
    try:
        raw = sys.stdin.read()
    except (OSError, ValueError):
        raw = ""
    out, _ = client.run(host, event, raw)
    emit.write(out)


# The events each host sends, listed in `zmem hook --help` (an event a host does not send is
# logged as skipped, never an error: a hook must not fail its host).
hook.help = (
    (hook.help or "")
    + "\n\n\b\nEvents, per host:\n"
    + "\n".join(f"  {h}: {', '.join(sorted(evs))}" for h, evs in events.HOST_EVENTS.items())
)


def _data_dir() -> Path:
    return config.default_data_dir()


@cli.command("queue-list")
@click.option("--namespace", default=None, help=scope.ONE_HELP)
@click.option(
    "--json", "as_json", is_flag=True, help='Print {"namespace", "count", "items"} as JSON.'
)
def queue_list(namespace: str | None, as_json: bool) -> None:
    """Show queued correction candidates (never opens the store).

    The hooks queue what looks like a user correcting the agent ("no, use uv instead of pip")
    for review instead of storing it; `zmem add` keeps one, `queue-clear` drops it.
    """
    namespace = scope.for_one(namespace)
    items = sidecars.queue_items(_data_dir(), namespace)
    if as_json:
        doc = {"namespace": namespace, "count": len(items), "items": items}
        output.emit_json(doc, indent=None, ensure_ascii=True)
        return
    if not items:
        output.emit(f"[zmem] no queued corrections for {namespace}")
        return
    for i in items:
        output.emit(
            f"{i.get('id')}  {i.get('type')}  conf {i.get('confidence')}  {i.get('message')}"
        )


@cli.command("queue-clear")
@click.option("--namespace", default=None, help=scope.ONE_HELP)
@click.option("--id", "ids", multiple=True, help="Remove these processed ids (repeatable).")
@click.option("--all", "all_items", is_flag=True, help="Empty the queue.")
@click.option("--drop-stale", is_flag=True, help="Prune old low-confidence items.")
@click.option("--json", "as_json", is_flag=True, help='Print {"namespace", "removed"} as JSON.')
def queue_clear(
    namespace: str | None, ids: tuple[str, ...], all_items: bool, drop_stale: bool, as_json: bool
) -> None:
    """Remove queue items: exactly one of --id, --all, --drop-stale (never opens the store)."""
    if sum((bool(ids), all_items, drop_stale)) != 1:
        raise click.UsageError("exactly one of --id, --all, --drop-stale is required")
    namespace = scope.for_one(namespace)
    removed = sidecars.clear(
        _data_dir(), namespace, ids=ids, all_items=all_items, drop_stale=drop_stale
    )
    if as_json:
        output.emit_json({"namespace": namespace, "removed": removed}, indent=None)
    else:
        output.emit(f"[zmem] removed {removed} queued item(s) from {namespace}")


@cli.command("corrections")
@click.option(
    "--transcript", required=True, type=click.Path(dir_okay=False),
    help="The Claude Code transcript (a .jsonl file) to mine.",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help=words.ALWAYS_JSON)
def corrections_cmd(transcript: str, as_json: bool) -> None:
    """Mine a Claude Code transcript for user corrections (read-only; never opens the store)."""
    settings = config.load_settings()
    path = Path(transcript)
    if not path.is_file():
        raise click.UsageError(f"transcript not found: {transcript}")
    result = corrections.mine_transcript(path, settings.capture_mode)
    output.emit_json(result, indent=None)


@cli.command("doctor")
@click.option(
    "--project",
    default=None,
    type=click.Path(exists=True, file_okay=False),
    help="A checkout: derive its namespace and read its .claude/.codex settings. Default: the "
    "checkout this directory is in, if any.",
)
@click.option(
    "--repo-root",
    default=None,
    type=click.Path(exists=True, file_okay=False),
    help="The ZMem plugin/checkout root whose host surfaces to inspect.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the checks as one JSON document.")
@click.option(
    # The spec's spelling, kept for scripts: --format json is --json; both prints both.
    "--format", "fmt", type=click.Choice(["human", "json", "both"]), default=None, hidden=True,
    help="The old spelling: human (the default), json (--json) or both.",
)  # fmt: skip
@click.pass_context
def doctor_cmd(
    ctx: click.Context, project: str | None, repo_root: str | None, as_json: bool, fmt: str | None
) -> None:
    """Read-only install diagnostics: store path, runtime, schema, embeddings, host config.

    Never creates, migrates or repairs anything. Exit 0 when no check fails, 1 when one does,
    2 on bad arguments.
    """
    if as_json and fmt not in (None, "json"):
        raise click.UsageError(f"--json and --format {fmt} disagree; give one")
    fmt = "json" if as_json else (fmt or "human")
    from zmem import doctor
    from zmem.capture.project_namespace import checkout_namespace

    if project is None:  # inside a checkout, the namespace the hooks use here is reported
        found = checkout_namespace(os.getcwd())
        project = str(found[1]) if found is not None else None
    store_flag = ctx.obj.store_path if ctx.obj is not None else None
    report = doctor.run(project=project, repo_root=repo_root, store_path=store_flag)
    if fmt in ("human", "both"):
        output.emit(doctor.human(report))
    if fmt in ("json", "both"):
        output.emit_json(report, indent=None if fmt == "json" else 1)
    sys.exit(0 if report["ok"] else 1)


@cli.command("hermes-install")
@click.option(
    "--hermes-home",
    metavar="PATH",
    default=None,
    help="The Hermes home (a profile's home for a profile). Default: $HERMES_HOME, else ~/.hermes.",
)
@click.option(
    "--activate",
    is_flag=True,
    help="Also run `hermes config set memory.provider zmem` and `hermes plugins enable "
    "zmem_hooks` there.",
)
@click.option(
    "--hermes-bin",
    metavar="CMD",
    default=None,
    help="With --activate: the hermes command (default: the one beside this Python, else PATH).",
)
@click.option(
    "--json", "as_json", is_flag=True,
    help='Print {"home", "plugins_dir", "plugins", "activated"} as one JSON document.',
)  # fmt: skip
def hermes_install(
    hermes_home: str | None, activate: bool, hermes_bin: str | None, as_json: bool
) -> None:
    """Install ZMem's Hermes plugins into <Hermes home>/plugins/.

    zmem is the memory provider (prefetch, sync_turn, the zmem_* tools); zmem_hooks records
    terminal, write_file and patch calls for its recall and delivers the hazards they touched
    before the next model call. When Hermes's Python has no zmem, the plugins reach this
    install through a bridge beside them (`zmem setup hermes` does the same and activates).
    Replaces only earlier copies of these two plugins; exit 2 with nothing written on bad input
    or when Hermes refuses the activation.
    """
    from zmem.hermes_provider import install

    if hermes_bin is not None and not activate:
        raise click.UsageError("--hermes-bin only goes with --activate")
    plan = install.plan(hermes_home, activate=activate, hermes_bin=hermes_bin)
    dirs = install.install(plan)
    if as_json:
        output.emit_json({
            "home": str(plan.home), "plugins_dir": str(plan.plugins_dir),
            "plugins": [d.name for d in dirs], "activated": activate,
        })  # fmt: skip
        return
    output.emit(
        f"[zmem] installed the Hermes plugins {', '.join(d.name for d in dirs)} in "
        f"{plan.plugins_dir}"
    )
    if activate:
        output.emit(
            f"[zmem] activated in {plan.home / 'config.yaml'} (memory.provider: zmem, "
            "plugins.enabled: zmem_hooks); it takes effect in the next Hermes session"
        )
        return
    output.emit(f"[zmem] to activate, put this in {plan.home / 'config.yaml'}:")
    output.emit(install.CONFIG_LINES)
    output.emit(
        f"[zmem] or run: HERMES_HOME={plan.home} hermes config set memory.provider zmem && "
        f"HERMES_HOME={plan.home} hermes plugins enable zmem_hooks (or add --activate)"
    )
