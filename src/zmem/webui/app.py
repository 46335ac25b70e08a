"""The state every inspector handler shares: the open store, the templates and the run's keys,
with the helpers the handlers use to call the store, render a page, refuse, read a form (the
CSRF check) and redirect. Store calls run one at a time on a worker thread (the store is one
connection), so a slow dry run never stalls the event loop serving the stylesheet."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import apsw
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from zmem import __version__
from zmem.config import Settings
from zmem.errors import NotFound, StoreBusy, ZMemError
from zmem.models import INJECTION_TAG
from zmem.store import MemoryStore, failures
from zmem.webui.guard import CSRF_FIELD, Keys

HERE = Path(__file__).parent
T = TypeVar("T")
NAV = (
    ("/", "Overview"),
    ("/memories", "Memories"),
    ("/search", "Search"),
    ("/entities", "Entities"),
    ("/queue", "Queue"),
    ("/reviews", "Reviews"),
    ("/health", "Health"),
)
# What a fix reports after its redirect: fixed keys, so a crafted link shows no text of its own.
DONE = {
    "updated": "Updated: this is the new version; the old one is in the history below.",
    "invalidated": "Invalidated: the memory no longer surfaces; its history stays readable.",
    "contradicted": "Contradiction recorded: both stay live, each lost 0.10 trust.",
    "linked": "Link recorded.",
    "applied": "Feedback recorded: applied.",
    "violated": "Feedback recorded: violated.",
    "merged": "Entities merged.",
    "accepted": "Queued correction stored as a memory.",
    "dropped": "Queued correction dropped.",
}


class Inspector:
    """The state every handler shares."""

    def __init__(self, store: MemoryStore, settings: Settings, keys: Keys):
        self.store = store
        self.settings = settings
        self.keys = keys
        # One store call at a time (the store is one connection), queued on the event loop:
        # a waiting request holds no worker thread, so a slow dry run cannot starve the
        # thread pool the static files are served from. Made on first use, inside the loop.
        self._limiter: anyio.CapacityLimiter | None = None
        self.env = Environment(
            loader=FileSystemLoader(HERE / "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.globals.update(
            nav=NAV, version=__version__, csrf_field=CSRF_FIELD, injection_tag=INJECTION_TAG
        )

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a store call on a worker thread. A driver error comes back as the ZMemError the
        CLI would print (busy: 503, unusable: 400), never as a traceback."""

        def run() -> T:
            try:
                return fn(*args, **kwargs)
            except apsw.Error as exc:
                raise failures.explain(exc, self.settings.store_path) from None

        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(1)
        return await anyio.to_thread.run_sync(run, limiter=self._limiter)

    def render(self, request: Request, name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        done = request.query_params.get("done")
        html = self.env.get_template(name).render(
            path=request.url.path,
            csrf=self.keys.csrf,
            done=DONE.get(done or ""),
            **ctx,
        )
        return HTMLResponse(html, status_code=status)

    def error(self, request: Request, exc: Exception) -> HTMLResponse:
        """A refusal as a page: the library's one-line message, and the status it means."""
        if isinstance(exc, NotFound):
            status = 404
        elif isinstance(exc, StoreBusy):
            status = 503
        elif isinstance(exc, ZMemError):
            status = 400
        else:
            raise exc
        return self.render(request, "error.html", status=status, message=str(exc))

    async def form(self, request: Request) -> dict[str, str] | Response:
        """The posted fields, or a 403 page when the CSRF field is missing or wrong."""
        form = await request.form()
        fields = {k: v for k, v in form.items() if isinstance(v, str)}
        if not self.keys.csrf_ok(fields.get(CSRF_FIELD)):
            return self.render(
                request,
                "error.html",
                status=403,
                message="this form did not come from this inspector (missing or wrong CSRF "
                "token); reload the page and try again",
            )
        return fields

    @staticmethod
    def redirect(url: str, done: str) -> RedirectResponse:
        joiner = "&" if "?" in url else "?"
        return RedirectResponse(f"{url}{joiner}done={done}", status_code=303)
