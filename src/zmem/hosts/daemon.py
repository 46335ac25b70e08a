"""The warm resident process: one per data dir, listening on <data>/zmem-hookd.sock, holding
the open store and the loaded embedder so a prompt hook costs a socket round trip instead of an
interpreter start plus imports plus model load. It refuses requests from a client running
different code (build id) or settings (ZMEM_* hash), and exits when idle."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from zmem.config import load_settings
from zmem.hosts import client, events
from zmem.hosts.verbs import Hooks

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
        self.path = data_dir / client.SOCKET_NAME
        self.build = client.build_id()
        self.env = client.env_key()
        self.hooks = Hooks(load_settings())
        self.stale = False

    def warm(self) -> None:
        # Open the store and run one passive read with no telemetry: pages, the embedder and
        # the lazily imported modules are loaded before the first real prompt.
        self.hooks.store.recall_report("warm up", telemetry=False, no_bump=True)

    def handle(self, raw: bytes) -> dict[str, Any]:
        try:
            req = json.loads(raw)
        except ValueError:
            return {"ok": False, "why": "bad-request"}
        if not isinstance(req, dict) or req.get("v") != client.PROTOCOL:
            return {"ok": False, "why": "protocol"}
        if req.get("build") != self.build:
            self.stale = True  # the code changed under us: let a fresh process take over
            return {"ok": False, "why": "build"}
        if req.get("env") != self.env:
            return {"ok": False, "why": "env"}
        for key, value in (req.get("request_env") or {}).items():
            if key in ("CLAUDE_PLUGIN_ROOT", "PLUGIN_ROOT", "ZMEM_PLUGIN_ROOT"):
                os.environ[key] = str(value)
        try:
            ev = events.normalize(str(req.get("host")), str(req.get("event")), req.get("payload"))
            out = self.hooks.run(ev)
        except Exception as exc:
            self.hooks.close()  # reopen on the next request (the file may have been replaced)
            return {
                "ok": True,
                "context": None,
                "reason": "error",
                "fields": {"error": type(exc).__name__},
            }
        return {"ok": True, "context": out.context, "reason": out.reason, "fields": out.fields}

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
        (self.data_dir / "zmem-hookd.starting").unlink(missing_ok=True)
        server.settimeout(1.0)
        idle = _idle_seconds()
        last = time.monotonic()
        try:
            while not self.stale and time.monotonic() - last < idle:
                try:
                    conn, _ = server.accept()
                except TimeoutError:
                    continue
                last = time.monotonic()
                with conn:
                    self._answer(conn)
        finally:
            try:
                if self.path.stat().st_ino == ino:
                    self.path.unlink()
            except OSError:
                pass
            server.close()
            self.hooks.close()

    def _answer(self, conn: socket.socket) -> None:
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
            conn.sendall(json.dumps(reply, ensure_ascii=False).encode())
        except OSError:
            pass


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    data_dir = Path(args[0]) if args else client.data_dir()
    resident = Resident(data_dir)
    try:
        resident.warm()
    except Exception:
        pass  # a broken store is answered per request (reason=error), not by dying here
    resident.serve()


if __name__ == "__main__":
    main()
