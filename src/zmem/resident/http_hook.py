"""Claude Code's `http` hook, as the resident process answers it: the POST Claude Code sends (the
hook's JSON, the body a command hook reads on stdin) read off a loopback connection, the
per-user secret checked before anything runs, and the reply a command hook would print, as
the JSON body Claude Code reads. Also the settings the keeper, the resident process and
`setup claude` share (<data dir>/hookd-http.json: port and secret), and starting the keeper
(resident.keeper) when none holds the port. Standard library only."""

from __future__ import annotations

import hmac
import json
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path

from zmem import ports, untrusted
from zmem.layout import HTTP_CONFIG, PRIVATE_FILE_MODE
from zmem.resident import code, wire

PATH_PREFIX = "/zmem-hook/"  # /zmem-hook/<host>/<event>; also how setup knows its entries
HOST = "claude"  # the one host with http hooks (Codex and ZCode run commands only)
EVENTS = frozenset({"UserPromptSubmit"})  # wired as http by setup; others stay commands
MAX_HEAD_BYTES = 16 << 10
MAX_BODY_BYTES = 4 << 20
READ_TIMEOUT_S = 2.0
LOOPBACK = "127.0.0.1"
_SECRET = re.compile(r"[A-Za-z0-9_-]{32,256}")


@dataclass(frozen=True)
class HttpConfig:
    port: int
    secret: str

    def url(self, event: str) -> str:
        return f"http://{LOOPBACK}:{self.port}{PATH_PREFIX}{HOST}/{event}"

    def text(self) -> str:
        return json.dumps({"port": self.port, "secret": self.secret}, indent=2) + "\n"


def config_path(data_dir: Path) -> Path:
    return data_dir / HTTP_CONFIG


