"""A local stand-in for the model APIs, so the real `claude` and `codex` CLIs can run a session
offline (tests/test_live_hosts.py, docs/host-verification.md).

It answers, with one fixed assistant reply and no tool calls:

- Anthropic Messages API: `POST /v1/messages` (SSE when the body asks for `stream`, else JSON)
  and `POST /v1/messages/count_tokens`; Claude Code reaches it through `ANTHROPIC_BASE_URL`.
- OpenAI Responses API: `POST /v1/responses` (SSE); Chat Completions `POST /v1/chat/completions`
  (SSE or JSON); `GET /v1/models` (an empty list). Codex reaches it through a custom model
  provider's `base_url`.

With a tool command (`--tool-command` / `tool_command=`), the first model call that offers the
host's shell tool (`Bash` on Claude Code, `exec_command` or `shell` on Codex) is answered with
one call of that tool running the command; the call that carries its result gets the text
reply. That drives PreToolUse / PostToolUse through the real host. With a subagent task
(`--subagent-task`), the first call spawns a subagent instead (Claude Code's `Agent` tool;
Codex's `spawn_agent`, then `wait_agent`), which drives SubagentStart. With an MCP tool
(`mcp_tool=(name, input)` / `--mcp-tool NAME --mcp-input JSON`), the first call that offers a
tool whose name ends in `__NAME` (Claude Code's `mcp__plugin_<plugin>_<server>__NAME`) calls it.

Every request (method, path, headers without credentials, parsed JSON body) is appended as one
JSON line to the record file, so a test can assert what context the host sent to the model.

    python scripts/mock_model_api.py --record requests.jsonl [--port 0] [--reply TEXT]
        [--tool-command CMD]

prints `listening http://127.0.0.1:<port>` on stdout once it accepts connections. Only the
standard library is used."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

DEFAULT_REPLY = "MOCK-REPLY: done."
_SECRET_HEADERS = {"authorization", "x-api-key", "cookie"}


def _sse(events: list[tuple[str, dict[str, Any]]]) -> bytes:
    return b"".join(
        f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events
    )


def anthropic_message(model: str, reply: str) -> dict[str, Any]:
    return {
        "id": "msg_mock_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": reply}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def anthropic_stream(model: str, reply: str) -> bytes:
    start = anthropic_message(model, reply)
    start.update(content=[], stop_reason=None, usage={"input_tokens": 10, "output_tokens": 1})
    return _sse(
        [
            ("message_start", {"type": "message_start", "message": start}),
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": reply},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 5},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    )


def anthropic_tool_stream(model: str, name: str, tool_input: dict[str, Any]) -> bytes:
    start = anthropic_message(model, "")
    start.update(content=[], stop_reason=None, usage={"input_tokens": 10, "output_tokens": 1})
    block = {"type": "tool_use", "id": "toolu_mock_1", "name": name, "input": {}}
    return _sse(
        [
            ("message_start", {"type": "message_start", "message": start}),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": block},
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": json.dumps(tool_input)},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                    "usage": {"output_tokens": 5},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    )


def responses_stream(model: str, reply: str, call: dict[str, Any] | None = None) -> bytes:
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 15,
    }
    item = {
        "type": "message",
        "id": "msg_mock_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": reply, "annotations": []}],
    }
    if call is not None:
        item = {"type": "function_call", "id": "fc_mock_1", "status": "completed", **call}
    base = {"id": "resp_mock_1", "object": "response", "model": model}
    text_events = (
        []
        if call is not None
        else [
            (
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "item_id": "msg_mock_1",
                    "output_index": 0,
                    "content_index": 0,
                    "delta": reply,
                },
            )
        ]
    )
    added = {**item, "status": "in_progress"}
    if call is None:
        added["content"] = []
    return _sse(
        [
            (
                "response.created",
                {"type": "response.created", "response": {**base, "status": "in_progress"}},
            ),
            (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "output_index": 0,
                    "item": added,
                },
            ),
            *text_events,
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": 0, "item": item},
            ),
            (
                "response.completed",
                {
                    "type": "response.completed",
                    "response": {**base, "status": "completed", "output": [item], "usage": usage},
                },
            ),
        ]
    )


def chat_completion(model: str, reply: str, stream: bool) -> bytes:
    if not stream:
        return json.dumps(
            {
                "id": "chatcmpl-mock",
                "object": "chat.completion",
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
        ).encode()
    chunk = {"id": "chatcmpl-mock", "object": "chat.completion.chunk", "model": model}
    parts = [
        {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": reply}}]},
        {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    return b"".join(f"data: {json.dumps(p)}\n\n".encode() for p in parts) + b"data: [DONE]\n\n"


def _call(
    name: str, call_id: str, args: dict[str, Any], namespace: str | None = None
) -> dict[str, Any]:
    call = {"name": name, "call_id": call_id, "arguments": json.dumps(args)}
    if namespace:
        call["namespace"] = namespace
    return call


class MockModelAPI:
    """The server, runnable in a thread (tests) or in the foreground (the script)."""

    def __init__(
        self,
        record: Path,
        reply: str = DEFAULT_REPLY,
        port: int = 0,
        tool_command: str | None = None,
        subagent_task: str | None = None,
        mcp_tool: tuple[str, dict[str, Any]] | None = None,
        tool_tty: bool = False,
    ) -> None:
        self.record = Path(record)
        # Codex's exec_command runs the command in a PTY when the model asks for one.
        self.tool_tty = tool_tty
        self.mcp_tool = mcp_tool
        self.reply = reply
        self.tool_command = tool_command
        self.subagent_task = subagent_task
        self._calls_left = 1 if (tool_command or subagent_task or mcp_tool) else 0
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def requests(self) -> list[dict[str, Any]]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines() if line]

    def _take_call(self) -> bool:
        """One scripted call per server: a subagent's own model call must get the text reply."""
        with self._lock:
            if self._calls_left <= 0:
                return False
            self._calls_left -= 1
            return True

    def anthropic_tool_call(self, doc: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        """(tool name, input) to call: Bash running the tool command, or the Agent tool with
        the subagent task; only when the tool is offered and no tool ran in this conversation."""
        offered = [t.get("name") for t in doc.get("tools") or [] if isinstance(t, dict)]
        if self.mcp_tool:
            suffix = "__" + self.mcp_tool[0]
            matches = [n for n in offered if isinstance(n, str) and n.endswith(suffix)]
            if not matches:
                return None
            name, tool_input = matches[0], dict(self.mcp_tool[1])
        elif self.subagent_task:
            name = "Agent"
            tool_input: dict[str, Any] = {
                "description": "Delegated task",
                "prompt": self.subagent_task,
                "subagent_type": "general-purpose",
            }
        elif self.tool_command:
            name = "Bash"
            tool_input = {"command": self.tool_command, "description": "Run the mock's command"}
        else:
            return None
        if name not in offered:
            return None
        for msg in doc.get("messages") or []:
            content = msg.get("content") if isinstance(msg, dict) else None
            if isinstance(content, list) and any(
                isinstance(b, dict) and b.get("type") == "tool_result" for b in content
            ):
                return None
        return (name, tool_input) if self._take_call() else None

    def responses_tool_call(self, doc: dict[str, Any]) -> dict[str, Any] | None:
        """The function call to make on Codex's Responses API: the shell tool running the tool
        command, or spawn_agent with the subagent task followed by wait_agent on it (without
        the wait, `codex exec` ends the turn before the subagent's first model call)."""
        items = [i for i in doc.get("input") or [] if isinstance(i, dict)]
        outputs = {
            i.get("call_id"): i.get("output")
            for i in items
            if i.get("type") == "function_call_output"
        }
        offered = {t.get("name") for t in doc.get("tools") or [] if isinstance(t, dict)}
        if self.subagent_task:
            if "multi_agent_v1" not in offered or "call_mock_2" in outputs:
                return None
            if "call_mock_1" in outputs:
                try:
                    agent = json.loads(str(outputs["call_mock_1"]))["agent_id"]
                except (ValueError, KeyError, TypeError):
                    return None
                args: dict[str, Any] = {"targets": [agent], "timeout_ms": 30000}
                return _call("wait_agent", "call_mock_2", args, "multi_agent_v1")
            if not any(i.get("type") == "function_call" for i in items) and self._take_call():
                args = {"message": self.subagent_task}
                return _call("spawn_agent", "call_mock_1", args, "multi_agent_v1")
            return None  # the subagent's own turn gets the text reply
        if not self.tool_command or outputs:
            return None
        if "exec_command" in offered:
            args, name = {"cmd": self.tool_command}, "exec_command"
            if self.tool_tty:
                args["tty"] = True
        elif "shell" in offered:
            args, name = {"command": ["bash", "-lc", self.tool_command]}, "shell"
        else:
            return None
        return _call(name, "call_mock_1", args) if self._take_call() else None

    def _log(self, entry: dict[str, Any]) -> None:
        with self._lock, open(self.record, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass  # the record file is the log

            def _body(self) -> Any:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if raw and self.headers.get("Content-Encoding", "") == "zstd":
                    return {"_undecoded": "zstd", "_bytes": len(raw)}
                try:
                    return json.loads(raw) if raw else None
                except ValueError:
                    return {"_raw": raw.decode("utf-8", "replace")}

            def _send(self, status: int, body: bytes, ctype: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()
                self.close_connection = True

            def _dispatch(self, method: str) -> None:
                body = self._body() if method == "POST" else None
                path = self.path.split("?", 1)[0]
                headers = {
                    k.lower(): v
                    for k, v in self.headers.items()
                    if k.lower() not in _SECRET_HEADERS
                }
                api._log({"method": method, "path": path, "headers": headers, "body": body})
                doc = body if isinstance(body, dict) else {}
                model = str(doc.get("model") or "mock-model")
                if method == "POST" and path.endswith("/messages/count_tokens"):
                    self._send(200, b'{"input_tokens": 10}', "application/json")
                elif method == "POST" and path.endswith("/messages"):
                    call = api.anthropic_tool_call(doc) if doc.get("stream") else None
                    if call is not None:
                        body = anthropic_tool_stream(model, *call)
                        self._send(200, body, "text/event-stream")
                    elif doc.get("stream"):
                        self._send(200, anthropic_stream(model, api.reply), "text/event-stream")
                    else:
                        msg = json.dumps(anthropic_message(model, api.reply)).encode()
                        self._send(200, msg, "application/json")
                elif method == "POST" and path.endswith("/responses"):
                    stream = responses_stream(model, api.reply, api.responses_tool_call(doc))
                    self._send(200, stream, "text/event-stream")
                elif method == "POST" and path.endswith("/chat/completions"):
                    stream = bool(doc.get("stream"))
                    ctype = "text/event-stream" if stream else "application/json"
                    self._send(200, chat_completion(model, api.reply, stream), ctype)
                elif method == "GET" and path.endswith("/models"):
                    self._send(
                        200, b'{"object": "list", "data": [], "models": []}', "application/json"
                    )
                elif method == "HEAD":
                    self._send(200, b"", "text/plain")
                else:
                    err = {"type": "error", "error": {"type": "not_found_error", "message": path}}
                    self._send(404, json.dumps(err).encode(), "application/json")

            def do_POST(self) -> None:  # noqa: N802
                self._dispatch("POST")

            def do_GET(self) -> None:  # noqa: N802
                self._dispatch("GET")

            def do_HEAD(self) -> None:  # noqa: N802
                self._dispatch("HEAD")

        return Handler

    def start(self) -> MockModelAPI:
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> MockModelAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", type=Path, required=True, help="JSONL file of requests")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--reply", default=DEFAULT_REPLY)
    parser.add_argument("--tool-command", help="answer the first call with this shell command")
    parser.add_argument("--subagent-task", help="answer the first call by spawning a subagent")
    parser.add_argument("--mcp-tool", help="answer the first call by calling the MCP tool *__NAME")
    parser.add_argument("--mcp-input", default="{}", help="the MCP tool's input, as JSON")
    args = parser.parse_args(argv)
    mcp_tool = (args.mcp_tool, json.loads(args.mcp_input)) if args.mcp_tool else None
    api = MockModelAPI(
        args.record, args.reply, args.port, args.tool_command, args.subagent_task, mcp_tool
    )
    print(f"listening {api.url}", flush=True)
    try:
        api.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        api.httpd.server_close()


if __name__ == "__main__":
    sys.exit(main())
