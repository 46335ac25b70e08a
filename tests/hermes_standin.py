"""A stand-in for an OpenAI-compatible model API, for the live Hermes runs: loopback only, an
ephemeral port, every request body kept for the test to read. It answers chat completions
(server-sent events when the client streams, which Hermes does) from a script: while the
current turn has fewer tool results than the script has steps, the next step's tool call;
then a final answer. It also answers the model-list requests Hermes makes first."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "standin-model"
# (tool name, arguments) steps for one user turn, chosen from the user's text.
Script = Callable[[str], list[tuple[str, dict[str, Any]]]]


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def next_message(body: dict[str, Any], script: Script) -> dict[str, Any]:
    """The assistant message the script calls for at this point of the conversation."""
    messages = body.get("messages") or []
    offered = {t.get("function", {}).get("name") for t in body.get("tools") or []}
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    turn = messages[last_user + 1 :]
    done = sum(1 for m in turn if m.get("role") == "tool")
    steps = script(text_of(messages[last_user].get("content")) if last_user >= 0 else "")
    if done < len(steps) and steps[done][0] in offered:
        name, args = steps[done]
        # Ids unique across the conversation: Hermes drops a call whose id it saw before.
        call = {
            "id": f"call_{uuid.uuid4().hex[:12]}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    results = [text_of(m.get("content")) for m in turn if m.get("role") == "tool"]
    return {"role": "assistant", "content": f"FINAL: {len(results)} tool result(s) read."}


class StandIn:
    """The server, on a daemon thread of the test process."""

    def __init__(self, script: Script):
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> StandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def completions(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r["body"] for r in self.requests if r["path"].endswith("/chat/completions")]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _json(self, code: int, doc: Any) -> None:
                raw = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                with standin._lock:
                    standin.requests.append({"method": "GET", "path": self.path, "body": None})
                if self.path.rstrip("/").endswith("/models"):
                    model = {"id": MODEL, "object": "model", "context_length": 131072}
                    return self._json(200, {"object": "list", "data": [model]})
                self._json(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(size) or b"{}")
                with standin._lock:
                    standin.requests.append({"method": "POST", "path": self.path, "body": body})
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    return self._json(404, {"error": {"message": "unsupported"}})
                message = next_message(body, standin.script)
                finish = "tool_calls" if message.get("tool_calls") else "stop"
                usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
                head = {"id": "chatcmpl-standin", "created": int(time.time()), "model": MODEL}
                if not body.get("stream"):
                    choice = {"index": 0, "message": message, "finish_reason": finish}
                    doc = {**head, "object": "chat.completion", "choices": [choice]}
                    return self._json(200, {**doc, "usage": usage})
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()

                def chunk(delta: dict[str, Any], fin: str | None = None, **extra: Any) -> None:
                    choice = {"index": 0, "delta": delta, "finish_reason": fin}
                    doc = {**head, "object": "chat.completion.chunk", "choices": [choice]}
                    self.wfile.write(b"data: " + json.dumps({**doc, **extra}).encode() + b"\n\n")

                chunk({"role": "assistant"})
                if message.get("tool_calls"):
                    call = message["tool_calls"][0]
                    chunk({"tool_calls": [{"index": 0, **call}]})
                else:
                    chunk({"content": message["content"]})
                chunk({}, finish, usage=usage)
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

        return Handler
