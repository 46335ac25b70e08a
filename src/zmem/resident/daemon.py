"""The warm resident process: one per data dir, listening on <data>/zmem-hookd.sock, holding
the open store and the loaded embedder so a prompt hook costs a socket round trip instead of an
interpreter start plus imports plus model load. It answers only clients of the same install
with the same ZMEM_* settings, hands over to a fresh process when its code changes on disk, logs
each decision as the client would, and exits when idle. Started by the keeper (resident.keeper)
it also answers Claude Code's http prompt hook on the loopback socket the keeper holds."""

from __future__ import annotations

import json
import os
import selectors
import socket
import sys
import time
from pathlib import Path

from zmem import layout
from zmem.config import load_settings
from zmem.hosts import events
from zmem.hosts.verbs import Hooks
from zmem.layout import SOCKET_NAME, SPAWN_STAMP
from zmem.resident import client, code, dispatch, http_hook, reads, wire

DEFAULT_IDLE_S = 900.0
# Exit statuses the keeper reads: idle (start the next one when a request comes), handing over
# to fresh code (start it now). Anything else is a crash: start the next one now.
EXIT_IDLE = 0
EXIT_HANDOVER = 3
READ_TIMEOUT_S = 2.0  # a connection's whole request must arrive within this, from its accept
MAX_REQUEST_BYTES = 4 << 20
# Connections held open at once, per listener (issue 48): past this the oldest unfinished one
# is dropped, so idle or trickling connections from another local user cost buffers, never a
# prompt's wait. A whole request is answered the moment its last byte arrives.
MAX_OPEN = {"http": 64, "unix": 32}
ACCEPTS_PER_WAKE = 64
# Unauthorized http requests are logged at most once in this long, with their count: a flood
# must not rotate the useful lines out of zmem-bg.log.
UNAUTHORIZED_LOG_EVERY_S = 60.0


class _Conn:
    """One accepted connection while its request arrives."""

    __slots__ = ("sock", "kind", "deadline", "buf", "opened")

    def __init__(self, sock: socket.socket, kind: str, now: float):
        self.sock, self.kind = sock, kind
        self.opened, self.deadline = now, now + READ_TIMEOUT_S
        self.buf = bytearray()


def _idle_seconds() -> float:
    try:
        return max(1.0, float(os.environ.get("ZMEM_HOOKD_IDLE_S", "") or DEFAULT_IDLE_S))
    except ValueError:
        return DEFAULT_IDLE_S


def _config_of(http: socket.socket, data_dir: Path) -> http_hook.HttpConfig | None:
    """The http config of the port this process was handed: setup may have moved the hook to
    another port (with another secret) since the keeper bound this one, and that secret must
    not open this socket. None: serve no http request, and leave (_http_wanted)."""
    config = http_hook.load_config(data_dir)
    if config is None or http.getsockname()[1] != config.port:
        return None
    return config


