"""CLI command that serves the agent tools over MCP: `zmem mcp` (stdio) or `zmem mcp --http`."""

from __future__ import annotations

import os

import click
from click.core import ParameterSource

from zmem import access, config
from zmem.cli import output
from zmem.cli.app import cli
from zmem.errors import UsageError
from zmem.store import MemoryStore


@cli.command()
@click.option("--stdio", "stdio", is_flag=True, help="Serve over stdin/stdout (the default).")
@click.option("--http", "http", is_flag=True, help="Serve streamable HTTP at /mcp instead.")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="With --http: the address to listen on. Anything but loopback needs a token.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="With --http: the port (0 picks a free one and prints it).",
)
@click.option(
    "--namespace", metavar="NS",
    help="What a call that names no namespace (add, session_start, session_end) means. "
    "Default over stdio: the checkout of the client's workspace root, else of the folder the "
    "server starts in; over HTTP: none (those calls must name one).",
)  # fmt: skip
@click.option(
    "--print-token", is_flag=True,
    help="Print the bearer token `--http` requires when no ZMEM_MCP_TOKEN(_FILE) names one "
    "(made on first use in the data dir, readable by you alone), and exit.",
)  # fmt: skip
@click.pass_obj
def mcp(obj, stdio, http, host, port, namespace, print_token):
    """Serve the memory tools over the Model Context Protocol.

    Tools: recall, search, recent, get, add, update, invalidate, supersede, links, contradict,
    stats, session_start, session_end; results are the CLI's --json documents. MCP writes
    default to taint (origin trust) untrusted_tool; recall and search count as retrievals,
    session_start is passive.

    Over HTTP every request needs `Authorization: Bearer <token>`; a request without it gets
    401 and runs nothing. ZMEM_MCP_TOKEN is an operator token (every namespace);
    ZMEM_MCP_TOKEN_FILE holds a bare token, or {"token": "...", "namespaces": ["project:x",
    "user:global"]} to confine a client; with neither, the data dir's own token (`--print-token`)
    is required: a port on loopback is open to every user of this machine. Over stdio the token
    file's scope, if any, applies to the session.
    """
    if print_token:
        if stdio or http:
            raise UsageError("--print-token prints the token and exits; give it alone")
        configured = access.load_tokens(os.environ)
        if configured.configured:
            raise UsageError(
                "ZMEM_MCP_TOKEN or ZMEM_MCP_TOKEN_FILE names the token --http requires: clients "
                "use that one"
            )
        output.emit(access.local_token(obj.settings().data_dir) or "")
        return
    if stdio and http:
        raise UsageError("choose one of --stdio and --http")
    ctx = click.get_current_context()
    given = [n for n in ("host", "port") if ctx.get_parameter_source(n) != ParameterSource.DEFAULT]
    if not http and given:
        raise UsageError("--host and --port apply to --http only")
    try:
        from zmem.mcp_server import serve
    except ImportError as exc:
        from zmem import installation

        raise UsageError(installation.missing_piece("the MCP server", exc.name or "?")) from None
    if namespace is not None:
        from zmem.capture.namespaces import validate_namespace

        namespace = validate_namespace(namespace)
    tokens = access.load_tokens(os.environ)  # a malformed token file stops here (exit 2)
    serve.configure_logging(config.debug_enabled())
    settings = obj.settings()
    if http:
        serve.check_http(host, tokens)  # before the store is opened: nothing created
        tokens = access.with_local_token(tokens, settings.data_dir)
    with MemoryStore.open(settings=settings, create=True) as store:
        for line in store.warnings:
            output.notice(line)
        # The server warms the store up on a thread of its own while it answers (server.Worker).
        if http:
            serve.run_http(store, tokens, host, port, output.notice, namespace)
        else:
            serve.run_stdio(store, tokens, namespace)
