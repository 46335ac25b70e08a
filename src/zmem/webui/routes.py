"""The inspector's routes: which handler answers which path, the static assets, and the Guard
in front of everything. The one place the app is assembled."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from zmem.config import Settings
from zmem.errors import ZMemError
from zmem.store import MemoryStore
from zmem.webui import fixes, pages
from zmem.webui.app import HERE, Inspector
from zmem.webui.guard import Guard, Keys


def build(
    store: MemoryStore,
    settings: Settings,
    keys: Keys,
    loopback_only: bool,
    starting: Callable[[Inspector], Awaitable[None]] | None = None,
) -> Guard:
    """The app; `starting` runs beside the requests from the moment the server listens (the
    warm-up), and is cancelled at shutdown if it is still waiting for its turn."""
    inspector = Inspector(store, settings, keys)

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with anyio.create_task_group() as tasks:
            if starting is not None:
                tasks.start_soon(starting, inspector)
            yield
            tasks.cancel_scope.cancel()

    def bound(handler: Callable[..., Any]) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            # A handler's own refusals are answered where they happen; this catches one
            # raised where a page did not expect it, so it is still a page and not a 500.
            try:
                return await handler(inspector, request)
            except ZMemError as exc:
                return inspector.error(request, exc)

        return endpoint

    routes = [
        Route("/", bound(pages.overview)),
        Route("/memories", bound(pages.memories)),
        Route("/search", bound(pages.search)),
        Route("/memory/{memory_id}", bound(pages.memory)),
        Route("/entities", bound(pages.entities)),
        Route("/queue", bound(pages.queue)),
        Route("/reviews", bound(pages.reviews)),
        Route("/health", bound(pages.health)),
        Route("/memory/{memory_id}/{action}", bound(fixes.memory_fix), methods=["POST"]),
        Route("/entities/merge", bound(fixes.entity_merge), methods=["POST"]),
        Route("/queue/{action}", bound(fixes.queue_fix), methods=["POST"]),
        Route("/reviews/resolve", bound(fixes.review_fix), methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    return Guard(Starlette(routes=routes, lifespan=lifespan), keys, loopback_only)
