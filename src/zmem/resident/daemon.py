"""The warm resident process: one per data dir, listening on <data>/zmem-hookd.sock, holding
the open store and the loaded embedder so a prompt hook costs a socket round trip instead of an
interpreter start plus imports plus model load. It answers only clients of the same install
with the same ZMEM_* settings, hands over to a fresh process when its code changes on disk, logs
each decision as the client would, and exits when idle."""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

from zmem import layout
from zmem.config import load_settings
from zmem.hosts import events
from zmem.hosts.verbs import Hooks
from zmem.layout import SOCKET_NAME, SPAWN_STAMP
from zmem.resident import client, code, dispatch, reads, wire

DEFAULT_IDLE_S = 900.0
READ_TIMEOUT_S = 2.0
MAX_REQUEST_BYTES = 4 << 20


def _idle_seconds() -> float:
    try:
        return max(1.0, float(os.environ.get("ZMEM_HOOKD_IDLE_S", "") or DEFAULT_IDLE_S))
    except ValueError:
        return DEFAULT_IDLE_S


class Resident:
    def __init__(self, data_dir: Path):
        self.data_dir = data_dir
        self.path = data_dir / SOCKET_NAME
        self.pkg = str(code.PACKAGE_DIR)
        self.build = code.build_id()
        self.digest = code.code_digest()
        self._installs: dict[str, tuple[str, str]] = {}  # other install -> (stamps, digest)
        self.env = wire.settings_items()
        self.hooks = Hooks(load_settings())
        self.stale = False

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
        self.hooks.reopen_if_replaced()
        if host == reads.HOST:
            return self._read(payload, t0)
        try:
            out, reason, fields = dispatch.respond(
                host, event, payload.decode("utf-8", "replace"), self.data_dir, t0, self._execute
            )
        except Exception as exc:
            out, reason, fields = "", "error", {"error": type(exc).__name__, "via": "daemon"}
        fields["ms"] = int((time.monotonic() - t0) * 1000)
        client.log_line(self.data_dir, host, event, reason, fields)
        return wire.encode_reply(reason, out)

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

    def serve(self) -> None:
        if self.path.exists():
            if client.answers(self.path):
                return  # another resident process already serves this data dir
            self.path.unlink(missing_ok=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.data_dir / f".zmem-hookd.{os.getpid()}.sock"
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(tmp))
        os.chmod(tmp, 0o600)
        server.listen(16)
        os.replace(tmp, self.path)  # visible only once it accepts
        ino = self.path.stat().st_ino
        (self.data_dir / SPAWN_STAMP).unlink(missing_ok=True)
        server.settimeout(1.0)
        idle = _idle_seconds()
        last = time.monotonic()
        try:
            while not self.stale and time.monotonic() - last < idle:
                try:
                    conn, _ = server.accept()
                except TimeoutError:
                    self._check_code()
                    continue
                with conn:
                    if self._answer(conn):
                        # Only answered requests keep it alive: a client it refuses (another
                        # release) must not keep an unused process resident for good.
                        last = time.monotonic()
                self._between_requests()
        finally:
            try:
                if self.path.stat().st_ino == ino:
                    self.path.unlink()
            except OSError:
                pass
            server.close()
            self.hooks.close()

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

    def _answer(self, conn: socket.socket) -> bool:
        conn.settimeout(READ_TIMEOUT_S)
        chunks: list[bytes] = []
        size = 0
        try:
            while size < MAX_REQUEST_BYTES:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            reply = self.handle(b"".join(chunks))
            conn.sendall(reply)
        except OSError:
            return False
        return reply.startswith(b"ok\t")


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    layout.keep_private()
    data_dir = Path(args[0]) if args else client.data_dir()
    resident = Resident(data_dir)
    try:
        resident.warm()
    except Exception:
        pass  # a broken store is answered per request (reason=error), not by dying here
    try:
        code.compile_code()
    except Exception:
        pass  # a read-only install only loses the cached bytecode
    resident.serve()


if __name__ == "__main__":
    main()
