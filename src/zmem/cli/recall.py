"""CLI commands that read by relevance or recency: recall (with the --explain debugger),
search and recent. Each prints the fenced block for people or the read envelope with --json."""

from __future__ import annotations

import click

from zmem.cli import cli, output
from zmem.cli.writes import read_content

_SCOPE_OPTIONS = [
    click.option(
        "--namespace",
        default=None,
        help="Tier to read, e.g. project:<name> or user:global (plus its migration aliases). "
        "Default: every namespace.",
    ),
    click.option(
        "--include-global",
        is_flag=True,
        help="Also read up to --global-limit rows from user:global, listed after this tier's.",
    ),
    click.option(
        "--global-limit",
        type=click.IntRange(min=0),
        default=3,
        show_default=True,
        help="Rows the user:global tier may add under --include-global.",
    ),
    click.option(
        "--as-of",
        default=None,
        metavar="ISO-8601",
        help="Point-in-time read: rows valid at that instant, superseded ones included.",
    ),
    click.option("--json", "as_json", is_flag=True, help="Print the read envelope as JSON."),
]


def _scope_options(f):
    for option in reversed(_SCOPE_OPTIONS):
        f = option(f)
    return f


@cli.command()
@click.option(
    "--query", required=True, help="What you are about to do or want to know; '-' reads stdin."
)
@_scope_options
@click.option("--limit", type=click.IntRange(min=1), default=5, show_default=True)
@click.option(
    "--link-hops",
    type=click.IntRange(0, 1),
    default=1,
    show_default=True,
    help="Walk related/supports/contradicts links one hop from each result (0 disables).",
)
@click.option(
    "--link-budget",
    type=click.IntRange(min=0),
    default=2,
    show_default=True,
    help="Most link neighbours appended in total.",
)
@click.option(
    "--hybrid/--no-hybrid",
    default=None,
    help="Fuse the vector lane when embeddings are available (the default); --no-hybrid "
    "forces keyword + entity lanes.",
)
@click.option("--no-mmr", is_flag=True, help="Pure score order, no diversity re-ranking.")
@click.option(
    "--no-bump",
    is_flag=True,
    help="Passive read (hooks): record a surface event, omit injection-risk and untrusted-web "
    "rows, apply the token budget.",
)
@click.option("--no-unfold", is_flag=True, help="Never append [PREVIOUSLY] lineage rows.")
@click.option(
    "--min-confidence",
    type=click.FloatRange(0.0, 1.0),
    default=None,
    help="Confidence floor (default ZMEM_INJECT_FLOOR_PROMPT, 0.25).",
)
@click.option("--explain", is_flag=True, help="Also print why each row did or did not surface.")
@click.option(
    "--target",
    default=None,
    metavar="ID|FRAGMENT",
    help="With --explain: the row(s) to account for (id, id prefix or content fragment).",
)
@click.pass_obj
def recall(
    obj,
    query,
    namespace,
    include_global,
    global_limit,
    as_of,
    as_json,
    limit,
    link_hops,
    link_budget,
    hybrid,
    no_mmr,
    no_bump,
    no_unfold,
    min_confidence,
    explain,
    target,
):
    """Surface the memories most relevant to a query (high precision first).

    Lexical (BM25) and entity lanes, plus the vector lane when embeddings are available, are
    fused (RRF), re-ranked by relevance, confidence, recency and popularity, diversified (MMR)
    and extended by one hop of links. --explain re-runs the same pipeline with zero writes.
    """
    options = dict(
        namespace=namespace,
        limit=limit,
        include_global=include_global,
        global_limit=global_limit,
        as_of=as_of,
        no_bump=no_bump,
        hybrid=hybrid,
        no_mmr=no_mmr,
        link_hops=link_hops,
        link_budget=link_budget,
        no_unfold=no_unfold,
        min_confidence=min_confidence,
    )
    query = read_content(query)
    store = obj.store()
    if explain or target is not None:
        report, verdicts, effective = store.explain(query, target=target, **options)
        extra = {
            "explain": {
                "query": query,
                "target": target,
                "settings": effective,
                "verdicts": [v.to_dict() for v in verdicts],
            }
        }
        output.emit_report(
            report,
            explicit=not no_bump,
            as_json=as_json,
            settings=store.settings,
            as_of=as_of,
            extra=extra,
        )
        if not as_json:
            output.emit(output.explain_text(query, effective, verdicts))
        return
    # The explicit CLI recall is the one surface the optional cross-encoder may re-order.
    report = store.recall_report(query, rerank=True, **options)
    output.emit_report(
        report, explicit=not no_bump, as_json=as_json, settings=store.settings, as_of=as_of
    )


@cli.command()
@click.option("--text", required=True, help="Words to search for; '-' reads stdin.")
@_scope_options
@click.option("--limit", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--no-bump", is_flag=True, help="Passive read: record a surface event instead.")
@click.pass_obj
def search(obj, text, namespace, include_global, global_limit, as_of, as_json, limit, no_bump):
    """Ranked search: recall's lanes and scoring, without link expansion or lineage."""
    store = obj.store()
    report = store.search(
        read_content(text),
        namespace=namespace,
        limit=limit,
        include_global=include_global,
        global_limit=global_limit,
        as_of=as_of,
        no_bump=no_bump,
    )
    output.emit_report(
        report, explicit=not no_bump, as_json=as_json, settings=store.settings, as_of=as_of
    )


@cli.command()
@_scope_options
@click.option("--limit", type=click.IntRange(min=1), default=5, show_default=True)
@click.option(
    "--min-confidence",
    type=click.FloatRange(0.0, 1.0),
    default=None,
    help="Confidence floor (default ZMEM_INJECT_FLOOR_RECENT, 0.5).",
)
@click.option("--no-bump", is_flag=True, help="Passive read (session start): surface event only.")
@click.pass_obj
def recent(
    obj, namespace, include_global, global_limit, as_of, as_json, limit, min_confidence, no_bump
):
    """The newest confident memories of a tier (what a session starts with)."""
    store = obj.store()
    report = store.recent(
        namespace=namespace,
        limit=limit,
        min_confidence=min_confidence,
        include_global=include_global,
        global_limit=global_limit,
        as_of=as_of,
        no_bump=no_bump,
    )
    output.emit_report(
        report, explicit=not no_bump, as_json=as_json, settings=store.settings, as_of=as_of
    )