def parse_config(text: str | None) -> HttpConfig | None:
    """The config from its file's text; None for no file or one that is not ours."""
    if not text:
        return None
    try:
        doc = json.loads(text)
        port, secret = doc["port"], doc["secret"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(port, int) or not 0 < port < 65536:
        return None
    # What setup makes (token_urlsafe): nothing a header could be split on.
    if not isinstance(secret, str) or not _SECRET.fullmatch(secret):
        return None
    return HttpConfig(port, secret)


def load_config(data_dir: Path) -> HttpConfig | None:
    try:
        return parse_config(untrusted.read_text(config_path(data_dir), 4096))
    except OSError:
        return None


def new_config(previous: HttpConfig | None, data_dir: Path | None = None) -> HttpConfig:
    """The config setup writes: the previous one kept (running setup again changes nothing),
    else a port free now and a new 256-bit secret. With `data_dir`, the port is the first free
    one of a sequence that data dir always draws (a dry run shows the port the real run then
    writes, issue 49); without, any free port."""
    if previous is not None:
        return previous
    import secrets

    return HttpConfig(_free_port(data_dir), secrets.token_urlsafe(32))


def _free_port(data_dir: Path | None) -> int:
    if data_dir is not None:
        import zlib

        start = 20000 + zlib.crc32(str(Path(data_dir).expanduser()).encode()) % 30000
        for port in range(start, start + 64):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                try:
                    probe.bind((LOOPBACK, port))
                except OSError:
                    continue  # held (or in another program's use): the next one
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def write_config(data_dir: Path, config: HttpConfig) -> None:
    """Readable by this user alone, written whole (a keeper never reads half a file)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = config_path(data_dir)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(config.text())
    os.replace(tmp, path)


LISTEN_BACKLOG = 1024  # the kernel caps it at net.core.somaxconn


def listen(port: int) -> socket.socket:
    """The keeper's listening socket, inherited by each resident process it starts."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((LOOPBACK, port))
        # A deep queue: when another local user holds hundreds of connections open, a full
        # queue would drop this user's connection attempt and the client would retry only
        # after a second (TCP's first retransmission); queued, it is accepted within a wake.
        sock.listen(LISTEN_BACKLOG)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


INCOMPLETE = "incomplete"  # parse(): more bytes are needed


def parse(data: bytes) -> Request | str | None:
    """The request these bytes hold: a Request once whole (an HTTP/1.1 request with a
    Content-Length body, what Claude Code's client sends), INCOMPLETE while more must come,
    or None for anything else (too big, not HTTP, chunked). The resident process reads each
    connection's bytes as they arrive and asks this after each read: a client trickling a byte
    at a time holds a buffer, never the process."""
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return None if len(data) > MAX_HEAD_BYTES else INCOMPLETE
    if len(head) > MAX_HEAD_BYTES:
        return None
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return None
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            return None
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return None
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        return None
    if not 0 <= length <= MAX_BODY_BYTES:
        return None
    if len(body) < length:
        return INCOMPLETE
    return Request(parts[0], parts[1], headers, body[:length])


def authorized(request: Request, secret: str) -> bool:
    """The request carries the secret (`Authorization: Bearer <secret>`); compared in constant
    time, so the answer's timing says nothing about how much of a guess was right."""
    kind, _, given = request.headers.get("authorization", "").partition(" ")
    if kind.lower() != "bearer" or not given:
        return False
    return hmac.compare_digest(given.strip().encode(), secret.encode())


def route(path: str) -> tuple[str, str] | None:
    """(host, event) of a hook path this endpoint answers, else None: only the events setup
    wires as http hooks (the prompt); every other event is a command hook, and its path is
    not served here."""
    if not path.startswith(PATH_PREFIX):
        return None
    host, sep, event = path[len(PATH_PREFIX) :].partition("/")
    if not sep or host != HOST or event not in EVENTS:
        return None
    return host, event


# The identity question (issue 48) lives with the port's other facts (zmem.ports): the
# resident process answers it, the session start and doctor ask it.
IDENTITY_PATH = ports.IDENTITY_PATH
proof = ports.identity_proof


def identity_nonce(path: str) -> str | None:
    """The nonce of an identity question (`GET /zmem-hook/identity?nonce=<hex>`), else None."""
    base, _, query = path.partition("?")
    if base != IDENTITY_PATH or not query.startswith("nonce="):
        return None
    nonce = query[len("nonce=") :]
    return nonce if _NONCE.fullmatch(nonce) else None


_NONCE = re.compile(r"[0-9a-f]{32,128}")


def challenge(config: HttpConfig, timeout: float = 3.0) -> bool | None:
    return ports.challenge(config.port, config.secret, timeout)


STATUS = {
    200: "OK",
    400: "Bad Request",
    408: "Request Timeout",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
}


def reply(conn: socket.socket, status: int, body: str) -> None:
    """The response, then the connection closes (one request a connection)."""
    data = body.encode("utf-8")
    head = (
        f"HTTP/1.1 {status} {STATUS[status]}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n"
        "Connection: close\r\n\r\n"
    )
    conn.sendall(head.encode("ascii") + data)


def running(data_dir: Path) -> bool:
    """Something holds the configured port (ports.in_use: a bind, which touches no one; a test
    connection would wake the resident process the keeper hands the socket to and cost it a
    refused request)."""
    config = load_config(data_dir)
    return config is not None and ports.in_use(config.port)


def held_by_another(data_dir: Path, port: int) -> bool:
    """Something that is not this data dir's keeper or its resident process listens on the
    port, another user's program included (False when nothing does, or when this system
    cannot tell)."""
    return ports.holder(port, data_dir) == ports.ANOTHER


def start(data_dir: Path, env: dict[str, str] | None = None) -> bool:
    """Start a keeper detached when setup wired the http hook and none holds its port. True
    when one was started. Called by `setup claude` and by every Claude Code SessionStart
    (resident.dispatch), so the first session after a reboot, or after the keeper was killed,
    brings it back before its first prompt."""
    if not wire.flag("ZMEM_HOOK_DAEMON", environ=os.environ if env is None else env):
        return False  # the resident process is turned off, and the keeper with it
    if load_config(data_dir) is None or running(data_dir):
        return False
    return code.start_detached("zmem.resident.keeper", str(data_dir), env=env)
