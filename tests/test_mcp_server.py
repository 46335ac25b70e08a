"""`zmem mcp` through the official SDK client, over stdio and over streamable HTTP, the server
really started as a subprocess: the tool list, results equal to the CLI's --json, error results,
bearer tokens (operator, scoped, wrong, missing), the scoped-token rules end to end, startup
refusals (exit 2, nothing created), and a stdout that carries nothing but the protocol."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp")

import httpx2  # noqa: E402
from mcp import Client, MCPError, StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

ZMEM = Path(sys.executable).with_name("zmem")
OPERATOR = "operator-token-0123456789abcdef"
SCOPED = "scoped-token-0123456789abcdef"


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZMEM_")}
    env.update(
        ZMEM_STORE=str(tmp_path / "store.sqlite"),
        ZMEM_DATA=str(tmp_path / "data"),
        ZMEM_EMBED_PROFILE="fake",
        **extra,
    )
    return env


def text(result) -> dict:
    return json.loads(result.content[0].text)


# ---- stdio ---------------------------------------------------------------------------------


def test_stdio_round_trip_matches_the_cli(tmp_path, run_cli):
    env = env_for(tmp_path)

    async def session():
        params = StdioServerParameters(command=str(ZMEM), args=["mcp"], env=env)
        async with Client(params) as c:
            assert "recall" in (c.instructions or "") or "ZMem" in (c.instructions or "")
            names = {t.name for t in (await c.list_tools()).tools}
            added = await c.call_tool(
                "add",
                {"content": "Run make migrate before the integration tests in shop",
                 "namespace": "project:shop", "type": "convention", "signal": "user"},
            )  # fmt: skip
            recalled = await c.call_tool(
                "recall", {"query": "make migrate integration tests", "namespace": "project:shop"}
            )
            bad = await c.call_tool("recall", {"query": "x", "limit": "many"})
            unknown = await c.call_tool("drop_table", {})
            start = await c.call_tool("session_start", {"namespace": "project:shop"})
            return names, added, recalled, bad, unknown, start

    names, added, recalled, bad, unknown, start = asyncio.run(session())
    assert {"add", "recall", "search", "recent", "get", "update", "invalidate", "supersede",
            "links", "contradict", "resolve", "stats", "session_start",
            "session_end"} == names  # fmt: skip
    assert not added.is_error and text(added)["result"] == "stored"
    memory_id = text(added)["id"]
    assert not recalled.is_error and recalled.structured_content == text(recalled)
    assert [r["id"] for r in text(recalled)["results"]] == [memory_id]
    # The CLI's --json document for the same read (one more retrieval since: compare the rows).
    os.environ["ZMEM_STORE"] = env["ZMEM_STORE"]
    cli = json.loads(
        run_cli(
            "recall",
            "--query",
            "make migrate integration tests",
            "--namespace",
            "project:shop",
            "--json",
        ).output  # fmt: skip
    )
    assert set(cli) == set(text(recalled)) and cli["count"] == text(recalled)["count"]
    assert text(recalled)["results"][0]["taint"] == "untrusted_tool"  # MCP write default
    assert bad.is_error and text(bad)["error"] == "invalid_arguments"
    assert unknown.is_error and text(unknown)["error"] == "unknown_tool"
    assert not start.is_error and text(start)["ids"] == [memory_id]


def test_stdio_stdout_carries_only_the_protocol(tmp_path):
    """A raw older-handshake session, as Claude Code's stdio client speaks it."""
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "stats", "arguments": {}}},
    ]  # fmt: skip
    stdin = "".join(json.dumps(m) + "\n" for m in messages)
    proc = subprocess.Popen(
        [str(ZMEM), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env_for(tmp_path),
        text=True,
    )
    lines = []
    proc.stdin.write(stdin)
    proc.stdin.flush()
    deadline = time.time() + 30
    while len(lines) < 2 and time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(json.loads(line))  # every stdout line is a JSON-RPC message
    proc.stdin.close()  # the host hangs up: the server must exit 0
    rest, err = proc.stdout.read(), proc.stderr.read()
    proc.wait(timeout=30)
    assert proc.returncode == 0, err
    assert all(json.loads(x) for x in rest.splitlines() if x.strip())
    assert lines[0]["result"]["protocolVersion"] == "2025-06-18"
    stats = json.loads(lines[1]["result"]["content"][0]["text"])
    assert stats["live"] == 0 and "store_path" in stats


# ---- HTTP ----------------------------------------------------------------------------------


class HttpServer:
    def __init__(self, tmp_path: Path, **env: str):
        self.proc = subprocess.Popen(
            [str(ZMEM), "mcp", "--http", "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env_for(tmp_path, **env),
            text=True,
        )
        self.url = None
        deadline = time.time() + 60
        self.log: list[str] = []
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            if "listening on" in line:
                self.url = line.rsplit(" ", 1)[1].strip()
                break
        assert self.url, "".join(self.log)

    def stop(self) -> tuple[int, str, str]:
        self.proc.terminate()
        out, err = self.proc.communicate(timeout=30)
        return self.proc.returncode, out, "".join(self.log) + err


@pytest.fixture
def http_server(tmp_path):
    token_file = tmp_path / "scoped.json"
    token_file.write_text(json.dumps({"token": SCOPED, "namespaces": ["project:mine"]}))
    server = HttpServer(tmp_path, ZMEM_MCP_TOKEN=OPERATOR, ZMEM_MCP_TOKEN_FILE=str(token_file))
    yield server
    code, out, err = server.stop()
    assert code == 0 and out == ""
    assert OPERATOR not in err and SCOPED not in err  # never a token in a log


async def _calls(url: str, token: str | None, calls: list[tuple[str, dict]]):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers) as http:
        async with Client(streamable_http_client(url, http_client=http)) as c:
            return [await c.call_tool(name, args) for name, args in calls]


def run_calls(url, token, calls):
    return asyncio.run(_calls(url, token, calls))


def test_http_operator_and_scoped_tokens(http_server):
    url = http_server.url
    mine = {"content": "mine builds with bazel", "namespace": "project:mine", "type": "fact",
            "signal": "user"}  # fmt: skip
    victim = {"content": "victim zanzibar secret build flags", "namespace": "project:victim",
              "type": "fact", "signal": "user"}  # fmt: skip
    added = run_calls(url, OPERATOR, [("add", mine), ("add", victim)])
    assert not any(r.is_error for r in added)
    victim_id = text(added[1])["id"]
    results = run_calls(
        url,
        SCOPED,
        [
            ("recall", {"query": "bazel build", "namespace": "project:mine"}),
            ("recall", {"query": "zanzibar build", "namespace": "project:victim"}),
            ("recall", {"query": "zanzibar build"}),
            ("get", {"id": victim_id}),
            ("add", {**victim, "content": "planted"}),
            ("stats", {}),
            ("supersede", {"id": victim_id[:8]}),
        ],
    )
    assert not results[0].is_error and text(results[0])["count"] == 1
    assert [text(r)["error"] for r in results[1:]] == [
        "namespace_not_allowed", "namespace_not_allowed", "not_found",
        "namespace_not_allowed", "namespace_not_allowed", "not_found"]  # fmt: skip
    assert all("zanzibar" not in r.content[0].text for r in results)
    # Nothing foreign was written or tombstoned.
    after = run_calls(url, OPERATOR, [("get", {"id": victim_id}), ("stats", {})])
    assert text(after[0])["superseded_at"] is None and text(after[1])["total"] == 2


@pytest.mark.parametrize("token", [None, "wrong-token", OPERATOR + "x", SCOPED[:-1]])
def test_http_refuses_a_missing_or_wrong_token(http_server, token):
    with pytest.raises(BaseException) as caught:  # an ExceptionGroup holding the MCPError
        run_calls(http_server.url, token, [("stats", {})])

    def flatten(exc):
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                yield from flatten(inner)
        else:
            yield exc

    errors = list(flatten(caught.value))
    assert any(isinstance(e, MCPError) and "Unauthorized" in str(e) for e in errors), errors
    raw = httpx2.post(http_server.url, json={}, headers={"Authorization": f"Bearer {token}"})
    assert raw.status_code == 401 and raw.headers["www-authenticate"].startswith("Bearer")
    assert "/.well-known" not in raw.text


def test_http_without_a_configured_token_requires_the_data_dirs_own(tmp_path):
    """Loopback is open to every user of the machine (issue 48): with no token configured,
    the server requires the data dir's own, which `--print-token` shows and only this user can
    read; a request without it is refused and runs nothing."""
    import stat

    server = HttpServer(tmp_path)
    try:
        import urllib.error
        import urllib.request

        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "x", "version": "1"}}}  # fmt: skip
        request = urllib.request.Request(
            server.url, data=json.dumps(init).encode(),
            headers={"Content-Type": "application/json",
                     "Accept": "application/json, text/event-stream"},
        )  # fmt: skip
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 401
        printed = subprocess.run(
            [str(ZMEM), "mcp", "--print-token"], env=env_for(tmp_path), capture_output=True,
            text=True,
        )  # fmt: skip
        token = printed.stdout.strip()
        assert printed.returncode == 0 and len(token) >= 32
        (result,) = run_calls(server.url, token, [("stats", {})])
        assert not result.is_error and text(result)["live"] == 0
    finally:
        code, out, err = server.stop()
    assert code == 0 and out == "" and token not in err
    token_file = tmp_path / "data" / "mcp-http-token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600


