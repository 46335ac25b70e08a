"""Running the inspector: decide whether the address may be served (loopback, or another one
only when the operator typed it), listen, print the one-run URL with its token, open a browser
if asked, and serve with uvicorn until Ctrl-C or SIGTERM. The first page is served at once:
what makes pages fast (indexes, the model, the vector copy) is prepared beside the requests."""

from __future__ import annotations

import html
import os
import threading
import webbrowser
from collections.abc import Callable
from pathlib import Path

import anyio
import apsw

from zmem.access import bind, is_loopback, serve_asgi, url_host
from zmem.config import Settings
from zmem.errors import UsageError, ZMemError
from zmem.store import MemoryStore
from zmem.webui.app import Inspector
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
    token = new_token()
    app = build(
        store,
        settings,
        Keys(token, bound),
        loopback_only=is_loopback(host),
        starting=lambda ui: _prepare(ui, announce),
    )
    url = url_for(host, bound, token)
    if not is_loopback(host):
        announce(
            f"WARNING: listening on {host}: whoever reaches it with the link can change the store"
        )
    announce(f"inspector for {settings.store_path} at {url}")
    announce("Ctrl-C stops it")
    page = _open_browser(url, settings.data_dir) if open_browser else None
    try:
        serve_asgi(app, sock)
    finally:
        if page is not None:
            page.unlink(missing_ok=True)


async def _prepare(ui: Inspector, announce: Callable[[str], None]) -> None:
    """What makes every page fast, done while the pages are already served: the overview's
    covering indexes (a connection of their own, so pages read meanwhile; the overview
    answers without them, slower) and the model load, on a thread; then the in-memory vector
    copy, as one more store call in turn (it reads through the store's own connection)."""

    def aside() -> None:
        try:
            ui.store.prepare_overview(
                lambda: announce(
                    "indexing this store for the inspector, once (about 1 s per 100k rows); "
                    "pages answer meanwhile"
                )
            )
        except (apsw.Error, ZMemError) as exc:  # a busy or read-only store: pages still answer
            announce(f"the inspector's indexes were not built ({exc}); pages answer, slower")
        ui.store.load_model()  # fail-open: a model that cannot load leaves search lexical

    # A daemon thread, watched rather than joined: stopping the server must not wait for it
    # (a long job's write lock would keep Ctrl-C waiting for the busy deadline), and the
    # interpreter joins every other thread at exit. It holds no handle the exit closes.
    thread = threading.Thread(target=aside, name="zmem-ui-prepare", daemon=True)
    thread.start()
    while thread.is_alive():
        await anyio.sleep(0.02)
    try:
        await ui.call(ui.store.keep_vectors_in_memory)
    except Exception as exc:  # a warm-up never stops the server: searches read the index
        announce(f"searches read the vector index directly ({exc})")


def _open_browser(url: str, data_dir: Path) -> Path | None:
    """Open the link without putting the token on a command line, where other users of the
    machine could read it (/proc/*/cmdline): the browser is given a page readable by this
    user alone that redirects to the link, as notebook servers do."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        page = data_dir / f".ui-open-{os.getpid()}.html"
        fd = os.open(page, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            link = html.escape(url)
            out.write(
                f'<!doctype html><meta http-equiv="refresh" content="0;url={link}">'
                f'<p><a href="{link}">Open the ZMem inspector</a></p>'
            )
    except OSError:
        return None  # the printed link still works
    # On a thread: a console browser found on PATH would otherwise hold this one.
    threading.Thread(target=webbrowser.open, args=(page.as_uri(),), daemon=True).start()
    return page
