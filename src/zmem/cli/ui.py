"""CLI command that starts the web inspector: `zmem ui`."""

from __future__ import annotations

import os

import click
from click.core import ParameterSource

from zmem.cli import output
from zmem.cli.app import cli
from zmem.errors import UsageError
from zmem.store import MemoryStore

HOST_ENV = "ZMEM_UI_HOST"


@cli.command()
@click.option(
    "--host",
    default=None,
    help="Address to listen on (default $ZMEM_UI_HOST, else 127.0.0.1). Anything but loopback "
    "is refused unless given here, on the command line.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Port to listen on; 0 picks a free one.",
)
@click.option("--no-open", is_flag=True, help="Print the link only; do not open a browser.")
@click.pass_obj
def ui(obj, host, port, no_open):
    """See, search and fix what your agents remember, in a local web page.

    Prints a link with a one-run token (open it; the browser then keeps a session cookie):
    the overview (live memories by namespace, type and taint (origin trust), growth and recall
    charts, rows that need a look), search with recall's explain verdicts, each memory's
    history with an as-of view, and fixes (update, invalidate, contradict, link, feedback,
    entity merge, the correction queue) through the same checks as the CLI. Every form carries
    a CSRF token. Serves until Ctrl-C.
    """
    try:
        from zmem.webui import serve
    except ImportError as exc:
        from zmem import installation

        raise UsageError(installation.missing_piece("the inspector", exc.name or "?")) from None
    if host is not None and not host.strip():
        raise UsageError("--host must not be empty")
    ctx = click.get_current_context()
    explicit = ctx.get_parameter_source("host") == ParameterSource.COMMANDLINE
    chosen = host or os.environ.get(HOST_ENV, "").strip() or serve.DEFAULT_HOST
    serve.check_host(chosen, explicit)  # before the store is opened: nothing created
    settings = obj.settings()
    # A read never creates a store: an inspector of nothing would only hide a wrong path.
    with MemoryStore.open(settings=settings, create=False) as store:
        for line in store.warnings:
            output.notice(line)
        serve.run(
            store,
            settings,
            chosen,
            port,
            explicit_host=explicit,
            open_browser=not no_open,
            announce=output.notice,
        )
