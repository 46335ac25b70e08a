"""CLI commands that read by relevance or recency: recall (with the --explain debugger),
search and recent. Each prints the fenced block for people or the read envelope with --json."""

from __future__ import annotations

import click

from zmem.cli import output, scope
from zmem.cli.app import cli
from zmem.cli.writes import read_content
from zmem.errors import UsageError
from zmem.models import MAX_LIMIT
from zmem.retrieval.request import RecallRequest

_SCOPE_OPTIONS = [
    click.option(
        "--namespace",
        default=None,
        help="Only this namespace (and its migration aliases: the old names "
        "ZMEM_NS_MIGRATION_MAP maps to it). Default inside a git checkout: the checkout's, with "
        "user:global on its own slots, as the hooks read; elsewhere every namespace.",
    ),
    click.option("--all-namespaces", is_flag=True, help=scope.ALL_HELP),
    click.option(
        "--include-global",
        is_flag=True,
        help="Also read user:global, on its own --global-limit slots: a global row never takes "
        "one of the namespace's, and is listed above them only when clearly more relevant.",
    ),
    click.option(
        "--global-limit",
        type=click.IntRange(0, MAX_LIMIT),
        default=3,
        show_default=True,
        help="Rows user:global may add under --include-global.",
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


def _query_option(text: str):
    """--query, and --text, search's old spelling, kept working out of --help on both reads."""

    def deco(f):
        f = click.option(
            "--text", "old_text", default=None, hidden=True, help="The old spelling of --query."
        )(f)
        f = click.option(
            "--query", default=None, help=f"{text} The same as QUERY; '-' reads stdin."
        )(f)
        return click.argument("query_words", nargs=-1, metavar="QUERY")(f)

    return deco


def _the_query(words: tuple[str, ...], query: str | None, old_text: str | None) -> str:
    if query is not None and old_text is not None:
        raise UsageError("--text is the old spelling of --query: give one of them")
    given = [g for g in (" ".join(words) if words else None, query, old_text) if g is not None]
    if len(given) > 1:
        raise UsageError("give the query once: as QUERY or as --query")
    if not given:
        raise click.UsageError("Missing the query: zmem recall QUERY (or --query QUERY).")
    return read_content(given[0])


@cli.command()
@_query_option("What you are about to do or want to know.")
@_scope_options
@click.option(
    "--limit", type=click.IntRange(1, MAX_LIMIT), default=5, show_default=True,
    help="Rows from the namespace (--include-global adds its own).",
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
    help="Also fuse the vector lane (finding candidates by embeddings) when embeddings are "
    "available, the default; --no-hybrid keeps to the keyword and entity lanes.",
)
@click.option("--no-mmr", is_flag=True, help="Pure score order, no diversity re-ranking.")
@click.option(
    "--no-bump",
    is_flag=True,
    help="Passive read, as the hooks read: record a surface event (shown, not asked for) "
    "instead of a retrieval, leave out rows with injection risk (text shaped like an "
    "instruction to the model) and untrusted-web rows, apply the token budget.",
)
@click.option(
    "--no-unfold",
    is_flag=True,
    help="Never unfold (append a row's lineage: the earlier versions it replaced, marked "
    "[PREVIOUSLY]), which a query about changing something does by default.",
)
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
def recall(obj, query_words, query, old_text, as_json, explain, target, **options):
    """Surface the memories most relevant to a query (high precision first).

    Each lane (a way of finding candidates: keywords by BM25, entities, and embeddings when
    they are available) ranks the namespace's rows; the rankings are fused (reciprocal rank
    fusion), re-ranked by relevance, confidence and popularity (recency ships at weight 0; ties
    go to the newer row), diversified in its first five rows (MMR: near-copies of a row already
    listed move down) and extended by one hop of links.
    --explain re-runs the same pipeline with zero writes.
    """
    query = _the_query(query_words, query, old_text)
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
@_query_option("Words to search for.")
@_scope_options
@click.option(
    "--limit", type=click.IntRange(1, MAX_LIMIT), default=10, show_default=True,
    help="Rows to return.",
)  # fmt: skip
@click.option(
    "--no-bump", is_flag=True,
    help="Passive read: record a surface event (shown, not asked for) instead of a retrieval.",
)  # fmt: skip
@click.pass_obj
def search(obj, query_words, query, old_text, as_json, **options):
    """Ranked search: recall's ranking without its links and history.

    Finds and scores rows as recall does, with no confidence floor, no appended link
    neighbours and no earlier versions of a row. (--text is the old spelling of --query.)
    """
    req = _request("search", _the_query(query_words, query, old_text), options)
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
@click.option(
    "--no-bump", is_flag=True,
    help="Passive read, as a session start reads: record a surface event (shown, not asked "
    "for) instead of a retrieval.",
)  # fmt: skip
@click.pass_obj
def recent(obj, as_json, **options):
    """The newest confident memories of a namespace (what a session starts with)."""
    req = _request("recent", "", options)
    store = obj.store()
    _emit(store, store.read(req), req, as_json)
