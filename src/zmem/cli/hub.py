"""The team hub's commands (issue 32): `hub init|grant|revoke` for whoever administers the
PostgreSQL database, `hub join|leave` for each machine, and `sync` (with `--status`). Thin: the
work is in sync.hub and the store's hub_sync. Credentials come from libpq's own places and are
never printed."""

from __future__ import annotations

import click

from zmem.cli import cli, output
from zmem.errors import UsageError

URL_HELP = (
    "The hub's PostgreSQL connection string (postgresql://user@host:port/db?sslmode=require, or "
    "service=NAME); the password comes from ~/.pgpass, PGPASSWORD or the service file."
)


@cli.group(cls=type(cli))  # the root's help layout: whole first sentences
def hub():
    """Share chosen namespaces with a team through a PostgreSQL database (docs/hub.md).

    \b
    An admin, once:     zmem hub init --url URL
                        zmem hub grant --url URL --role alice --namespace project:x
    Each machine:       zmem hub join --url URL --namespace project:x
    Then (also run by the session start, every ZMEM_HUB_SYNC_MINUTES):  zmem sync

    Every store stays local and answers prompts from its own file; the hub is only reached
    by `zmem sync`, never by a hook.
    """


@hub.command("init")
@click.option("--url", required=True, metavar="URL", help=URL_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
def hub_init(url, as_json):
    """Create the hub's schema in an existing database, or migrate it to this ZMem's version.

    Run as a role that may create schemas and roles. Creates the schema zmem_hub, its tables
    with row level security, and the member role zmem_hub_member; running it again changes
    nothing. The URL is used for this run only.
    """
    from zmem.sync import hub as team

    done = team.init(url)
    if as_json:
        output.emit_json(done)
        return
    before = done["schema_version_before"]
    was = (
        "created"
        if before is None
        else ("migrated" if before != done["schema_version"] else "current")
    )
    output.emit(f"hub {done['hub']}: schema v{done['schema_version']} ({was})")


@hub.command("grant")
@click.option("--url", required=True, metavar="URL", help=URL_HELP)
@click.option("--role", required=True, help="An existing login role (one per member).")
@click.option("--namespace", "namespaces", multiple=True, required=True, metavar="NS",
              help="A namespace the role may read (and write); repeat for more.")  # fmt: skip
@click.option("--read-only", is_flag=True, help="Read only: the role's syncs push nothing there.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
def hub_grant(url, role, namespaces, read_only, as_json):
    """Let a member's role read (and write) namespaces on the hub (admin).

    Row level security in PostgreSQL enforces it: the role sees no other namespace's rows,
    through ZMem or plain SQL.
    """
    from zmem.sync import hub as team

    done = team.grant(url, role, namespaces, read_only=read_only)
    if as_json:
        output.emit_json(done)
        return
    mode = "read" if read_only else "read and write"
    output.emit(f"{role} may {mode} {', '.join(done['namespaces'])}")


@hub.command("revoke")
@click.option("--url", required=True, metavar="URL", help=URL_HELP)
@click.option("--role", required=True, help="The member's role.")
@click.option("--namespace", "namespaces", multiple=True, required=True, metavar="NS",
              help="A namespace to take away; repeat for more.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
def hub_revoke(url, role, namespaces, as_json):
    """Take namespaces away from a member's role (admin); rows stay on the hub."""
    from zmem.sync import hub as team

    done = team.revoke(url, role, namespaces)
    if as_json:
        output.emit_json(done)
        return
    output.emit(f"{role}: {done['removed']} grant(s) removed")


@hub.command("join")
@click.option("--url", required=True, metavar="URL", help=URL_HELP)
@click.option("--namespace", "namespaces", multiple=True, metavar="NS",
              help="A namespace this machine shares (repeat for more). Everything not named "
              "stays local, user:global included.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@click.pass_obj
def hub_join(obj, url, namespaces, as_json):
    """Share these namespaces of this data dir's store with the hub.

    Checks that the hub answers, holds a current schema and lets this role read and write each
    namespace, then records the hub (without its password) and the namespaces in
    <data dir>/hub/hub.json. Nothing is pushed until `zmem sync`. Joining again adds
    namespaces. Exit 2 with nothing written for a refused check, 3 for a hub that does not
    answer.
    """
    from zmem.sync import hub as team

    if not namespaces:
        raise UsageError("name the namespaces to share: --namespace NS (repeat for more)")
    cfg = team.join(obj.settings(), url, namespaces)
    if as_json:
        output.emit_json({
            "hub": team.hubdb.describe(cfg.url), "namespaces": cfg.namespaces,
            "machine": cfg.machine, "role": cfg.role, "store": cfg.store,
        })  # fmt: skip
        return
    output.emit(
        f"joined {team.hubdb.describe(cfg.url)} as {cfg.role} from {cfg.machine}: sharing "
        f"{', '.join(cfg.namespaces)}; run `zmem sync` (the session start also does, every "
        f"{obj.settings().hub_sync_minutes:g} minutes)"
    )


@hub.command("leave")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@click.pass_obj
def hub_leave(obj, as_json):
    """Stop sharing: this data dir forgets the hub. The store keeps every row it holds, and
    the hub keeps every row this machine pushed."""
    from zmem.sync import hub as team

    cfg = team.leave(obj.settings())
    doc = {"left": cfg is not None,
           "hub": team.hubdb.describe(cfg.url) if cfg else None}  # fmt: skip
    if as_json:
        output.emit_json(doc)
    elif cfg is None:
        output.emit("this data dir shared nothing")
    else:
        output.emit(f"left {doc['hub']}: nothing more is pushed or pulled")


@cli.command("sync")
@click.option("--status", "show_status", is_flag=True,
              help="Show the last push and pull, the last error and how far behind the hub "
              "this store is; change nothing.")  # fmt: skip
@click.option("--batch", type=click.IntRange(1, 10_000), default=None,
              help="Objects per hub transaction or page (default 500).")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON document.")
@click.pass_obj
def sync(obj, show_status, batch, as_json):
    """Push what this store wrote in its shared namespaces, then pull what others wrote.

    Both in bounded batches; a sync cut short keeps what committed, and running it again
    finishes the rest (nothing is pushed or applied twice). Pulled rows go through the capture
    policy (ZMEM_CAPTURE_MODE) and the duplicate guard like any ingest. A sync with nothing new
    writes nothing to the store. Exit 2 when the hub refuses (credentials, grants), 3 when it
    does not answer.
    """
    from zmem.sync import hub as team

    if show_status:
        if batch is not None:
            raise UsageError("--batch goes with a sync, not --status")
        settings = obj.settings()
        cfg = team.load_config(settings.data_dir)
        if cfg is None:
            raise UsageError("this data dir shares nothing: zmem hub join --url URL --namespace NS")
        st = team.status(settings, cfg)
        if as_json:
            output.emit_json(st)
            return
        output.emit(output.hub_status_text(st))
        return
    store = obj.store(create=True)
    bar = output.progress_bar("sync")
    done = [0]

    def tick(phase: str, n: int) -> None:
        done[0] += n
        bar.update(done[0], None)

    try:
        report = store.hub_sync(batch=batch, progress=tick)
    finally:
        bar.close()
    if as_json:
        output.emit_json(report.to_dict())
        return
    output.emit(output.hub_sync_text(report.to_dict()))