# ---- startup refusals ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "token_file", "message"),
    [
        (["--http", "--host", "0.0.0.0", "--port", "0"], None, "not a loopback address"),
        (["--port", "9000"], None, "--http only"),
        (["--stdio", "--http"], None, "choose one"),
        (["--http", "--port", "0"], '{"token": "t", "namespaces": []}', "non-empty list"),
        (["--http", "--port", "0"], '{"token": "t", "namespaces": ["global"]}', "global"),
        (["--http", "--port", "0"], '{"token": "secret-value", ', "not valid JSON"),
        ([], '{"token": "secret-value", "namespaces": ["project:a"], "x": 1}', "unknown key"),
    ],
)
def test_startup_refusals_exit_2_and_create_nothing(tmp_path, args, token_file, message):
    extra = {}
    if token_file is not None:
        (tmp_path / "tok.json").write_text(token_file)
        extra["ZMEM_MCP_TOKEN_FILE"] = str(tmp_path / "tok.json")
    proc = subprocess.run(
        [str(ZMEM), "mcp", *args],
        capture_output=True,
        text=True,
        env=env_for(tmp_path, **extra),
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "secret-value" not in lines[0]
    assert proc.stdout == ""
    assert not (tmp_path / "store.sqlite").exists()


@pytest.mark.parametrize(
    ("env", "token_file"),
    [
        ({"ZMEM_MCP_TOKEN": "x"}, None),
        ({"ZMEM_MCP_TOKEN": "a" * 40}, None),  # long, but one character
        ({"ZMEM_MCP_TOKEN": "short-but-mixed-12"}, None),
        ({}, '{"token": "abc123", "namespaces": ["project:a"]}'),
    ],
    ids=["one character", "one repeated character", "under 24", "weak scoped file"],
)
def test_a_weak_token_cannot_guard_a_non_loopback_listener(tmp_path, env, token_file):
    """Issue 34: a one-character ZMEM_MCP_TOKEN was enough to bind 0.0.0.0."""
    extra = dict(env)
    if token_file is not None:
        (tmp_path / "tok.json").write_text(token_file)
        extra["ZMEM_MCP_TOKEN_FILE"] = str(tmp_path / "tok.json")
    proc = subprocess.run(
        [str(ZMEM), "mcp", "--http", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True, text=True, env=env_for(tmp_path, **extra), timeout=60,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "weak token" in line and "at least 24 characters" in line
    assert env.get("ZMEM_MCP_TOKEN", "@@") not in line and "abc123" not in line
    assert not (tmp_path / "store.sqlite").exists()


def test_the_start_says_how_a_client_gets_the_token(tmp_path):
    log = tmp_path / "stderr.txt"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [str(ZMEM), "mcp", "--http", "--port", "0"], env=env_for(tmp_path),
            stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
    try:
        deadline = time.time() + 60
        while time.time() < deadline and "--print-token" not in log.read_text():
            time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    said = log.read_text()
    assert "listening on" in said and "`zmem mcp --print-token` prints it" in said
    assert local_token(tmp_path) not in said


def local_token(tmp_path: Path) -> str:
    """The data dir's own token, as `zmem mcp --print-token` shows it to a client."""
    done = subprocess.run([str(ZMEM), "mcp", "--print-token"], env=env_for(tmp_path),
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_running_server_serves_the_restored_store(tmp_path):
    server = HttpServer(tmp_path)
    token = local_token(tmp_path)
    try:
        env = env_for(tmp_path)
        first = {"content": "before the snapshot: use pnpm", "namespace": "project:r",
                 "type": "fact", "signal": "user"}  # fmt: skip
        (added,) = run_calls(server.url, token, [("add", first)])
        assert not added.is_error
        done = subprocess.run([str(ZMEM), "backup", "--json"], env=env, capture_output=True,
                              text=True, timeout=60)  # fmt: skip
        snap = json.loads(done.stdout)["path"]
        later = {**first, "content": "after the snapshot: use yarn"}
        run_calls(server.url, token, [("add", later)])
        done = subprocess.run([str(ZMEM), "restore", "--from", snap, "--force"], env=env,
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr
        (stats,) = run_calls(server.url, token, [("stats", {})])
        assert text(stats)["live"] == 1
    finally:
        code, out, _ = server.stop()
    assert code == 0


# ---- the handshake does not wait for the model ---------------------------------------------


def test_the_handshake_and_tool_list_do_not_wait_for_the_warm_up(tmp_path, monkeypatch):
    """`zmem mcp` answers initialize and tools/list while the store warms up (the model, the
    vector copy) on its own thread; a tool call waits for the warm-up and then answers, and the
    warm-up runs once."""
    import threading

    from zmem import MemoryStore
    from zmem.access import UNSCOPED
    from zmem.agent_tools.surface import ToolSurface
    from zmem.mcp_server.server import Worker, Workspace, build

    monkeypatch.setenv("ZMEM_EMBED_PROFILE", "fake")
    monkeypatch.setenv("ZMEM_DATA", str(tmp_path / "data"))
    store = MemoryStore.open(tmp_path / "store.sqlite", create=True)
    store.add("Run make migrate before the integration tests in shop", namespace="project:shop",
              type="convention", signal="user")  # fmt: skip
    release, warms = threading.Event(), []
    real_warm_up = store.warm_up

    def held_warm_up() -> None:
        warms.append(1)
        assert release.wait(30)
        real_warm_up()

    monkeypatch.setattr(store, "warm_up", held_warm_up)
    worker = Worker(ToolSurface(store))
    workspace = Workspace("project:shop", None, ask_roots=False)
    server = build(worker, local_scope=UNSCOPED, http=False, workspace=workspace)
    worker.warm_up_in_background()

    async def session():
        async with Client(server) as c:
            names = {t.name for t in (await c.list_tools()).tools}  # answered while held
            assert "recall" in names and not release.is_set()
            threading.Timer(0.3, release.set).start()
            recalled = await c.call_tool("recall", {"query": "integration tests migrate"})
            assert release.is_set()  # the call waited for the warm-up
            return recalled

    recalled = asyncio.run(session())
    worker.settle()
    assert not recalled.is_error and len(text(recalled)["results"]) == 1
    assert warms == [1]
    store.close()
