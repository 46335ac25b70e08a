"""Who may read and write what through an agent surface (MCP, Hermes): the MCP tokens
(ZMEM_MCP_TOKEN, always an unscoped operator token; ZMEM_MCP_TOKEN_FILE, a bare token or a JSON
object with a namespace allow-list) and the Scope a call runs under. The server and doctor read
tokens here alike; a malformed file is a startup error (exit 2), and no message ever contains a
token's value. Also where a network front end (the MCP server over HTTP, the web inspector)
may listen and how it serves: the loopback test, the listening socket and the uvicorn loop both
use."""

from __future__ import annotations

import hmac
import ipaddress
import json
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zmem import untrusted
from zmem.capture.namespaces import validate_namespace
from zmem.errors import UsageError, ZMemError
from zmem.models import GLOBAL_NAMESPACE


@dataclass(frozen=True)
class Scope:
    """The namespaces a caller may touch; `namespaces` None is the unscoped operator."""

    namespaces: frozenset[str] | None = None

    @property
    def scoped(self) -> bool:
        return self.namespaces is not None

    def allows(self, namespace: str) -> bool:
        # Exact match, as the store matches namespaces: a case or look-alike variant of an
        # allowed name is another namespace, and is refused.
        return self.namespaces is None or namespace in self.namespaces

    @property
    def global_allowed(self) -> bool:
        return self.allows(GLOBAL_NAMESPACE)


UNSCOPED = Scope()


@dataclass(frozen=True)
class Token:
    """One accepted bearer token and its scope. `source` names where it came from, for
    messages and doctor; the value itself is never shown."""

    value: str
    scope: Scope
    source: str

    def matches(self, presented: str) -> bool:
        return hmac.compare_digest(presented.encode(), self.value.encode())


@dataclass(frozen=True)
class TokenConfig:
    tokens: tuple[Token, ...] = ()

    @property
    def configured(self) -> bool:
        return bool(self.tokens)

    def authenticate(self, presented: str | None) -> Token | None:
        if not presented:
            return None
        found = None
        for token in self.tokens:  # compare against every token: no early exit to time
            if token.matches(presented):
                found = token
        return found

    @property
    def local_scope(self) -> Scope:
        """The scope of a stdio session, which presents no token: the token file's, when one
        is configured (a host that launches `zmem mcp` with a scoped file confines it), else
        the operator's."""
        for token in self.tokens:
            if token.source == "ZMEM_MCP_TOKEN_FILE":
                return token.scope
        return UNSCOPED

    @property
    def unscoped(self) -> list[str]:
        """Where a full-access operator token comes from (doctor's unscoped_token)."""
        return [t.source for t in self.tokens if not t.scope.scoped]


# A token that guards a server reachable from other machines: long and varied enough that it
# cannot be guessed (`secrets.token_urlsafe(24)` gives 32 characters; 24 hex digits is 96 bits).
MIN_TOKEN_CHARS = 24
MIN_TOKEN_DISTINCT = 10


def weak_tokens(config: TokenConfig) -> list[str]:
    """Where each token too weak to guard a non-loopback listener comes from."""
    return [
        t.source
        for t in config.tokens
        if len(t.value) < MIN_TOKEN_CHARS or len(set(t.value)) < MIN_TOKEN_DISTINCT
    ]


def _check_value(value: str, where: str) -> str:
    value = value.strip()
    if not value:
        raise UsageError(f"{where} is empty: set a token (a long random string)")
    if any(ch.isspace() or ord(ch) < 32 for ch in value):
        raise UsageError(f"{where} holds whitespace or control characters inside the token")
    return value


