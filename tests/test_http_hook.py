"""Claude Code's http prompt hook (issue 36): `zmem setup claude` wires UserPromptSubmit as an
`http` hook to a loopback port held by the keeper, with a secret only the user can read; the
resident process the keeper starts answers the POST Claude Code sends. Real processes, a real
socket, the request as Claude Code 2.1.332 sends it: the secret checked before anything runs,
a killed or idled-out resident process replaced while the request waits, the keeper brought
back by the next SessionStart, and setup's refusals with nothing written."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from zmem import MemoryStore, ports
from zmem.layout import HTTP_CONFIG, KEEPER_PID
from zmem.resident import http_hook, keeper

LESSON = "Deploys go through the staging Postgres replica first, never straight to prod."
PROMPT = "how do I deploy this to the staging postgres replica?"


def _settle(predicate, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def _post(
    port: int,
    secret: str | None,
    body: dict | str,
    path: str = "/zmem-hook/claude/UserPromptSubmit",
    method: str = "POST",
) -> tuple[int, bytes, float]:
    """What Claude Code sends: a JSON POST with the hook's headers (axios's own beside them)."""
    data = body if isinstance(body, str) else json.dumps(body)
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/plain, */*",
        "User-Agent": "claude-cli/2.1.332 (external, cli)",
    }
    if secret is not None:
        headers["Authorization"] = f"Bearer {secret}"
    started = time.perf_counter()
    conn = http.client.HTTPConnection(http_hook.LOOPBACK, port, timeout=30)
    conn.request(method, path, body=data.encode(), headers=headers)
    resp = conn.getresponse()
    got = resp.read()
    conn.close()
    return resp.status, got, time.perf_counter() - started


def _prompt(cwd: Path, prompt: str = PROMPT, session: str = "s1") -> dict:
    return {
        "session_id": session,
        "transcript_path": str(cwd / "t.jsonl"),
        "cwd": str(cwd),
        "permission_mode": "default",
        "hook_event_name": "UserPromptSubmit",
        "prompt": prompt,
    }


def _keepers(data: Path) -> list[int]:
    found = subprocess.run(
        ["pgrep", "-f", f"zmem.resident.keeper {data}"], capture_output=True, text=True
    ).stdout.split()
    return [int(p) for p in found]


def _workers(data: Path) -> list[int]:
    found = subprocess.run(
        ["pgrep", "-f", f"zmem.resident.daemon {data} --http-fd"], capture_output=True, text=True
    ).stdout.split()
    return [int(p) for p in found]


def _stats(store_path: Path) -> tuple[int, int]:
    with MemoryStore.open(store_path) as s:
        m = s.list(limit=5)[0]
        return m.retrieval_count, m.surfaced_count


def _keep(store_path: Path, monkeypatch, idle_s: str) -> tuple[Path, http_hook.HttpConfig]:
    """A store with one lesson, the http config written, a keeper started."""
    monkeypatch.setenv("ZMEM_HOOK_DAEMON", "1")
    monkeypatch.setenv("ZMEM_HOOKD_IDLE_S", idle_s)
    data = Path(os.environ["ZMEM_DATA"])
    with MemoryStore.open(store_path) as s:
        s.add(LESSON, namespace="user:global", type="lesson", signal="user")
    config = http_hook.new_config(None)
    http_hook.write_config(data, config)
    assert http_hook.start(data)
    return data, config


@pytest.fixture
def served(isolated_env, store_path, monkeypatch):
    """A keeper on a store with one lesson, running; stopped after."""
    data, config = _keep(store_path, monkeypatch, "600")
    # The keeper binds the port, then writes its pid file, then starts its resident process:
    # wait for the last, or a test reading the pid file can find none yet.
    assert _settle(lambda: http_hook.running(data) and (data / KEEPER_PID).exists())
    assert _settle(lambda: bool(_workers(data)))
    try:
        yield data, config
    finally:
        keeper.stop(data)
        _settle(lambda: not http_hook.running(data) and not _workers(data))
        for pid in _workers(data):
            os.kill(pid, signal.SIGKILL)


def _answered(status: int, body: bytes) -> str:
    assert status == 200, body
    doc = json.loads(body)
    spec = doc["hookSpecificOutput"]
    assert spec["hookEventName"] == "UserPromptSubmit"
    return spec["additionalContext"]


def test_the_post_claude_code_sends_is_answered_with_the_memory(served, tmp_path):
    data, config = served
    status, body, _ = _post(config.port, config.secret, _prompt(tmp_path))
    assert "staging Postgres replica" in _answered(status, body)
    # The same prompt again in the session: nothing new to say, an empty 2xx ({} to the host).
    status, body, _ = _post(config.port, config.secret, _prompt(tmp_path))
    assert status == 200 and body == b""
    log = (data / "zmem-bg.log").read_text()
    assert "event=UserPromptSubmit reason=injected" in log and "via=http" in log


@pytest.mark.parametrize("secret", [None, "", "x" * 43, "wrong"])
def test_without_the_secret_nothing_runs(served, tmp_path, store_path, secret):
    data, config = served
    before = _stats(store_path)
    status, body, _ = _post(config.port, secret, _prompt(tmp_path))
    assert status == 401 and body == b"{}"
    assert _stats(store_path) == before
    log = (data / "zmem-bg.log").read_text()
    assert "reason=unauthorized" in log and "reason=injected" not in log


def test_a_near_secret_is_refused_too(served, tmp_path):
    _, config = served
    status, _, _ = _post(config.port, config.secret[:-1], _prompt(tmp_path))
    assert status == 401
    status, _, _ = _post(config.port, config.secret + "x", _prompt(tmp_path))
    assert status == 401


@pytest.mark.parametrize(
    ("method", "path", "body", "expected"),
    [
        ("GET", "/zmem-hook/claude/UserPromptSubmit", "", 405),
        ("POST", "/", "{}", 404),
        ("POST", "/zmem-hook/codex/UserPromptSubmit", "{}", 404),
        ("POST", "/zmem-hook/claude/../../etc", "{}", 404),
        # Only the path setup wires as http (issue 48): the other events are command hooks.
        ("POST", "/zmem-hook/claude/SessionStart", "{}", 404),
        ("POST", "/zmem-hook/claude/Stop", "{}", 404),
    ],
)
def test_other_requests_are_refused(served, method, path, body, expected):
    _, config = served
    status, _, _ = _post(config.port, config.secret, body, path=path, method=method)
    assert status == expected


def test_bad_json_fails_open(served):
    data, config = served
    status, body, _ = _post(config.port, config.secret, "{not json")
    assert status == 200 and body == b""
    assert "reason=error" in (data / "zmem-bg.log").read_text()


def test_a_killed_resident_process_is_replaced_and_the_next_prompt_answered(served, tmp_path):
    """The answering process killed mid-session: the connection waits in the keeper's queue
    while it starts another, and the prompt gets its memory (late, never dropped)."""
    data, config = served
    assert "staging" in _answered(*_post(config.port, config.secret, _prompt(tmp_path))[:2])
    for pid in _workers(data):
        os.kill(pid, signal.SIGKILL)
    status, body, seconds = _post(config.port, config.secret, _prompt(tmp_path, session="s2"))
    assert "staging Postgres replica" in _answered(status, body)
    assert seconds < http_hook_timeout()
    assert "host=keeper event=resident reason=crashed" in (data / "zmem-bg.log").read_text()


def http_hook_timeout() -> float:
    from zmem.hosts.setup import HTTP_HOOK_TIMEOUT_S

    return float(HTTP_HOOK_TIMEOUT_S)


def test_after_an_idle_exit_the_first_prompt_starts_it_again(
    isolated_env, store_path, monkeypatch, tmp_path
):
    data, config = _keep(store_path, monkeypatch, "1")
    try:
        assert _settle(lambda: bool(_workers(data)))
        assert _settle(lambda: not _workers(data))  # idle for a second: it left
        assert http_hook.running(data)  # the keeper still holds the port
        status, body, seconds = _post(config.port, config.secret, _prompt(tmp_path))
        assert "staging Postgres replica" in _answered(status, body)
        assert seconds < http_hook_timeout()
    finally:
        keeper.stop(data)
        _settle(lambda: not http_hook.running(data))


def test_the_keeper_leaves_when_setup_no_longer_wires_it(served):
    """`setup claude --remove` (or a switch to command hooks) deletes the config: the resident
    process sees it within a second of idle, and the keeper leaves after it."""
    data, config = served
    http_hook.config_path(data).unlink()
    # Not `http_hook.running`: it reads the port from the config just deleted, so it says
    # False at once. The port itself is the keeper's last hold (its pid file goes first).
    assert _settle(lambda: not ports.in_use(config.port) and not _workers(data), timeout=20)
    assert not (data / "zmem-hookd-keeper.pid").exists()


def test_the_next_session_start_brings_a_killed_keeper_back(served, tmp_path):
    """The keeper killed outright (and its resident process): the prompt after it would be
    refused, so every Claude Code SessionStart (a command hook: http cannot run there) starts
    it again, before the session's first prompt."""
    data, config = served
    pid = int((data / "zmem-hookd-keeper.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    for worker in _workers(data):
        os.kill(worker, signal.SIGKILL)
    assert _settle(lambda: not http_hook.running(data))
    hook = Path(__file__).resolve().parents[1] / "src" / "zmem" / "plugin" / "hooks"
    start = {"session_id": "s3", "cwd": str(tmp_path), "hook_event_name": "SessionStart"}
    subprocess.run(
        [sys.executable, "-S", str(hook / "zmem_hook.py"), "SessionStart", "--host", "claude"],
        input=json.dumps(start).encode(),
        capture_output=True,
        timeout=30,
        check=True,
    )
    assert _settle(lambda: http_hook.running(data))
    # (SessionStart showed the lesson to s3 already: another session asks.)
    status, body, _ = _post(config.port, config.secret, _prompt(tmp_path, session="s5"))
    assert "staging Postgres replica" in _answered(status, body)


def test_the_keepers_resident_process_takes_the_socket_over(
    isolated_env, store_path, monkeypatch, tmp_path
):
    """A resident process a command hook started earlier leaves once the keeper's own serves
    the data dir (one warm process per data dir, not two), and command hooks reach the
    keeper's through the socket path."""
    from zmem.resident import code, wire

    monkeypatch.setenv("ZMEM_HOOK_DAEMON", "1")
    data = Path(os.environ["ZMEM_DATA"])
    with MemoryStore.open(store_path) as s:
        s.add(LESSON, namespace="user:global", type="lesson", signal="user")
    sock = data / "zmem-hookd.sock"
    env = code.env_for_this_install()
    plain = subprocess.Popen([sys.executable, "-m", "zmem.resident.daemon", str(data)], env=env)
    try:
        assert _settle(sock.exists)
        config = http_hook.new_config(None)
        http_hook.write_config(data, config)
        assert http_hook.start(data)
        assert plain.wait(timeout=20) == 3  # handed over
        pkg = str(Path(http_hook.__file__).parents[1].resolve())
        payload = json.dumps(_prompt(tmp_path, session="s4")).encode()
        request = wire.encode_request("claude", "UserPromptSubmit", pkg, payload)
        state, body = wire.ask(str(sock), request, 10.0)
        assert state == wire.ANSWERED and b"staging Postgres replica" in body
        assert _workers(data)
    finally:
        if plain.poll() is None:
            plain.kill()
        keeper.stop(data)
        _settle(lambda: not http_hook.running(data))


# ---- setup ------------------------------------------------------------------------------------


@pytest.fixture
def home(isolated_env, monkeypatch) -> Path:
    home = isolated_env / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def test_setup_claude_wires_the_prompt_as_an_http_hook(home, run_cli, monkeypatch):
    monkeypatch.setenv("ZMEM_HOOK_DAEMON", "1")
    data = Path(os.environ["ZMEM_DATA"])
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    mine = '{\n  "theme": "dark"\n}\n'
    settings.write_text(mine)
    settings.chmod(0o644)
    try:
        done = run_cli("setup", "claude", "--no-model", "--json")
        assert done.exit_code == 0, done.output
        config = http_hook.load_config(data)
        assert config is not None
        doc = json.loads(settings.read_text())
        [entry] = doc["hooks"]["UserPromptSubmit"]
        [handler] = entry["hooks"]
        assert handler == {
            "type": "http",
            "url": f"http://127.0.0.1:{config.port}/zmem-hook/claude/UserPromptSubmit",
            "headers": {"Authorization": f"Bearer {config.secret}"},
            "timeout": 10,
        }
        # The other events stay commands; Claude Code skips http hooks on SessionStart.
        assert doc["hooks"]["SessionStart"][0]["hooks"][0]["type"] == "command"
        # The secret is readable by the user alone, in both places.
        assert stat.S_IMODE(settings.stat().st_mode) == 0o600
        assert stat.S_IMODE(http_hook.config_path(data).stat().st_mode) == 0o600
        assert _settle(lambda: http_hook.running(data))  # warm before the first prompt
        # "keeper running" is the resident process answering the identity question, which
        # it can do once started (bound is not yet answering).
        assert _settle(lambda: http_hook.challenge(config) is True)
        doctor = json.loads(run_cli("doctor", "--format", "json").output)
        wiring = next(c for c in doctor["checks"] if c["check"] == "host-wiring")
        assert f"prompt: http hook on 127.0.0.1:{config.port}, keeper running" in wiring["detail"]
        again = json.loads(run_cli("setup", "claude", "--no-model", "--json").output)
        assert again["written"] == []  # same port, same secret: nothing to rewrite
        done = run_cli("setup", "claude", "--remove")
        assert done.exit_code == 0, done.output
        assert settings.read_text() == mine
        assert not http_hook.config_path(data).exists()
        # The config is gone, so `running` cannot name the port: ask the port itself.
        assert _settle(lambda: not ports.in_use(config.port) and not _workers(data), timeout=45)
    finally:
        keeper.stop(data)


def test_setup_claude_with_command_prompt_hook(home, run_cli, monkeypatch):
    monkeypatch.setenv("ZMEM_HOOK_DAEMON", "1")
    data = Path(os.environ["ZMEM_DATA"])
    done = run_cli("setup", "claude", "--no-model", "--prompt-hook", "command")
    assert done.exit_code == 0, done.output
    doc = json.loads((home / ".claude" / "settings.json").read_text())
    assert doc["hooks"]["UserPromptSubmit"][0]["hooks"][0]["type"] == "command"
    assert not http_hook.config_path(data).exists() and not http_hook.running(data)


def test_with_the_resident_process_off_the_prompt_hook_is_a_command(home, run_cli):
    """ZMEM_HOOK_DAEMON=0 (this suite's default) turns the resident process off: nothing
    would answer an http hook, so setup wires a command, and refuses to be told otherwise."""
    data = Path(os.environ["ZMEM_DATA"])
    done = run_cli("setup", "claude", "--no-model")
    assert done.exit_code == 0, done.output
    doc = json.loads((home / ".claude" / "settings.json").read_text())
    assert doc["hooks"]["UserPromptSubmit"][0]["hooks"][0]["type"] == "command"
    before = (home / ".claude" / "settings.json").read_text()
    done = run_cli("setup", "claude", "--no-model", "--prompt-hook", "http")
    assert done.exit_code == 2
    assert "ZMEM_HOOK_DAEMON=0" in done.output and len(done.output.strip().splitlines()) == 1
    assert (home / ".claude" / "settings.json").read_text() == before
    assert not http_hook.config_path(data).exists()


@pytest.mark.parametrize("host", ["codex", "zcode"])
def test_other_hosts_refuse_an_http_prompt_hook(home, run_cli, monkeypatch, host):
    monkeypatch.setenv("ZMEM_HOOK_DAEMON", "1")
    monkeypatch.setenv("CODEX_HOME", str(home / ".codex"))
    done = run_cli("setup", host, "--no-model", "--prompt-hook", "http")
    assert done.exit_code == 2 and "command hooks only" in done.output
    assert not list(home.rglob("*.json"))


def test_a_broken_config_file_is_not_ours(isolated_env, monkeypatch):
    data = Path(os.environ["ZMEM_DATA"])
    data.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("ZMEM_HOOK_DAEMON", "1")  # the suite turns it off: start would stop there
    bad_secret = '{"port": 8080, "secret": "' + "x" * 40 + '\\r\\nX-Evil: 1"}'
    for text in ("", "{", '{"port": 0, "secret": "' + "x" * 43 + '"}', '{"port": 80}', "[]",
                 bad_secret):  # fmt: skip
        assert http_hook.parse_config(text) is None
        (data / HTTP_CONFIG).write_text(text)
        assert http_hook.load_config(data) is None
        assert not http_hook.start(data)  # no keeper for a config that is not ours
    assert not (data / KEEPER_PID).exists()


def test_a_resident_process_that_keeps_dying_is_not_restarted_in_a_loop(isolated_env):
    """A broken install: every resident process dies at once. With a prompt left in the port's
    queue the keeper would restart it as fast as it dies; after five crashes it pauses."""
    import threading

    data = Path(os.environ["ZMEM_DATA"])
    config = http_hook.new_config(None)
    http_hook.write_config(data, config)
    k = keeper.Keeper(data, config)
    starts: list[float] = []

    def dies() -> int:
        starts.append(time.monotonic())
        return 1

    k._run_worker = dies  # type: ignore[method-assign]
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    waiting = socket.create_connection((http_hook.LOOPBACK, config.port))  # a prompt, queued
    timer = threading.Timer(2.0, lambda: setattr(k, "stopping", True))
    timer.start()
    try:
        k.run()
    finally:
        timer.cancel()
        waiting.close()
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert len(starts) == keeper.CRASHES_BEFORE_WAITING
    assert "reason=crashed" in (data / "zmem-bg.log").read_text()


def test_a_trickling_client_does_not_hold_the_prompt(served, tmp_path):
    """The port is open to every local user. One who connects and sends a byte a second gets
    at most the request deadline (2 s in all, not per read) before the resident process drops
    it, and the user's own prompt behind it is answered."""
    import threading

    _, config = served
    slow = socket.create_connection((http_hook.LOOPBACK, config.port))
    stop = threading.Event()

    def trickle() -> None:
        try:
            for ch in b"POST /zmem-hook/claude/UserPromptSubmit HTTP/1.1\r\nHost: x\r\n":
                if stop.wait(0.5):
                    return
                slow.send(bytes([ch]))
        except OSError:
            return  # dropped: what should happen

    sender = threading.Thread(target=trickle, daemon=True)
    sender.start()
    time.sleep(0.3)  # it is being served first
    try:
        status, body, seconds = _post(config.port, config.secret, _prompt(tmp_path, session="t"))
        assert "staging Postgres replica" in _answered(status, body)
        assert seconds < 2 * http_hook.READ_TIMEOUT_S + 1
    finally:
        stop.set()
        slow.close()


def test_a_port_another_program_took_is_moved_by_setup_and_named_by_doctor(
    home, run_cli, monkeypatch
):
    """After a reboot another program may listen on the configured port before any keeper
    does; it would get the prompts and the secret. doctor says so (warn), and setup moves the
    hook to a free port with a new secret."""
    monkeypatch.setenv("ZMEM_HOOK_DAEMON", "1")
    data = Path(os.environ["ZMEM_DATA"])
    first = http_hook.new_config(None)
    http_hook.write_config(data, first)
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    squatter.bind((http_hook.LOOPBACK, first.port))
    squatter.listen()
    try:
        assert http_hook.held_by_another(data, first.port)
        done = run_cli("setup", "claude", "--no-model", "--json")
        assert done.exit_code == 0, done.output
        moved = http_hook.load_config(data)
        assert moved is not None and moved.port != first.port and moved.secret != first.secret
        handler = json.loads((home / ".claude" / "settings.json").read_text())["hooks"][
            "UserPromptSubmit"][0]["hooks"][0]  # fmt: skip
        assert f":{moved.port}/" in handler["url"] and moved.secret in handler["headers"][
            "Authorization"]  # fmt: skip
        assert _settle(lambda: http_hook.running(data) and not http_hook.held_by_another(
            data, moved.port))  # fmt: skip
    finally:
        squatter.close()
        keeper.stop(data)
        _settle(lambda: not _workers(data))


def test_doctor_fails_when_the_wired_port_is_taken(home, run_cli, monkeypatch):
    """A program on the hook's port that cannot answer the identity question (it never
    read the secret) gets the prompts and the secret: doctor fails (issue 48), naming it."""
    monkeypatch.setenv("ZMEM_HOOK_DAEMON", "1")
    data = Path(os.environ["ZMEM_DATA"])
    try:
        assert run_cli("setup", "claude", "--no-model").exit_code == 0
        config = http_hook.load_config(data)
        assert config is not None and _settle(lambda: http_hook.running(data))
    finally:
        keeper.stop(data)
    assert _settle(lambda: not http_hook.running(data) and not _workers(data))
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    squatter.bind((http_hook.LOOPBACK, config.port))
    squatter.listen()
    try:
        doctor = json.loads(run_cli("doctor", "--format", "json").output)
    finally:
        squatter.close()
    wiring = next(c for c in doctor["checks"] if c["check"] == "host-wiring")
    assert wiring["status"] == "fail"
    assert f"127.0.0.1:{config.port}, held by another program" in wiring["detail"]
    assert "cannot prove" in wiring["detail"]


def test_a_resident_process_serves_only_the_port_the_config_still_names(isolated_env):
    """setup moved the hook to another port (and secret) after the keeper bound this one: the
    new secret must not open the old port, so that process takes no http config at all."""
    from zmem.resident import daemon

    data = Path(os.environ["ZMEM_DATA"])
    data.mkdir(parents=True, exist_ok=True)
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        config = http_hook.new_config(None)
        http_hook.write_config(data, http_hook.HttpConfig(port, config.secret))
        assert daemon._config_of(bound, data) == http_hook.HttpConfig(port, config.secret)
        http_hook.write_config(data, http_hook.HttpConfig(port + 1, config.secret))
        assert daemon._config_of(bound, data) is None


def test_asking_whether_the_port_is_held_connects_to_no_one(isolated_env):
    """running() is asked at every SessionStart. A test connection was accepted by the
    resident process the keeper hands the socket to: it woke, read nothing and refused a
    request. A bind tells the same without touching the listener."""
    data = Path(os.environ["ZMEM_DATA"])
    config = http_hook.new_config(None)
    http_hook.write_config(data, config)
    assert not http_hook.running(data)  # nobody holds the port
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.bind((http_hook.LOOPBACK, config.port))
        listener.listen(8)
        listener.setblocking(False)
        assert http_hook.running(data)
        with pytest.raises(BlockingIOError):
            listener.accept()  # no connection is waiting: running() made none
    finally:
        listener.close()
    assert not http_hook.running(data)
