"""CLI commands that inspect the store and curate its graph: get, list, stats, links,
contradict, entity-list, entity-merge."""

from __future__ import annotations

import os

import click

from zmem.capture.project_namespace import checkout_namespace
from zmem.capture.source import source_state
from zmem.cli import output, scope, words
from zmem.cli.app import cli
from zmem.errors import UsageError, ZMemError
from zmem.models import ENTITY_KINDS, GLOBAL_NAMESPACE, LINK_RELATIONS, MAX_LIMIT, MEMORY_TYPES


@cli.command()
@click.argument("id_arg", required=False, metavar="[ID]")
@click.option("--id", "memory_id", default=None, help=words.MEMORY_ID + " The same as ID.")
@click.option("--json", "as_json", is_flag=True, help=words.ALWAYS_JSON)
@click.pass_obj
def get(obj, id_arg, memory_id, as_json):
    """Show one memory as JSON, with its links, entities and episodes: `zmem get ID`."""
    described = obj.store().describe(the_id(id_arg, memory_id))
    for line in described.pop("warnings"):
        output.warn(line)
    output.emit_json(described)


@cli.command("list")
@click.option(
    "--namespace", default=None,
    help="Only this namespace (and its old aliases). Default inside a git checkout: the "
    "checkout's; elsewhere every namespace.",
)  # fmt: skip
@click.option("--all-namespaces", is_flag=True, help="Every namespace, even in a checkout.")
@click.option("--type", "type_", type=click.Choice(MEMORY_TYPES), default=None, help="Only this.")
@click.option(
    "--include-superseded", is_flag=True, help="Also show tombstoned (retired) history rows."
)
@click.option("--as-of", default=None, help="Point in time (ISO-8601): rows valid then.")
@click.option("--limit", type=click.IntRange(1, MAX_LIMIT), default=None, help="At most N rows.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@click.pass_obj
def list_(obj, namespace, all_namespaces, type_, include_superseded, as_of, limit, as_json):
    """List memories, newest first."""
    namespace, _ = scope.for_read(namespace, all_namespaces)
    store = obj.store()
    rows = store.list(
        namespace=namespace,
        type=type_,
        include_superseded=include_superseded,
        as_of=as_of,
        limit=limit,
    )
    origins = store.origins([m.id for m in rows])
    if as_json:
        output.emit_json([_with_origin(m.to_dict(), origins.get(m.id)) for m in rows])
        return
    for m in rows:
        state = source_state(m.source_ref, m.source_hash)
        line = output.memory_line(m, store.injection_risk(m), state == "stale")
        came = origins.get(m.id)
        if came is not None and not came.mine:
            line += f"  (written by {came.author})"
        output.emit(line)
    if not rows:
        output.emit("no memories" + (f" in {namespace}" if namespace else ""))


def the_id(positional: str | None, option: str | None) -> str:
    """The id a command names, as ID or --id (one of them)."""
    if positional is not None and option is not None:
        raise UsageError("give the id once: as ID or as --id")
    given = positional if positional is not None else option
    if given is None:
        raise UsageError("name the memory: its id (or a unique prefix) as ID or --id")
    return given


def _with_origin(row: dict, came) -> dict:
    """A listed row, with who wrote it when it came from the team hub."""
    if came is not None:
        row["origin"] = came.to_dict()
    return row


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@click.pass_obj
def stats(obj, as_json):
    """Counts: live and total memories, namespaces, types, entities, links."""
    data = obj.store().stats()
    if as_json:
        output.emit_json(data)
    else:
        output.emit(output.stats_text(data))


@cli.command()
@click.option(
    "--id",
    "ids",
    multiple=True,
    required=True,
    help="The memory (its id or an unambiguous prefix), or twice with --add: source then target.",
)
@click.option("--add", "add_mode", is_flag=True, help="Insert an edge instead of listing.")
@click.option(
    "--relation", type=click.Choice(LINK_RELATIONS), default=None,
    help="With --add: the kind of edge.",
)  # fmt: skip
@click.option("--score", type=float, default=None, help="With --add: its strength, 0 to 1.")
@click.option("--reason", default=None, help="Required for contradicts and supports.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@click.pass_obj
def links(obj, ids, add_mode, relation, score, reason, as_json):
    """List every edge touching a memory, or add one (--add --id A --id B --relation R)."""
    store = obj.store()
    if add_mode:
        if len(ids) != 2 or relation is None:
            raise UsageError("links --add needs exactly two --id values and --relation")
        report = store.add_link(ids[0], ids[1], relation, score=score, reason=reason)
        _link_report(report, as_json)
        return
    if len(ids) != 1 or relation or score is not None:
        raise UsageError("list mode takes exactly one --id (use --add to insert an edge)")
    memory_id = store.resolve_id(ids[0])
    edges = store.links(memory_id)
    if as_json:
        output.emit_json([e.to_dict(viewpoint=memory_id) for e in edges])
        return
    for e in edges:
        d = e.to_dict(viewpoint=memory_id)
        score_text = "" if e.score is None else f" score={e.score:.2f}"
        arrow = "->" if d["direction"] == "out" else "<-"
        output.emit(f"{arrow} {e.relation:<11} {d['other']}{score_text}")
    if not edges:
        output.emit("no links")


def _link_report(report, as_json: bool) -> None:
    if as_json:
        output.emit_json(report)
        return
    state = "added" if report["created"] else "already present (no change)"
    reason = f" (reason: {report['reason']})" if report["reason"] else ""
    trust = ", ".join(f"{k} trust={v:.2f}" for k, v in report["trust_score"].items())
    output.emit(
        f"{report['relation']} {report['src']} -> {report['dst']}: {state}{reason}; {trust}"
    )


@cli.command()
@click.option(
    "--id", "ids", multiple=True, required=True,
    help="Give exactly two: each a memory's id or an unambiguous prefix of it.",
)  # fmt: skip
@click.option("--reason", default=None, help="Why they conflict (required; echoed only).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@click.pass_obj
def contradict(obj, ids, reason, as_json):
    """Record that two memories contradict: both stay live, each loses 0.10 trust."""
    if len(ids) != 2:
        raise UsageError("contradict needs exactly two --id values")
    _link_report(obj.store().contradict(ids[0], ids[1], reason), as_json)


@cli.command("entity-list")
@click.option("--kind", type=click.Choice(ENTITY_KINDS), default=None, help="Only this kind.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@click.pass_obj
def entity_list(obj, kind, as_json):
    """The entities the extractor minted, with aliases and how many memories link to each."""
    found = obj.store().entities(kind)
    if as_json:
        output.emit_json([e.to_dict() for e in found])
        return
    for e in found:
        output.emit(
            f"{e.id}  {e.kind:<10} {e.name}  aliases: {', '.join(e.aliases)}  links: {e.links}"
        )
    if not found:
        output.emit("no entities")


@cli.command("entity-merge")
@click.option("--from", "source", required=True, help="Entity id to merge away.")
@click.option("--to", "target", required=True, help="Entity id that survives.")
@click.option("--confirm", is_flag=True, help="Apply. Without it this is a dry run.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
@click.pass_obj
def entity_merge(obj, source, target, confirm, as_json):
    """Move one entity's aliases and memory links onto another (dry run unless --confirm)."""
    plan = obj.store().merge_entities(source, target, confirm=confirm)
    if as_json:
        output.emit_json(plan.to_dict())
        return
    head = "merged" if plan.applied else "would merge (dry run; add --confirm to apply)"
    output.emit(
        f"{head}: {plan.source.name} ({plan.source.id}) -> {plan.target.name} ({plan.target.id})"
    )
    output.emit(f"  aliases moved: {', '.join(plan.aliases_moved) or 'none'}")
    output.emit(
        f"  memory links moved: {plan.links_moved}; already on target: {plan.link_collisions}"
    )
    output.emit(f"  {'deleted' if plan.applied else 'would delete'} entity {plan.source.id}")


def _recall_kind(settings) -> dict:
    """Semantic when the MiniLM model is there to embed queries, or its pinned weights are
    installed to build it (a cheap look: `zmem model` and doctor verify the hashes), else
    lexical, with the one step that changes it."""
    from zmem.embedding import model_files, profiles

    if settings.embed_profile == "fake":
        return {"recall": "fake (test embeddings)", "recall_fix": None}
    if profiles.runtime_available() and profiles.model_obtainable(settings.data_dir):
        return {"recall": "semantic", "recall_fix": None}
    return {"recall": "lexical", "recall_fix": model_files.FIX}


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the same facts as one JSON object.")
@click.pass_obj
def where(obj, as_json):
    """Which namespace and store this directory means, and what the store holds for it.

    Inside a git checkout the namespace is the one the hooks derive (from the origin remote,
    else the folder name); `add`, `recall`, `search`, `recent` and `list` use it when
    --namespace is not given. Opens the store read-only, and only if it exists.
    """
    settings = obj.settings()
    found = checkout_namespace(os.getcwd())
    namespace, root = found if found is not None else (None, None)
    doc = {
        "cwd": os.getcwd(),
        "checkout": str(root) if root else None,
        "namespace": namespace,
        "store": str(settings.store_path),
        "store_exists": settings.store_path.exists(),
        "data_dir": str(settings.data_dir),
        "embed_profile": settings.embed_profile,
        **_recall_kind(settings),
        "capture_mode": settings.capture_mode,
        "live_in_namespace": None,
        "live_in_global": None,
    }
    doc["store_problem"] = None
    if doc["store_exists"]:
        try:
            counts = obj.store().stats()["by_namespace"]
        except ZMemError as exc:  # where is a diagnostic: it reports an unusable store
            doc["store_problem"] = str(exc)
        else:
            doc["live_in_namespace"] = counts.get(namespace, 0) if namespace else None
            doc["live_in_global"] = counts.get(GLOBAL_NAMESPACE, 0)
    if as_json:
        output.emit_json(doc)
        return
    output.emit(output.where_text(doc))