def parse_token_file(text: str, where: str = "ZMEM_MCP_TOKEN_FILE") -> Token:
    """A bare token (unscoped), or {"token": ..., "namespaces": [...]}. Malformed JSON, an
    empty list, or a near-miss name such as "global" is refused (exit 2)."""
    stripped = text.strip()
    if not stripped.startswith(("{", "[")):
        return Token(_check_value(stripped, where), UNSCOPED, "ZMEM_MCP_TOKEN_FILE")
    try:
        raw = json.loads(stripped)
    except ValueError as exc:
        raise UsageError(f"{where} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(raw, dict):
        raise UsageError(f"{where} must hold a JSON object")
    unknown = sorted(set(raw) - {"token", "namespaces"})
    if unknown:
        raise UsageError(f"{where} has unknown key(s): {', '.join(unknown)}")
    token = raw.get("token")
    if not isinstance(token, str):
        raise UsageError(f'{where} needs a "token" string')
    value = _check_value(token, f"{where}'s token")
    spaces = raw.get("namespaces")
    if spaces is None:
        return Token(value, UNSCOPED, "ZMEM_MCP_TOKEN_FILE")
    if not isinstance(spaces, list) or not spaces:
        raise UsageError(f'{where}: "namespaces" must be a non-empty list of namespaces')
    allowed = set()
    for ns in spaces:
        if not isinstance(ns, str):
            raise UsageError(f'{where}: "namespaces" must hold strings')
        try:
            allowed.add(validate_namespace(ns))
        except ZMemError as exc:
            raise UsageError(f"{where}: {exc}") from None
    return Token(value, Scope(frozenset(allowed)), "ZMEM_MCP_TOKEN_FILE")


TOKEN_FILE_CAP = 64 * 1024  # a token and its namespaces; a file past this is not a token file


def load_tokens(env: Mapping[str, str]) -> TokenConfig:
    tokens: list[Token] = []
    operator = env.get("ZMEM_MCP_TOKEN")
    if operator is not None and operator.strip():
        tokens.append(Token(_check_value(operator, "ZMEM_MCP_TOKEN"), UNSCOPED, "ZMEM_MCP_TOKEN"))
    path = env.get("ZMEM_MCP_TOKEN_FILE", "").strip()
    if path:
        try:
            raw = untrusted.read_head(Path(path).expanduser(), TOKEN_FILE_CAP + 1)
            if len(raw) > TOKEN_FILE_CAP:
                raise UsageError(f"ZMEM_MCP_TOKEN_FILE {path} is over {TOKEN_FILE_CAP} bytes")
            text = raw.decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8"
            raise UsageError(f"ZMEM_MCP_TOKEN_FILE {path} cannot be read ({reason})") from None
        scoped = parse_token_file(text)
        if tokens and tokens[0].matches(scoped.value):
            raise UsageError(
                "ZMEM_MCP_TOKEN and ZMEM_MCP_TOKEN_FILE hold the same token: a request could "
                "not tell the operator from the scoped client; give them different values"
            )
        tokens.append(scoped)
    return TokenConfig(tuple(tokens))


LOCAL_TOKEN_SOURCE = "the data dir's token"


def local_token(data_dir: Path, *, create: bool = True) -> str | None:
    """`zmem mcp --http`'s own bearer token (issue 48): <data dir>/mcp-http-token, made on first
    use, readable by this user alone. A listener on loopback is open to every local user, so
    none runs without a token: this is the one used when neither ZMEM_MCP_TOKEN nor
    ZMEM_MCP_TOKEN_FILE names one (`zmem mcp --print-token` shows it to other clients)."""
    import os
    import secrets

    from zmem.layout import MCP_TOKEN, PRIVATE_FILE_MODE

    path = Path(data_dir) / MCP_TOKEN
    try:
        value = untrusted.read_text(path, 4096).strip()
        if len(value) >= MIN_TOKEN_CHARS and not value.startswith("{"):
            return value
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise UsageError(f"{path} cannot be read ({exc.strerror or exc}); remove it") from None
    if not create:
        return None
    value = secrets.token_urlsafe(32)
    Path(data_dir).mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(value + "\n")
    os.replace(tmp, path)
    return value


def with_local_token(tokens: TokenConfig, data_dir: Path) -> TokenConfig:
    """The configured tokens, or the data dir's own when none is: never an open listener."""
    if tokens.configured:
        return tokens
    value = local_token(data_dir)
    assert value is not None
    return TokenConfig((Token(value, UNSCOPED, LOCAL_TOKEN_SOURCE),))


# ---- listening -----------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted sockets only when the
    # listening socket says TCP, and without it every reply waited ~40 ms for a delayed ACK
    # (Nagle holding the body behind the headers): 48 ms for `stats`, 4 ms with it.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port} ({exc.strerror or exc})") from None
    return sock


def url_host(host: str) -> str:
    """The host as it goes in a URL (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def serve_asgi(app: Any, sock: socket.socket) -> None:
    """Serve `app` with uvicorn on a listening socket until Ctrl-C or SIGTERM, both a clean stop
    (exit 0); the socket is closed either way. uvicorn is imported here: only the HTTP front
    ends need it."""
    import signal

    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    signal.signal(signal.SIGTERM, lambda *_: setattr(server, "should_exit", True))
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
