"""The team hub's commands (issues 32, 47): `hub init|grant|revoke|members|remove` for whoever
administers the PostgreSQL database, `hub join|leave|distrust|trust` for each machine, and
`sync` (with `--status`). Thin: the work is in sync.hub and the store's hub methods.
Credentials come from libpq's own places and are never printed."""

from __future__ import annotations

import click

from zmem.cli import output
from zmem.cli.app import cli
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
    The team:           zmem hub members --url URL
                        zmem hub remove --url URL --role bob [--purge] [--restore]
    Each machine:       zmem hub join --url URL --namespace project:x [--namespace user:global]
                        zmem hub distrust --role bob   (keep bob's rows out of injection)
    Then (also run by the session start, every ZMEM_HUB_SYNC_MINUTES):  zmem sync

    user:global is each member's own: joining with it shares it across your machines only.

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
    from zmem.sync import hub_admin as admin

    done = admin.init(url)
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
    for role in done["unbounded_members"]:
        output.warn(
            f"could not set the session bounds on {role} (this role may not ALTER it): its "
            "open transactions are ended only by the server's own settings"
        )


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
    from zmem.sync import hub_admin as admin

    done = admin.grant(url, role, namespaces, read_only=read_only)
    if as_json:
        output.emit_json(done)
        return
    mode = "read" if read_only else "read and write"
    output.emit(f"{role} may {mode} {', '.join(done['namespaces'])}")
    if not done["bounded"]:
        output.warn(f"could not set the session bounds on {role} (this role may not ALTER it)")


@hub.command("revoke")
@click.option("--url", required=True, metavar="URL", help=URL_HELP)
@click.option("--role", required=True, help="The member's role.")
@click.option("--namespace", "namespaces", multiple=True, required=True, metavar="NS",
              help="A namespace to take away; repeat for more.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
def hub_revoke(url, role, namespaces, as_json):
    """Take namespaces away from a member's role (admin); rows stay on the hub."""
    from zmem.sync import hub_admin as admin

    done = admin.revoke(url, role, namespaces)
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
    from zmem.sync import hub_admin as admin

    if not namespaces:
        raise UsageError("name the namespaces to share: --namespace NS (repeat for more)")
    plain = team.hubdb.transport_warning(url)
    if plain:
        output.warn(plain)  # before connecting: the login would cross the network too
    cfg, warnings = admin.join(obj.settings(), url, namespaces)
    for line in warnings:
        output.warn(line)
    warnings = [plain, *warnings] if plain else warnings
    if as_json:
        output.emit_json({
            "hub": team.hubdb.describe(cfg.url), "namespaces": cfg.namespaces,
            "machine": cfg.machine, "role": cfg.role, "store": cfg.store, "warnings": warnings,
        })  # fmt: skip
        return
    output.emit(
        f"joined {team.hubdb.describe(cfg.url)} as {cfg.role} from {cfg.machine}: sharing "
        f"{', '.join(cfg.namespaces)}; run `zmem sync` (the session start also does, every "
        f"{obj.settings().hub_sync_minutes:g} minutes)"
    )


@hub.command("leave")
@click.option("--namespace", "namespaces", multiple=True, metavar="NS",
              help="Stop sharing only this namespace (repeat); the others stay.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@click.pass_obj
def hub_leave(obj, namespaces, as_json):
    """Stop sharing: this data dir forgets the hub (or, with --namespace, those namespaces).
    The store keeps every row it holds, and the hub keeps every row this machine pushed."""
    from zmem.sync import hub as team
    from zmem.sync import hub_admin as admin
    from zmem.sync import hub_local as local

    settings = obj.settings()
    cfg = admin.leave(settings, namespaces)
    still = local.load_config(settings.data_dir)
    doc = {"left": cfg is not None and still is None,
           "hub": team.hubdb.describe(cfg.url) if cfg else None,
           "namespaces": still.namespaces if still else []}  # fmt: skip
    if as_json:
        output.emit_json(doc)
    elif cfg is None:
        output.emit("this data dir shared nothing")
    elif still is not None:
        output.emit(f"still sharing {', '.join(still.namespaces)} with {doc['hub']}")
    else:
        output.emit(f"left {doc['hub']}: nothing more is pushed or pulled")


@hub.command("members")
@click.option("--url", required=True, metavar="URL", help=URL_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the members as one JSON document.")
def hub_members(url, as_json):
    """List the team (admin): each member's grants (read-only marked), the memories they
    wrote, the ones they retired, and their last change."""
    from zmem.sync import hub_admin as admin

    rows = admin.members(url)
    if as_json:
        output.emit_json({"members": rows})
        return
    output.emit(output.hub_members_text(rows))


@hub.command("remove")
@click.option("--url", required=True, metavar="URL", help=URL_HELP)
@click.option("--role", required=True, help="The member to take off the team.")
@click.option("--purge", is_flag=True,
              help="Also retire every memory the member wrote: each machine pulls the "
              "retirement and its reason.")  # fmt: skip
@click.option("--restore", is_flag=True,
              help="Also bring back, as new live rows pointing at the old ones, the memories of "
              "other members that this member retired.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
def hub_remove(url, role, purge, restore, as_json):
    """Take a member off the team (admin): every grant and the member role are revoked, so
    their next sync is refused; their login role itself is yours to drop."""
    from zmem.sync import hub_admin as admin

    done = admin.remove(url, role, purge=purge, restore=restore)
    if as_json:
        output.emit_json(done)
        return
    parts = [f"{role}: {done['grants_removed']} grant(s) revoked"]
    if purge:
        parts.append(f"{done['purged']} memory(ies) they wrote retired")
    if restore:
        parts.append(f"{done['restored']} memory(ies) they retired restored")
    output.emit("; ".join(parts))


@hub.command("distrust")
@click.option("--role", required=True, help="The member whose rows to keep out.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@click.pass_obj
def hub_distrust(obj, role, as_json):
    """Keep a member's rows out of every passive injection on this machine (the hooks, the
    session start); `recall`, `search` and `get` still find them. Undo with `zmem hub trust`."""
    store = obj.store()
    changed = store.hub_distrust(role, on=True)
    _trust_result(role, True, changed, store.hub_distrusted(), as_json)


@hub.command("trust")
@click.option("--role", required=True, help="The member whose rows may be injected again.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@click.pass_obj
def hub_trust(obj, role, as_json):
    """Let a member's rows back into passive injection on this machine (`hub distrust`'s
    undo). Rows of other members are still screened as untrusted tool output."""
    store = obj.store()
    changed = store.hub_distrust(role, on=False)
    _trust_result(role, False, changed, store.hub_distrusted(), as_json)


def _trust_result(role: str, distrusted: bool, changed: bool, roles: list[str], as_json: bool):
    if as_json:
        output.emit_json({"role": role, "distrusted": distrusted, "changed": changed,
                          "distrusted_roles": roles})  # fmt: skip
        return
    if distrusted:
        state = "kept out of passive injection" if changed else "already kept out"
    else:
        state = "injected again" if changed else "already trusted"
    output.emit(f"{role}'s rows: {state} on this machine")


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
    from zmem.sync import hub_local as local

    if show_status:
        from zmem.sync import hub as team

        if batch is not None:
            raise UsageError("--batch goes with a sync, not --status")
        settings = obj.settings()
        cfg = local.load_config(settings.data_dir)
        if cfg is None:
            raise UsageError("this data dir shares nothing: zmem hub join --url URL --namespace NS")
        st = team.status(settings, cfg)
        if settings.store_path.exists():
            st["distrusted"] = obj.store().hub_distrusted()
        if as_json:
            output.emit_json(st)
            return
        output.emit(output.hub_status_text(st))
        return
    if batch is None:
        # Nothing new either way: answered from the bookkeeping and one statement to the hub,
        # without loading the store's library or the hub driver (a third of a second).
        report = local.quick(obj.settings())
        if report is not None:
            if as_json:
                output.emit_json(report.to_dict())
            else:
                output.emit(output.hub_sync_text(report.to_dict()))
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