class Resident:
    def __init__(self, data_dir: Path, http: socket.socket | None = None):
        self.data_dir = data_dir
        # The keeper's listening socket and the secret its requests must carry (None: no
        # http hook, a resident process a command hook started).
        self.http = http
        self.http_config = _config_of(http, data_dir) if http is not None else None
        self.path = data_dir / SOCKET_NAME
        self.pkg = str(code.PACKAGE_DIR)
        self.build = code.build_id()
        self.digest = code.code_digest()
        self._installs: dict[str, tuple[str, str]] = {}  # other install -> (stamps, digest)
        self.env = wire.settings_items()
        self.hooks = Hooks(load_settings())
        self.stale = False
        self._open: dict[int, _Conn] = {}
        self._unauthorized = 0  # not yet logged
        self._unauthorized_logged = 0.0
        client.log_refused_files(data_dir)

    def warm(self) -> None:
        # Open the store and run one passive read with no telemetry: pages, the embedder and
        # the lazily imported modules are loaded before the first real prompt.
        self.hooks.store.warm_up()

    def handle(self, raw: bytes) -> bytes:
        """One request to one reply; the decision is logged here, as the client would."""
        t0 = time.monotonic()
        decoded = wire.decode_request(raw)
        if decoded is None:
            return wire.encode_refusal("protocol")
        header, payload = decoded
        if not self._same_code(header.get("pkg")):
            return wire.encode_refusal("pkg")  # another release shares this data dir
        if self.stale:
            return wire.encode_refusal("build")  # seen changed between requests: handing over
        if header.get("env") != self.env:
            return wire.encode_refusal("env")
        forwarded = header.get("request_env")
        forwarded = forwarded if isinstance(forwarded, dict) else {}
        for key in wire.REQUEST_ENV_KEYS:  # this request's, never a previous one's
            if isinstance(forwarded.get(key), str):
                os.environ[key] = forwarded[key]
            else:
                os.environ.pop(key, None)
        host, event = str(header.get("host")), str(header.get("event"))
        if host == reads.HOST:
            self.hooks.reopen_if_replaced()
            return self._read(payload, t0)
        out, reason = self._respond(host, event, payload, t0)
        return wire.encode_reply(reason, out)

    def _respond(
        self, host: str, event: str, body: bytes, t0: float, via: str = ""
    ) -> tuple[str, str]:
        """One hook event answered on the open store and its decision logged, as the client
        would log it: (the host's output, the reason). Never raises: an error is a reason."""
        try:
            self.hooks.reopen_if_replaced()
            out, reason, fields = dispatch.respond(
                host, event, body.decode("utf-8", "replace"), self.data_dir, t0, self._execute
            )
        except Exception as exc:
            out, reason, fields = "", "error", {"error": type(exc).__name__, "via": "daemon"}
        if via:
            fields["via"] = via
        fields["ms"] = int((time.monotonic() - t0) * 1000)
        client.log_line(self.data_dir, host, event, reason, fields)
        return out, reason

    def answer_http(self, conn: socket.socket, request: http_hook.Request, t0: float) -> bool:
        """One whole http request on its connection; True when a hook event was answered.
        Every failure after the secret is checked is a silent success for the host (an empty
        JSON body: the prompt goes on without context, as a command hook fails open)."""
        nonce = http_hook.identity_nonce(request.path) if request.method == "GET" else None
        if nonce is not None:
            # Who holds this port? Proven without the secret crossing the wire; nothing runs.
            config = self.http_config
            if config is None:
                http_hook.reply(conn, 404, "{}")
            else:
                body = json.dumps({"proof": http_hook.proof(config.secret, nonce)})
                http_hook.reply(conn, 200, body)
            return False
        routed = http_hook.route(request.path)
        if routed is None:
            http_hook.reply(conn, 404, "{}")
            return False
        if request.method != "POST":
            http_hook.reply(conn, 405, "{}")
            return False
        config = self.http_config
        if config is None or not http_hook.authorized(request, config.secret):
            self._note_unauthorized(routed)
            http_hook.reply(conn, 401, "{}")
            return False
        host, event = routed
        for key in wire.REQUEST_ENV_KEYS:  # the http body is the whole request: no env rides
            os.environ.pop(key, None)
        out, _ = self._respond(host, event, request.body, t0, via="http")
        try:
            http_hook.reply(conn, 200, out)
        except OSError:
            pass  # the host gave up waiting; the request was still served (it may have written)
        return True

    def _note_unauthorized(self, routed: tuple[str, str]) -> None:
        """One log line per UNAUTHORIZED_LOG_EVERY_S, with how many were refused since."""
        self._unauthorized += 1
        now = time.monotonic()
        if now - self._unauthorized_logged >= UNAUTHORIZED_LOG_EVERY_S:
            fields = {"via": "http", "count": self._unauthorized}
            client.log_line(self.data_dir, routed[0], routed[1], "unauthorized", fields)
            self._unauthorized, self._unauthorized_logged = 0, now

    def _read(self, payload: bytes, t0: float) -> bytes:
        """A CLI read (resident.reads) on the open store; logged like a hook's decision."""
        try:
            from zmem.cli import warm  # the CLI, loaded on the first read asked of it

            done = warm.serve(payload, self.hooks.store, self.hooks.settings.store_path)
        except Exception as exc:
            client.log_line(self.data_dir, "cli", "read", "error", {"error": type(exc).__name__})
            return wire.encode_refusal("error")
        if done is None:
            return wire.encode_refusal("not-served")
        ms = int((time.monotonic() - t0) * 1000)
        client.log_line(self.data_dir, "cli", "read", "answered", {"ms": ms})
        return wire.encode_reply(*done)

    def _same_code(self, pkg: object) -> bool:
        """The client runs this process's code: the same install, or another install of the
        same release (Claude Code and Codex each copy the plugin; both must be served warm)."""
        if pkg == self.pkg:
            return True
        if not isinstance(pkg, str) or not code.is_package(pkg):
            return False
        try:
            stamps = code.build_id(Path(pkg))
            known = self._installs.get(pkg)
            if known is None or known[0] != stamps:
                known = (stamps, code.code_digest(Path(pkg)))
                self._installs[pkg] = known
        except OSError:
            return False
        return known[1] == self.digest

    def _execute(self, ev: events.HookEvent, t0: float) -> tuple[events.Outcome | None, str]:
        try:
            return self.hooks.run(ev), "daemon"
        except Exception:
            self.hooks.close()  # reopen on the next request (the file may have been replaced)
            raise

    def serve(self) -> int:
        """Answer until idle (EXIT_IDLE) or until fresh code or another process takes over
        (EXIT_HANDOVER). One started by the keeper takes the socket path over from a resident
        process a command hook started; that one sees its path gone and leaves."""
        if self.path.exists() and self.http is None:
            if client.answers(self.path):
                return EXIT_IDLE  # another resident process already serves this data dir
            self.path.unlink(missing_ok=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.data_dir / f".zmem-hookd.{os.getpid()}.sock"
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(tmp))
        os.chmod(tmp, 0o600)
        server.listen(16)
        server.setblocking(False)  # a connection gone between select and accept: no wait
        os.replace(tmp, self.path)  # visible only once it accepts
        ino = self.path.stat().st_ino
        (self.data_dir / SPAWN_STAMP).unlink(missing_ok=True)
        ready = selectors.DefaultSelector()
        ready.register(server, selectors.EVENT_READ, "unix")
        if self.http is not None:
            ready.register(self.http, selectors.EVENT_READ, "http")
        idle = _idle_seconds()
        last = time.monotonic()
        checked = last
        replaced = False
        try:
            while not self.stale and time.monotonic() - last < idle:
                events_ = ready.select(timeout=self._wait())
                if time.monotonic() - checked >= 0.9:  # the select may wake a hair early
                    # Once a second, busy or not (a client probing the port must not keep
                    # this from ever looking): fresh code, the socket path, the http config.
                    checked = time.monotonic()
                    self._check_code()
                    replaced = self._replaced(ino)
                    if replaced or not self._http_wanted():
                        break
                whole: list[tuple[_Conn, object]] = []
                for key, _ in events_:
                    if isinstance(key.data, str):
                        self._accept(ready, key.fileobj, key.data)  # type: ignore[arg-type]
                    else:
                        got = self._receive(ready, key.data)
                        if got is not None:
                            whole.append((key.data, got))
                self._expire(ready)
                served = False
                # This user's own requests first (the command hooks' socket, then a request
                # carrying the secret); a stranger's, and malformed ones, after them.
                for c, request in sorted(whole, key=lambda w: self._rank(*w)):
                    if self._serve_one(ready, c, request):
                        # Only answered requests keep it alive: a client it refuses (another
                        # release, a stranger) must not keep an unused process resident.
                        last = time.monotonic()
                        served = True
                if served:  # a refused or unreadable request touched no store
                    self._between_requests()
        finally:
            for c in list(self._open.values()):
                self._close(ready, c)
            ready.close()
            try:
                if self.path.stat().st_ino == ino:
                    self.path.unlink()
            except OSError:
                pass
            server.close()
            self.hooks.close()
        return EXIT_HANDOVER if self.stale or replaced else EXIT_IDLE

    # ---- connections, as their bytes arrive ----------------------------------------------

    def _wait(self) -> float:
        """Until the next once-a-second check or the nearest connection deadline."""
        if not self._open:
            return 1.0
        soonest = min(c.deadline for c in self._open.values()) - time.monotonic()
        return min(1.0, max(0.0, soonest))

    def _accept(self, ready: selectors.BaseSelector, listener: socket.socket, kind: str) -> None:
        for _ in range(ACCEPTS_PER_WAKE):
            try:
                sock, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return  # none waiting, or another process took it
            except OSError:
                return  # out of descriptors for now: the backlog keeps the rest
            sock.setblocking(False)
            now = time.monotonic()
            mine = [c for c in self._open.values() if c.kind == kind]
            if len(mine) >= MAX_OPEN[kind]:
                self._close(ready, min(mine, key=lambda c: c.opened))  # the oldest unfinished
            c = _Conn(sock, kind, now)
            self._open[sock.fileno()] = c
            ready.register(sock, selectors.EVENT_READ, c)

    def _receive(self, ready: selectors.BaseSelector, c: _Conn) -> object | None:
        """Read what arrived; the request once it is whole (bytes for the command hooks'
        socket, an http_hook.Request), else None. A connection that breaks the protocol is
        answered (http: 400) and closed."""
        try:
            chunk = c.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            self._close(ready, c)
            return None
        if c.kind == "unix":
            c.buf += chunk
            if not chunk or len(c.buf) >= MAX_REQUEST_BYTES:  # the client's end, as before
                return bytes(c.buf)
            return None
        if not chunk:
            self._close(ready, c)  # gone before its request was whole
            return None
        c.buf += chunk
        request = http_hook.parse(bytes(c.buf))
        if request is http_hook.INCOMPLETE:
            return None
        if request is None:
            self._reply_and_close(ready, c, 400)
            return None
        return request

    def _rank(self, c: _Conn, request: object) -> int:
        if c.kind == "unix":
            return 0
        config = self.http_config
        ok = config is not None and isinstance(request, http_hook.Request)
        return 1 if ok and http_hook.authorized(request, config.secret) else 2  # type: ignore

    def _serve_one(self, ready: selectors.BaseSelector, c: _Conn, request: object) -> bool:
        t0 = time.monotonic()
        try:
            ready.unregister(c.sock)
        except (KeyError, ValueError, OSError):
            pass
        self._open.pop(c.sock.fileno(), None)
        try:
            c.sock.setblocking(True)
            c.sock.settimeout(READ_TIMEOUT_S)  # the reply is small; a reader that stalls goes
            if c.kind == "unix":
                reply = self.handle(request)  # type: ignore[arg-type]
                try:
                    c.sock.sendall(reply)
                except OSError:
                    pass  # the client gave up; the request was still served (it may have written)
                return reply.startswith(b"ok\t")
            return self.answer_http(c.sock, request, t0)  # type: ignore[arg-type]
        except OSError:
            return False
        finally:
            self._forget(c)

    def _expire(self, ready: selectors.BaseSelector) -> None:
        now = time.monotonic()
        for c in [c for c in self._open.values() if c.deadline <= now]:
            if c.kind == "http":
                self._reply_and_close(ready, c, 408)
            else:
                self._close(ready, c)

    def _reply_and_close(self, ready: selectors.BaseSelector, c: _Conn, status: int) -> None:
        try:
            http_hook.reply(c.sock, status, "{}")  # small: fits the socket's buffer
        except OSError:
            pass
        self._close(ready, c)

    def _close(self, ready: selectors.BaseSelector, c: _Conn) -> None:
        try:
            ready.unregister(c.sock)
        except (KeyError, ValueError, OSError):
            pass
        self._open.pop(c.sock.fileno(), None)
        self._forget(c)

    @staticmethod
    def _forget(c: _Conn) -> None:
        try:
            c.sock.close()
        except OSError:
            pass

    def _http_wanted(self) -> bool:
        """Started by the keeper: `setup` still wires this port and secret (`--remove`, or a
        switch to command hooks, ends this process and then its keeper)."""
        if self.http is None:
            return True
        current = http_hook.load_config(self.data_dir)
        return current is not None and current == self.http_config

    def _replaced(self, ino: int) -> bool:
        """Another process now serves the socket path (the keeper's resident process took it
        over): new clients reach that one, so this one leaves instead of idling out."""
        try:
            return self.path.stat().st_ino != ino
        except OSError:
            return False  # gone (a sweep, a test's cleanup): keep serving who is connected

    def _check_code(self) -> None:
        """Hand over to a fresh process when the code on disk changed (an upgrade, an edit).
        Checked after each answer and once a second while idle, never on a request's path: the
        walk over the package's files costs ~1 ms a prompt. An edit is thus seen within a
        second; a request in that second is still answered by the code that was loaded."""
        try:
            changed = code.build_id() != self.build
        except OSError:  # a file vanished mid-walk: an upgrade is under way
            changed = True
        if changed:
            self.stale = True

    def _between_requests(self) -> None:
        self._check_code()
        if self.stale:
            return  # about to exit: no vector copy for a process that answers no more
        # After the reply is sent: a capture by another process made the in-memory vectors
        # stale (that prompt was answered from the index); rebuild them before the next one.
        # A store reopened after an error gets its copy here too.
        try:
            self.hooks.store.keep_vectors_in_memory()
        except Exception:
            self.hooks.close()  # answered per request (reason=error), never by dying


def main(argv: list[str] | None = None) -> None:
    """`python -m zmem.resident.daemon [DATA_DIR] [--http-fd N]`: N is the keeper's listening
    socket, inherited. Exits with EXIT_IDLE or EXIT_HANDOVER for the keeper."""
    args = list(sys.argv[1:] if argv is None else argv)
    http = None
    if "--http-fd" in args:
        at = args.index("--http-fd")
        fd = int(args[at + 1])
        del args[at : at + 2]
        http = socket.socket(fileno=fd)
        http.setblocking(False)  # two processes may wake for one connection; one accepts
    layout.keep_private()
    data_dir = Path(args[0]) if args else client.data_dir()
    resident = Resident(data_dir, http)
    try:
        resident.warm()
    except Exception:
        pass  # a broken store is answered per request (reason=error), not by dying here
    try:
        code.compile_code()
    except Exception:
        pass  # a read-only install only loses the cached bytecode
    sys.exit(resident.serve())


if __name__ == "__main__":
    main()
