"""Running the MCP server: over stdio (what Claude Code and Codex launch), or as streamable HTTP
on one port behind a bearer-token check. One long-lived process holds the store and the loaded
model, so every call after the first is warm. Nothing but the protocol ever reaches stdout."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

import anyio

from zmem.access import (
    LOCAL_TOKEN_SOURCE,
    MIN_TOKEN_CHARS,
    MIN_TOKEN_DISTINCT,
    UNSCOPED,
    TokenConfig,
    bind,
    is_loopback,
    serve_asgi,
    url_host,
    weak_tokens,
)
from zmem.agent_tools.surface import ToolSurface
from zmem.errors import UsageError
from zmem.mcp_server.server import SCOPE_KEY, Worker, Workspace, build
from zmem.store import MemoryStore

log = logging.getLogger("zmem.mcp")
PATH = "/mcp"
UNAUTHORIZED = json.dumps(
    {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": "Unauthorized"}}
).encode()


def run_stdio(store: MemoryStore, tokens: TokenConfig, namespace: str | None = None) -> None:
    """Serve over stdio. A call that names no namespace means `namespace` when given, else the
    client's workspace root's checkout, else the checkout of the folder this server started in
    (Claude Code passes CLAUDE_PROJECT_DIR)."""
    from mcp.server.stdio import stdio_server

    start = os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
    workspace = Workspace(namespace, start, ask_roots=namespace is None)
    worker = Worker(ToolSurface(store))
    server = build(worker, local_scope=tokens.local_scope, http=False, workspace=workspace)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    # The handshake and tools/list are answered while the model loads (a client that starts
    # the server per session waited for the model before its first answer).
    worker.warm_up_in_background()
    try:
        anyio.run(serve)  # returns when the host closes our stdin
    except KeyboardInterrupt:
        pass  # a host stops a stdio server with SIGINT: a clean exit, no traceback
    finally:
        worker.settle()


class BearerAuth:
    """Pure ASGI: a request without one of the configured tokens gets 401 with a plain
    `WWW-Authenticate: Bearer` and no OAuth metadata (hosts that find metadata try dynamic
    client registration instead of saying the header is missing). An accepted token's scope is
    attached to the request for the call handler."""

    def __init__(self, app: Any, tokens: TokenConfig):
        self.app = app
        self.tokens = tokens

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        access_scope = UNSCOPED
        if self.tokens.configured:
            header = dict(scope.get("headers") or []).get(b"authorization", b"")
            kind, _, presented = header.decode("latin-1").partition(" ")
            token = (
                self.tokens.authenticate(presented.strip()) if kind.lower() == "bearer" else None
            )
            if token is None:
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b'Bearer realm="zmem"'),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": UNAUTHORIZED})
                return
            access_scope = token.scope
        scope.setdefault("state", {})[SCOPE_KEY] = access_scope
        await self.app(scope, receive, send)


def http_app(worker: Worker, tokens: TokenConfig, host: str, namespace: str | None = None) -> Any:
    from mcp.server.transport_security import TransportSecuritySettings

    # Over HTTP, clients of many checkouts may share the server: a namespace-less add or
    # session call means the one the server was started with, or must name one.
    workspace = Workspace(namespace, None, ask_roots=False)
    server = build(worker, local_scope=UNSCOPED, http=True, workspace=workspace)
    if is_loopback(host):
        # DNS-rebinding guard: a web page in the user's browser must not reach the server.
        security = TransportSecuritySettings(
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    else:
        # Reachable from elsewhere by the operator's choice; the bearer token is the guard.
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    # Stateless with JSON replies: no session table to lose on a restart or after idling.
    app = server.streamable_http_app(
        streamable_http_path=PATH,
        stateless_http=True,
        json_response=True,
        transport_security=security,
    )
    return BearerAuth(app, tokens)


def check_http(host: str, tokens: TokenConfig) -> None:
    if is_loopback(host):
        return
    if not tokens.configured:
        raise UsageError(
            f"refusing to serve on {host}, which is not a loopback address, without a token: "
            "set ZMEM_MCP_TOKEN or ZMEM_MCP_TOKEN_FILE"
        )
    weak = weak_tokens(tokens)
    if weak:
        raise UsageError(
            f"refusing to serve on {host}, which is not a loopback address, with a weak token "
            f"in {' and '.join(weak)}: use at least {MIN_TOKEN_CHARS} characters, at least "
            f"{MIN_TOKEN_DISTINCT} of them different (python3 -c 'import secrets; "
            "print(secrets.token_urlsafe(24))')"
        )


def run_http(
    store: MemoryStore,
    tokens: TokenConfig,
    host: str,
    port: int,
    announce: Callable[[str], None],
    namespace: str | None = None,
) -> None:
    check_http(host, tokens)
    sock = bind(host, port)
    # Listening before the announcement: a client that connects on reading it waits in the
    # backlog instead of being refused while uvicorn starts.
    sock.listen(2048)
    bound = sock.getsockname()[1]
    worker = Worker(ToolSurface(store))
    app = http_app(worker, tokens, host, namespace)
    worker.warm_up_in_background()  # requests are answered while the model loads
    announce(f"MCP server listening on http://{url_host(host)}:{bound}{PATH}")
    if any(t.source == LOCAL_TOKEN_SOURCE for t in tokens.tokens):
        announce(
            "every request needs Authorization: Bearer <token>; `zmem mcp --print-token` "
            "prints it (a port on loopback is open to every user of this machine)"
        )
    try:
        serve_asgi(app, sock)
    finally:
        worker.settle()


def configure_logging(debug: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[zmem] %(message)s"))
    root = logging.getLogger("zmem")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if debug else logging.WARNING)
    root.propagate = False
