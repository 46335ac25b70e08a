"""Running the inspector: decide whether the address may be served (loopback, or another one
only when the operator typed it), listen, print the one-run URL with its token, open a browser
if asked, and serve with uvicorn until Ctrl-C or SIGTERM."""

from __future__ import annotations

import threading
import webbrowser
from collections.abc import Callable

from zmem.access import bind, is_loopback, serve_asgi, url_host
from zmem.config import Settings
from zmem.errors import UsageError
from zmem.store import MemoryStore
from zmem.webui.guard import TOKEN_PARAM, Keys, new_token
from zmem.webui.routes import build

DEFAULT_HOST = "127.0.0.1"


def check_host(host: str, explicit: bool) -> None:
    """Only loopback unless `--host` was typed: an address from anywhere else (an env var, a
    wrapper's default) must not put the store on the network by accident."""
    if not is_loopback(host) and not explicit:
        raise UsageError(
            f"refusing to serve the inspector on {host}, which is not a loopback address: "
            "pass --host explicitly to listen beyond this machine"
        )


def url_for(host: str, port: int, token: str) -> str:
    return f"http://{url_host(host)}:{port}/?{TOKEN_PARAM}={token}"


def run(
    store: MemoryStore,
    settings: Settings,
    host: str,
    port: int,
    *,
    explicit_host: bool,
    open_browser: bool,
    announce: Callable[[str], None],
) -> None:
    check_host(host, explicit_host)
    sock = bind(host, port)
    sock.listen(128)
    bound = sock.getsockname()[1]
    store.prepare_overview(
        lambda: announce("indexing this store for the inspector, once (about 1 s per 100k rows)")
    )
    store.warm_up()  # the first search answers as fast as the rest
    token = new_token()
    app = build(store, settings, Keys(token, bound), loopback_only=is_loopback(host))
    url = url_for(host, bound, token)
    if not is_loopback(host):
        announce(
            f"WARNING: listening on {host}: whoever reaches it with the link can change the store"
        )
    announce(f"inspector for {settings.store_path} at {url}")
    announce("Ctrl-C stops it")
    if open_browser:
        # On a thread: a console browser found on PATH would otherwise hold this one.
        threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
    serve_asgi(app, sock)
