"""Who may use the inspector, and how its pages defend themselves: a random token opened once
from the URL `zmem ui` prints (as notebook servers do) and then kept in an HttpOnly,
SameSite=Strict cookie; a CSRF token every form carries; a Host check against DNS rebinding
when bound to loopback; and headers that keep pages from running anything but our own script.
Pure ASGI, so it also stamps each response with the server time it took (Server-Timing)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from zmem.access import is_loopback

TOKEN_PARAM = "token"
CSRF_FIELD = "csrf"
# What every page may load: our own script and styles; images as inline SVG or data: URIs.
SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    # same-origin, not no-referrer: under no-referrer Chromium sends `Origin: null` with our
    # own form posts, and the origin check below could not tell them from a sandboxed page.
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]
SPENT_PAGE = (
    b"<!doctype html><title>ZMem: link already used</title><p>This link of "
    b"<code>zmem ui</code> was already opened, by another browser: it works once. Use the "
    b"browser that opened it, or stop the inspector and run <code>zmem ui</code> again.</p>"
)
UNAUTHORIZED_PAGE = (
    b"<!doctype html><title>ZMem: unauthorized</title><p>This inspector needs the link "
    b"<code>zmem ui</code> printed (it carries a one-run token). Open that link again.</p>"
)


def new_token() -> str:
    return secrets.token_urlsafe(32)


class Keys:
    """The run's secret and what is derived from it. The cookie carries a digest of the token,
    not the token; the CSRF value is another digest, so neither reveals the other."""

    def __init__(self, token: str, port: int):
        self.token = token
        self.cookie_name = f"zmem_ui_{port}"  # cookies ignore ports: one per server
        self.cookie_value = _digest(token, "cookie")
        self.csrf = _digest(token, "csrf")
        # The link is one run's, used once: the browser that opened it holds the cookie, and a
        # copy of the link (a shell history, a screen share, a proxy log) opens nothing more.
        self.spent = False

    def token_ok(self, presented: str | None) -> bool:
        return _same(presented, self.token)

    def cookie_ok(self, presented: str | None) -> bool:
        return _same(presented, self.cookie_value)

    def csrf_ok(self, presented: str | None) -> bool:
        return _same(presented, self.csrf)


def _same(presented: str | None, expected: str) -> bool:
    # As bytes: compare_digest refuses a str holding anything but ASCII (a TypeError, a 500,
    # for `?token=%C3%A9` from any page).
    if presented is None:
        return False
    return hmac.compare_digest(presented.encode("utf-8", "replace"), expected.encode())


def _digest(token: str, purpose: str) -> str:
    return hmac.new(token.encode(), purpose.encode(), hashlib.sha256).hexdigest()


def _header(scope: dict, name: bytes) -> str | None:
    for key, value in scope.get("headers") or []:
        if key == name:
            return value.decode("latin-1")
    return None


def _host_name(host_header: str) -> str:
    host = host_header.strip()
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


class Guard:
    """Every request passes here first. Order: Host check (rebinding), token in the URL (set
    the cookie, redirect to the clean URL), cookie check (401), cross-origin POST (403). The
    CSRF field itself is checked by the form handler, which is where the body is read."""

    def __init__(self, app: Any, keys: Keys, loopback_only: bool):
        self.app = app
        self.keys = keys
        self.loopback_only = loopback_only

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()

        async def stamped(message: dict) -> None:
            if message["type"] == "http.response.start":
                took = (time.perf_counter() - started) * 1000
                message["headers"] = [
                    *message.get("headers", []),
                    *SECURITY_HEADERS,
                    (b"server-timing", f"app;dur={took:.2f}".encode()),
                ]
            await send(message)

        host = _header(scope, b"host") or ""
        if self.loopback_only and not is_loopback(_host_name(host)):
            await _plain(stamped, 421, b"this inspector answers on its loopback address only")
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        signed_in = self._has_cookie(scope)
        if TOKEN_PARAM in query:
            if not self.keys.token_ok(query[TOKEN_PARAM]):
                await _plain(stamped, 401, UNAUTHORIZED_PAGE, "text/html")
                return
            if self.keys.spent and not signed_in:
                await _plain(stamped, 401, SPENT_PAGE, "text/html")
                return
            self.keys.spent = True
            await self._enter(scope, query, stamped, set_cookie=not signed_in)
            return
        if not signed_in:
            await _plain(stamped, 401, UNAUTHORIZED_PAGE, "text/html")
            return
        if scope["method"] not in ("GET", "HEAD") and not _same_origin(scope, host):
            await _plain(stamped, 403, b"cross-origin request refused")
            return
        await self.app(scope, receive, stamped)

    def _has_cookie(self, scope: dict) -> bool:
        jar = SimpleCookie()
        try:
            jar.load(_header(scope, b"cookie") or "")
        except Exception:  # a malformed Cookie header is no cookie at all
            return False
        morsel = jar.get(self.keys.cookie_name)
        return self.keys.cookie_ok(morsel.value if morsel else None)

    async def _enter(
        self, scope: dict, query: dict[str, str], send: Callable, *, set_cookie: bool
    ) -> None:
        """The token link: set the session cookie and send the browser to the same page
        without the token, so it leaves neither history nor a Referer."""
        rest = {k: v for k, v in query.items() if k != TOKEN_PARAM}
        # The path as the client sent it (still percent-encoded: `a%3Fb` stays one segment),
        # with one leading slash: `//host/` or `/\\host/` would send the browser elsewhere.
        raw = scope.get("raw_path") or (scope.get("path") or "/").encode()
        target = "/" + raw.decode("latin-1").lstrip("/\\")
        if rest:
            target += "?" + urlencode(rest)
        cookie = (
            f"{self.keys.cookie_name}={self.keys.cookie_value}; Path=/; HttpOnly; SameSite=Strict"
        )
        headers = [(b"location", target.encode()), (b"content-length", b"0")]
        if set_cookie:
            headers.append((b"set-cookie", cookie.encode()))
        await send({"type": "http.response.start", "status": 303, "headers": headers})
        await send({"type": "http.response.body", "body": b""})


def _same_origin(scope: dict, host: str) -> bool:
    """A state-changing request must not come from another site: its Origin, else its Referer,
    must name this host when there is one (`null`, a sandboxed or privacy-stripped origin,
    names none). With neither, as from a script on this machine, the form's CSRF token is the
    guard; a browser always sends Origin with a form POST."""
    origin = _header(scope, b"origin")
    if origin is not None:
        return urlsplit(origin).netloc == host
    referer = _header(scope, b"referer")
    if referer is not None:
        return urlsplit(referer).netloc == host
    return True


async def _plain(send: Callable, status: int, body: bytes, kind: str = "text/plain") -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", f"{kind}; charset=utf-8".encode()),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
