"""CLI commands that read by relevance or recency: recall (with the --explain debugger),
search and recent. Each prints the fenced block for people or the read envelope with --json."""

from __future__ import annotations

import click

from zmem.cli import cli, output, scope
from zmem.cli.writes import read_content
from zmem.models import MAX_LIMIT
from zmem.retrieval.request import RecallRequest

_SCOPE_OPTIONS = [
    click.option(
        "--namespace",
        default=None,
        help="Tier to read, e.g. project:<name> or user:global (plus its migration aliases). "
        "Default inside a git checkout: the checkout's, with user:global, as the hooks read; "
        "elsewhere every namespace.",
    ),
    click.option(
        "--all-namespaces",
        is_flag=True,
        help="Read every namespace, even inside a git checkout.",
    ),
    click.option(
        "--include-global",
        is_flag=True,
        help="Also read up to --global-limit rows from user:global, listed after this tier's.",
    ),
    click.option(
        "--global-limit",
        type=click.IntRange(0, MAX_LIMIT),
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
@click.option(
    "--limit", type=click.IntRange(1, MAX_LIMIT), default=5, show_default=True,
    help="Rows from the tier read (--include-global adds its own).",
)  # fmt: skip
@click.option(
    "--link-hops",
    type=click.IntRange(0, 1),
    default=1,
    show_default=True,
    help="Walk related/supports/contradicts links one hop from each result (0 disables).",
)
@click.option(
    "--link-budget",
    type=click.IntRange(0, MAX_LIMIT),
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
def recall(obj, query, as_json, explain, target, **options):
    """Surface the memories most relevant to a query (high precision first).

    Lexical (BM25) and entity lanes, plus the vector lane when embeddings are available, are
    fused (RRF), re-ranked by relevance, confidence, recency and popularity, diversified (MMR)
    and extended by one hop of links. --explain re-runs the same pipeline with zero writes.
    """
    query = read_content(query)
    explaining = explain or target is not None
    # The explicit CLI recall is the one surface the optional cross-encoder may re-order.
    # The request is built (and refused) before the store is opened.
    req = _request("recall", query, options, rerank=not explaining)
    store = obj.store()
    if explaining:
        report, verdicts, effective = store.explain(req, target=target)
        effective = {("no_bump" if k == "passive" else k): v for k, v in effective.items()}
        extra = {
            "explain": {
                "query": query,
                "target": target,
                "settings": effective,
                "verdicts": [v.to_dict() for v in verdicts],
            }
        }
        _emit(store, report, req, as_json, extra)
        if not as_json:
            output.emit(output.explain_text(query, effective, verdicts))
        return
    _emit(store, store.read(req), req, as_json)


def _request(kind: str, query: str, options: dict, **fixed) -> RecallRequest:
    """The command's options as the library's request: --no-bump is what it calls passive. With
    no namespace inside a checkout it reads as the hooks do: the checkout's and user:global."""
    options = dict(options, **fixed)
    options["passive"] = options.pop("no_bump")
    options["namespace"], derived = scope.for_read(
        options["namespace"], options.pop("all_namespaces")
    )
    if derived:
        options["include_global"] = True
    return RecallRequest(query=query, kind=kind, **options)


def _emit(store, report, req: RecallRequest, as_json: bool, extra: dict | None = None) -> None:
    # The header names the instant as the user wrote it; the request holds the canonical one.
    as_of = click.get_current_context().params.get("as_of")
    output.emit_report(
        report,
        passive=req.passive,
        as_json=as_json,
        settings=store.settings,
        as_of=as_of,
        extra=extra,
    )


@cli.command()
@click.option("--text", required=True, help="Words to search for; '-' reads stdin.")
@_scope_options
@click.option(
    "--limit", type=click.IntRange(1, MAX_LIMIT), default=10, show_default=True,
    help="Rows to return.",
)  # fmt: skip
@click.option("--no-bump", is_flag=True, help="Passive read: record a surface event instead.")
@click.pass_obj
def search(obj, text, as_json, **options):
    """Ranked search: recall's lanes and scoring, without link expansion or lineage."""
    req = _request("search", read_content(text), options)
    store = obj.store()
    _emit(store, store.read(req), req, as_json)


@cli.command()
@_scope_options
@click.option(
    "--limit", type=click.IntRange(1, MAX_LIMIT), default=5, show_default=True,
    help="Rows to return.",
)  # fmt: skip
@click.option(
    "--min-confidence",
    type=click.FloatRange(0.0, 1.0),
    default=None,
    help="Confidence floor (default ZMEM_INJECT_FLOOR_RECENT, 0.5).",
)
@click.option("--no-bump", is_flag=True, help="Passive read (session start): surface event only.")
@click.pass_obj
def recent(obj, as_json, **options):
    """The newest confident memories of a tier (what a session starts with)."""
    req = _request("recent", "", options)
    store = obj.store()
    _emit(store, store.read(req), req, as_json)
