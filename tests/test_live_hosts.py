"""Live host runs: the real Claude Code and Codex CLIs (their npm packages) load ZMem's plugin
from this checkout and run sessions offline against scripts/mock_model_api.py, a local stand-in
for the model API. Each test reads what the hooks logged in $ZMEM_DATA/zmem-bg.log and what
context reached the model (the stand-in records every request body).

Skipped unless the CLIs are installed (docs/host-verification.md):

    npm install --prefix ~/.cache/zmem-host-clis \\
        @anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0

or point ZMEM_HOST_CLI_DIR at another npm prefix. Every session runs in a temporary HOME (and
CODEX_HOME) with a seeded store in a temporary ZMEM_DATA; nothing leaves the machine. The
plugin's venv is this test run's venv, linked where the hook commands look for it
(${CLAUDE_PLUGIN_DATA}/venv); a `python3` shim first on PATH records any call of the first-run
bootstrap, which must not happen."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import load_script

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "src" / "zmem" / "plugin"  # the plugin tree the package carries
# `make test` installs exactly these (the Makefile reads the same file).
PINNED = tuple((ROOT / "tests" / "host-clis.txt").read_text().split())
CLI_DIR = Path(os.environ.get("ZMEM_HOST_CLI_DIR") or "~/.cache/zmem-host-clis").expanduser()
INSTALL = f"npm install --prefix {CLI_DIR} {' '.join(PINNED)}"
VENV = Path(sys.prefix) if sys.prefix != sys.base_prefix else None
NODE = shutil.which("node")

NS = "project:github.com/acme/widget"
MARKER = "zmem-live-marker-7731"
LESSON = f"Run pytest -x before git push: CI takes 20 minutes ({MARKER})."
# A hazard only the tool command reaches (it shares no word with PROMPT): the prompt hook
# injects LESSON, so PreToolUse, which skips rows the context holds (issue 33), shows this one.
PRETOOL_MARKER = "zmem-live-pretool-5150"
PRETOOL_ROW = f"Feature branches on origin need the ci-skip label removed ({PRETOOL_MARKER})."
# Newer rows that fill SessionStart's recent slots, so the prompt hook is the one that brings
# LESSON (a row SessionStart showed is in the context already and is not injected again).
START_MARKER = "zmem-live-start-2208"
START_ROWS = (
    "The staging dashboard lives at dash.internal.example",
    "Invoices are generated nightly by the billing cron job",
    "The design system keeps its colour tokens in tokens.json",
    "Support rotations change every Monday at 09:00 UTC",
    "The mobile app caches avatars for seven days",
)
LATER_ROWS = (
    "Translations are exported to the vendor every Friday",
    "The analytics warehouse refreshes its views at midnight",
    "Screenshots for the store listing live in assets/store",
    "On-call pages go to the incident channel first",
    "The marketing site is a separate repository",
)
GLOBAL_ROW = "Use rg instead of grep -r when searching code."
SKILL_LINE = "# Memory skill: invoke "
PRETOOL = "Before this tool call, ZMem recalled"
TOOL_COMMAND = "echo git push origin feature"
SUBAGENT_TASK = "Find out how to run pytest before git push in this repo."
PROMPT = "How should I run pytest before git push?"
MARKETPLACE = "zmem-live"
SESSION_TIMEOUT = 180


def _cli(name: str) -> Path | None:
    for path in (CLI_DIR / "node_modules" / ".bin" / name, CLI_DIR / name):
        if path.exists() and os.access(path, os.X_OK):
            return path
    return None


CLAUDE = _cli("claude")
CODEX = _cli("codex")


mock_api = load_script("mock_model_api")

_NO_VENV = "the hooks need this run's venv (run the tests from .venv: make test)"
needs_claude = pytest.mark.skipif(
    CLAUDE is None or VENV is None,
    reason=_NO_VENV if CLAUDE else f"no claude CLI in {CLI_DIR}; install it: {INSTALL}",
)
needs_codex = pytest.mark.skipif(
    CODEX is None or NODE is None or VENV is None,
    reason=(
        f"no codex CLI in {CLI_DIR}; install it: {INSTALL}"
        if CODEX is None
        else "the codex CLI needs node on PATH"
        if NODE is None
        else _NO_VENV
    ),
)


class World:
    """One throwaway machine: HOME, a checkout with a GitHub remote and an AGENTS.md, a data
    dir seeded through the real `zmem add`, and a python3 shim that records bootstrap calls."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.home = base / "home"
        self.home.mkdir(parents=True)
        self.data = base / "data"
        self.project = base / "widget"
        (self.project / ".git").mkdir(parents=True)
        (self.project / ".git" / "config").write_text(
            '[core]\n\tbare = false\n[remote "origin"]\n\turl = git@github.com:acme/widget.git\n'
        )
        (self.project / "AGENTS.md").write_text("Project rule: run make lint before committing.\n")
        self.shims = base / "shims"
        self.shims.mkdir()
        self.bootstrap_calls = base / "bootstrap-calls.txt"
        shim = self.shims / "python3"
        shim.write_text(f'#!/bin/sh\necho "$@" >> "{self.bootstrap_calls}"\n')
        shim.chmod(0o755)
        self.zmem(
            "add", "--namespace", NS, "--type", "lesson", "--signal", "test", "--content", LESSON
        )
        self.zmem(
            "add", "--namespace", NS, "--type", "constraint", "--signal", "user", "--content",
            PRETOOL_ROW,
        )  # fmt: skip
        self.zmem(
            "add", "--namespace", "user:global", "--type", "convention", "--signal", "user",
            "--content", GLOBAL_ROW,
        )  # fmt: skip
        self.bury(START_ROWS)

    def bury(self, rows: tuple[str, ...]) -> None:
        """Newer facts in the project: what SessionStart's recent rows show."""
        for text in rows:
            self.zmem("add", "--namespace", NS, "--type", "fact", "--signal", "user",
                      "--content", f"{text} ({START_MARKER}).")  # fmt: skip

    def env(self, **extra: str) -> dict[str, str]:
        path = [str(self.shims)]
        if NODE:
            path.append(str(Path(NODE).parent))
        path.append(os.environ.get("PATH") or "/usr/bin:/bin")
        env = {
            "PATH": os.pathsep.join(path),
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "ZMEM_DATA": str(self.data),
            "ZMEM_EMBED_PROFILE": "fake",
            "ZMEM_HOOK_DAEMON": "0",
            # A detached upkeep child could log after a test cleared the log.
            "ZMEM_SESSION_UPKEEP": "0",
        }
        env.update(extra)
        return env

    def zmem(self, *args: str) -> None:
        assert VENV is not None
        done = subprocess.run(
            [str(VENV / "bin" / "python"), "-c", "from zmem.cli import main; main()", *args],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr

    def link_venv(self, plugin_data: Path) -> None:
        """Where the hook commands look for the interpreter: ${CLAUDE_PLUGIN_DATA}/venv."""
        assert VENV is not None
        plugin_data.mkdir(parents=True, exist_ok=True)
        link = plugin_data / "venv"
        if not link.exists():
            link.symlink_to(VENV, target_is_directory=True)

    def log(self) -> list[dict[str, str]]:
        path = self.data / "zmem-bg.log"
        lines = path.read_text().splitlines() if path.exists() else []
        return [dict(p.split("=", 1) for p in line.split()[2:] if "=" in p) for line in lines]

    def logged(self, host: str, event: str) -> list[dict[str, str]]:
        return [r for r in self.log() if r.get("host") == host and r.get("event") == event]

    @contextlib.contextmanager
    def resident(self, warm: dict[str, str]) -> Iterator[None]:
        """A resident process on this data dir running the checkout's code (as Claude Code's
        plugin started from the checkout would), killed on exit."""
        assert VENV is not None
        proc = subprocess.Popen(
            [str(VENV / "bin" / "python"), "-m", "zmem.resident.daemon", str(self.data)],
            env=self.env(**warm, PYTHONPATH=str(ROOT / "src")),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            sock = self.data / "zmem-hookd.sock"
            for _ in range(300):
                if sock.exists():
                    break
                time.sleep(0.05)
            assert sock.exists(), "the resident process did not start"
            yield
        finally:
            proc.kill()
            proc.wait(timeout=10)

    def clear_log(self) -> None:
        (self.data / "zmem-bg.log").unlink(missing_ok=True)


class Session:
    def __init__(self, world: World, done: subprocess.CompletedProcess, requests: list[dict]):
        self.world = world
        self.done = done
        self.requests = [r for r in requests if r["method"] == "POST"]

    def bodies(self) -> list[str]:
        return [json.dumps(r["body"], ensure_ascii=False) for r in self.requests]

    def turn(self, prompt: str = PROMPT) -> list[str]:
        """The bodies of the model calls of the user's turn (a host may make other calls)."""
        return [b for b in self.bodies() if prompt in b]

    def turn_requests(self, prompt: str = PROMPT) -> list[dict]:
        return [r for r in self.requests if prompt in json.dumps(r["body"], ensure_ascii=False)]

    def where(self) -> str:
        """Context for a failed assertion: the host's output and what the hooks logged."""
        log = "\n".join(" ".join(f"{k}={v}" for k, v in r.items()) for r in self.world.log())
        return (
            f"exit {self.done.returncode}\nstdout:\n{self.done.stdout[-2000:]}\n"
            f"stderr:\n{self.done.stderr[-3000:]}\nzmem-bg.log:\n{log}\n"
            f"requests: {[r['path'] for r in self.requests]}"
        )


def _run(
    world: World, cmd: list[str], env: dict[str, str], **mock_kw: Any
) -> tuple[subprocess.CompletedProcess, list[dict]]:
    record = world.base / f"requests-{time.monotonic_ns()}.jsonl"
    with mock_api.MockModelAPI(record, **mock_kw) as api:
        env = {k: v.replace("{MOCK_URL}", api.url) for k, v in env.items()}
        cmd = [c.replace("{MOCK_URL}", api.url) for c in cmd]
        done = subprocess.run(
            cmd,
            cwd=world.project,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=SESSION_TIMEOUT,
        )
        return done, api.requests()


# ---- Claude Code -------------------------------------------------------------------------------


def run_claude(world: World, prompt: str, *args: str, env: dict[str, str] | None = None, **kw):
    assert CLAUDE is not None
    # `--plugin-dir` loads the plugin as zmem@inline, whose data dir is this one.
    world.link_venv(world.home / ".claude" / "plugins" / "data" / "zmem-inline")
    full_env = world.env(
        ANTHROPIC_BASE_URL="{MOCK_URL}",
        ANTHROPIC_API_KEY="sk-ant-offline-test",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
        **(env or {}),
    )
    cmd = [str(CLAUDE), "-p", prompt, "--plugin-dir", str(PLUGIN), *args]
    return Session(world, *_run(world, cmd, full_env, **kw))


@pytest.fixture(scope="module")
def claude_tool_session(tmp_path_factory) -> Session:
    world = World(tmp_path_factory.mktemp("claude"))
    return run_claude(world, PROMPT, "--allowedTools", "Bash", tool_command=TOOL_COMMAND)


@needs_claude
def test_claude_session_start_context_reaches_the_model(claude_tool_session):
    s = claude_tool_session
    assert s.done.returncode == 0 and mock_api.DEFAULT_REPLY in s.done.stdout, s.where()
    start = s.world.logged("claude", "SessionStart")
    assert [r["reason"] for r in start] == ["injected"], s.where()
    assert start[0]["via"] == "inproc"
    first = s.turn()[0]
    # Claude Code 2.1.332 hands SessionStart additionalContext to the model under this label.
    assert "SessionStart hook additional context" in first, s.where()
    assert START_MARKER in first and GLOBAL_ROW in first and SKILL_LINE in first
    assert NS in first
    # The lesson came with the prompt, once: SessionStart showed the newer rows.
    assert first.count(MARKER) == 1, s.where()
    # Claude Code puts AGENTS.md in context itself; ZMem must not add it a second time.
    assert first.count("Project rule: run make lint") == 1, s.where()
    assert not s.world.bootstrap_calls.exists(), s.world.bootstrap_calls.read_text()


@needs_claude
def test_claude_prompt_and_tool_hooks(claude_tool_session):
    s = claude_tool_session
    prompt = s.world.logged("claude", "UserPromptSubmit")
    assert [r["reason"] for r in prompt] == ["injected"], s.where()
    assert "UserPromptSubmit hook additional context" in s.turn()[0]
    pre = s.world.logged("claude", "PreToolUse")
    assert [r["reason"] for r in pre] == ["injected"], s.where()
    assert len(s.world.logged("claude", "PostToolUse")) == 1, s.where()
    # The second model call carries the Bash result and the pre-tool recall.
    assert len(s.turn()) >= 2, s.where()
    assert any(PRETOOL in body and PRETOOL_MARKER in body for body in s.turn()[1:]), s.where()
    # The pre-tool recall held back the lesson the prompt had already put in the context.
    last = s.turn()[-1]
    assert last.count(MARKER) == 1 and last.count(PRETOOL_MARKER) == 1, s.where()


@needs_claude
def test_claude_subagent_start(tmp_path_factory):
    world = World(tmp_path_factory.mktemp("claude-sub"))
    s = run_claude(
        world, "Delegate the check.", "--allowedTools", "Agent", subagent_task=SUBAGENT_TASK
    )
    assert s.done.returncode == 0, s.where()
    sub = world.logged("claude", "SubagentStart")
    # 2.1.332 sends no task text (agent_id, agent_type only): ZMem falls back to recent rows.
    assert [r["reason"] for r in sub] == ["injected"], s.where()
    sub_calls = [b for b in s.bodies() if "SubagentStart hook additional context" in b]
    assert sub_calls and all(START_MARKER in b for b in sub_calls), s.where()


@needs_claude
def test_claude_pre_compact_brings_memories_into_the_compacted_context(tmp_path_factory):
    """A session of three user messages (stream-json input): the first about pytest, then
    /compact, then a question. PreCompact recalls on what the session was about, and the
    first request after the compaction carries its block (issue 33)."""
    world = World(tmp_path_factory.mktemp("claude-compact"))
    world.link_venv(world.home / ".claude" / "plugins" / "data" / "zmem-inline")
    messages = ["I need to run pytest before git push today.", "/compact",
                "What was I about to do?"]  # fmt: skip
    stdin = "".join(
        json.dumps({"type": "user", "message": {"role": "user", "content": m}}) + "\n"
        for m in messages
    )
    env = world.env(
        ANTHROPIC_BASE_URL="{MOCK_URL}", ANTHROPIC_API_KEY="sk-ant-offline-test",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1",
    )  # fmt: skip
    cmd = [str(CLAUDE), "-p", "--input-format", "stream-json", "--output-format", "stream-json",
           "--verbose", "--plugin-dir", str(PLUGIN)]  # fmt: skip
    record = world.base / "requests.jsonl"
    with mock_api.MockModelAPI(record) as api:
        env = {k: v.replace("{MOCK_URL}", api.url) for k, v in env.items()}
        done = subprocess.run(cmd, cwd=world.project, env=env, input=stdin, capture_output=True,
                              text=True, timeout=SESSION_TIMEOUT)  # fmt: skip
        s = Session(world, done, api.requests())
    assert done.returncode == 0, s.where()
    pre = world.logged("claude", "PreCompact")
    assert [r["reason"] for r in pre] == ["injected"], s.where()
    after = s.turn("What was I about to do?")
    assert after, s.where()
    assert "Long-term memories for the work in progress" in after[-1] and MARKER in after[-1]
    # The first message itself was compacted away; the memory came back through PreCompact.
    assert "I need to run pytest before git push today." not in after[-1]


@needs_claude
def test_claude_hooks_answered_by_the_resident_process(tmp_path_factory):
    assert VENV is not None
    world = World(tmp_path_factory.mktemp("claude-warm"))
    warm = {"ZMEM_HOOK_DAEMON": "1", "ZMEM_HOOKD_IDLE_S": "10"}
    with world.resident(warm):
        s = run_claude(world, PROMPT, env=warm)
    assert s.done.returncode == 0, s.where()
    context = [r for r in world.log() if r.get("event") in ("SessionStart", "UserPromptSubmit")]
    assert len(context) == 2 and all(r["reason"] == "injected" for r in context), s.where()
    # A checkout edited while the test runs makes the resident process hand over (build
    # stamp): that request goes in-process, so one answered request is the assertion.
    assert any(r.get("via") == "daemon" for r in context), s.where()
    assert MARKER in s.turn()[0]


# ---- Codex -------------------------------------------------------------------------------------


def _copy_plugin(dest: Path) -> None:
    """What a marketplace holds: the plugin tree (the wheel its bootstrap would install is not
    needed here: the plugin's venv is this run's, linked in)."""
    shutil.copytree(PLUGIN, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def codex_home(world: World, name: str = "codex") -> Path:
    home = world.base / name
    home.mkdir()
    (home / "config.toml").write_text(
        'model = "mock-model"\nmodel_provider = "mock"\n\n'
        '[model_providers.mock]\nname = "Mock"\nbase_url = "http://127.0.0.1:9/v1"\n'
        'wire_api = "responses"\nrequest_max_retries = 0\nstream_max_retries = 0\n'
    )
    return home


def codex_cmd(home: Path, world: World, *args: str) -> subprocess.CompletedProcess:
    assert CODEX is not None
    done = subprocess.run(
        [str(CODEX), *args],
        env=world.env(CODEX_HOME=str(home)),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def install_codex_plugin(world: World, home: Path) -> None:
    """A local marketplace holding a copy of the plugin, added and installed with Codex's own
    commands; Codex copies it into $CODEX_HOME/plugins/cache and names its data dir
    plugins/data/<plugin>-<marketplace>."""
    market = world.base / "marketplace"
    _copy_plugin(market / "plugins" / "zmem")
    (market / ".agents" / "plugins").mkdir(parents=True)
    entry = {
        "name": "zmem",
        "source": {"source": "local", "path": "./plugins/zmem"},
        "policy": {"installation": "AVAILABLE", "authentication": "ON_INSTALL"},
        "category": "Productivity",
    }
    doc = {"name": MARKETPLACE, "interface": {"displayName": "ZMem"}, "plugins": [entry]}
    (market / ".agents" / "plugins" / "marketplace.json").write_text(json.dumps(doc))
    codex_cmd(home, world, "plugin", "marketplace", "add", str(market))
    codex_cmd(home, world, "plugin", "add", f"zmem@{MARKETPLACE}")
    world.link_venv(home / "plugins" / "data" / f"zmem-{MARKETPLACE}")


def run_codex(
    world: World,
    home: Path,
    prompt: str,
    *,
    trust: bool = True,
    env: dict[str, str] | None = None,
    **kw: Any,
) -> Session:
    assert CODEX is not None
    cmd = [
        str(CODEX),
        "exec",
        "--skip-git-repo-check",
        "--sandbox",
        "danger-full-access",  # the scripted tool call is a fixed `echo`
        "-c",
        'model_providers.mock.base_url="{MOCK_URL}/v1"',
    ]
    if trust:
        cmd.append("--dangerously-bypass-hook-trust")
    cmd.append(prompt)
    full_env = world.env(CODEX_HOME=str(home), **(env or {}))
    return Session(world, *_run(world, cmd, full_env, **kw))


def developer_texts(request: dict) -> list[str]:
    """The developer-role message texts of one Responses API request (where Codex puts hook
    additionalContext)."""
    out = []
    for item in request["body"].get("input") or []:
        if isinstance(item, dict) and item.get("role") == "developer":
            for part in item.get("content") or []:
                if isinstance(part, dict):
                    out.append(str(part.get("text") or ""))
    return out


@pytest.fixture(scope="module")
def codex_world(tmp_path_factory) -> Iterator[tuple[World, Path]]:
    if CODEX is None or NODE is None or VENV is None:
        pytest.skip("codex CLI, node or venv missing")
    world = World(tmp_path_factory.mktemp("codex"))
    home = codex_home(world)
    install_codex_plugin(world, home)
    yield world, home


@pytest.fixture(scope="module")
def codex_tool_session(codex_world) -> Session:
    world, home = codex_world
    world.clear_log()
    return run_codex(world, home, PROMPT, tool_command=TOOL_COMMAND)


@needs_codex
def test_codex_session_start_context_reaches_the_model(codex_tool_session):
    s = codex_tool_session
    assert s.done.returncode == 0 and mock_api.DEFAULT_REPLY in s.done.stdout, s.where()
    assert "hook: SessionStart Completed" in s.done.stderr, s.where()
    start = s.world.logged("codex", "SessionStart")
    assert [r["reason"] for r in start] == ["injected"], s.where()
    first = developer_texts(s.turn_requests()[0])
    # Codex 0.171 adds SessionStart additionalContext as a developer message of its own.
    ctx = [t for t in first if SKILL_LINE in t]
    assert len(ctx) == 1 and START_MARKER in ctx[0] and GLOBAL_ROW in ctx[0], s.where()
    assert MARKER not in ctx[0]  # the lesson comes with the prompt
    assert "/plugins/cache/" in ctx[0]  # the skill line names the installed copy
    # Codex puts AGENTS.md in context itself; ZMem must not add it a second time.
    body = json.dumps(s.turn_requests()[0]["body"], ensure_ascii=False)
    assert body.count("Project rule: run make lint") == 1, s.where()
    assert not s.world.bootstrap_calls.exists(), s.world.bootstrap_calls.read_text()


@needs_codex
def test_codex_prompt_and_tool_hooks(codex_tool_session):
    s = codex_tool_session
    for event in ("UserPromptSubmit", "PreToolUse"):
        assert [r["reason"] for r in s.world.logged("codex", event)] == ["injected"], s.where()
        assert f"hook: {event} Completed" in s.done.stderr, s.where()
    assert len(s.world.logged("codex", "PostToolUse")) == 1, s.where()
    assert "hook: PostToolUse Completed" in s.done.stderr
    assert len(s.turn_requests()) >= 2, s.where()
    later = [t for r in s.turn_requests()[1:] for t in developer_texts(r)]
    assert any(PRETOOL in t and PRETOOL_MARKER in t for t in later), s.where()


@needs_codex
def test_codex_runs_no_untrusted_hook(codex_world):
    world, home = codex_world
    world.clear_log()
    s = run_codex(world, home, PROMPT, trust=False)
    assert s.done.returncode == 0 and mock_api.DEFAULT_REPLY in s.done.stdout, s.where()
    # Without a /hooks review (or the bypass flag) Codex skips the plugin's hooks silently.
    assert world.log() == [], s.where()
    assert all(MARKER not in b for b in s.bodies())


@needs_codex
def test_codex_subagent_start(codex_world):
    world, home = codex_world
    world.clear_log()
    # A user-level probe hook shows what Codex does with SubagentStart additionalContext.
    probe_out = {
        "hookSpecificOutput": {
            "hookEventName": "SubagentStart",
            "additionalContext": "PROBE-SUBAGENT-CONTEXT",
        }
    }
    probe = world.base / "probe.sh"
    probe.write_text(f"#!/bin/sh\ncat >/dev/null\nprintf '%s' '{json.dumps(probe_out)}'\n")
    probe.chmod(0o755)
    hooks = {"hooks": {"SubagentStart": [{"hooks": [{"type": "command", "command": str(probe)}]}]}}
    (home / "hooks.json").write_text(json.dumps(hooks))
    try:
        s = run_codex(world, home, "Delegate the check.", subagent_task=SUBAGENT_TASK)
    finally:
        (home / "hooks.json").unlink()
    assert s.done.returncode == 0, s.where()
    assert len(world.logged("codex", "SubagentStart")) == 1, s.where()
    sub = [r for r in s.requests if any(SUBAGENT_TASK == t for t in _user_texts(r))]
    assert sub, s.where()
    # Codex 0.171 accepts SubagentStart additionalContext and hands it to the subagent.
    assert any("PROBE-SUBAGENT-CONTEXT" in t for t in developer_texts(sub[0])), s.where()


@needs_codex
def test_codex_subagent_start_delivers_zmem_context(codex_world):
    world, home = codex_world
    world.clear_log()
    s = run_codex(world, home, "Delegate the check.", subagent_task=SUBAGENT_TASK)
    assert s.done.returncode == 0, s.where()
    assert [r["reason"] for r in world.logged("codex", "SubagentStart")] == ["injected"]
    sub = [r for r in s.requests if any(SUBAGENT_TASK == t for t in _user_texts(r))]
    assert sub, s.where()
    # One block from SubagentStart (recent rows), one from the subagent's UserPromptSubmit.
    blocks = [t for t in developer_texts(sub[0]) if "<zmem-memories>" in t]
    assert len(blocks) >= 2, s.where()


@needs_codex
def test_codex_is_answered_by_a_resident_process_another_install_started(codex_world):
    """Claude Code's plugin (here: the checkout) started the resident process; Codex's copy of
    the same release must be served by it, not run in-process on every event."""
    assert VENV is not None
    world, home = codex_world
    world.clear_log()
    warm = {"ZMEM_HOOK_DAEMON": "1", "ZMEM_HOOKD_IDLE_S": "20"}
    with world.resident(warm):
        s = run_codex(world, home, PROMPT, env=warm)
    assert s.done.returncode == 0, s.where()
    context = [r for r in world.log() if r.get("event") in ("SessionStart", "UserPromptSubmit")]
    assert context and all(r.get("via") == "daemon" for r in context), s.where()


def _user_texts(request: dict) -> list[str]:
    out = []
    for item in request["body"].get("input") or []:
        if isinstance(item, dict) and item.get("role") == "user":
            out += [str(p.get("text") or "") for p in item.get("content") or []]
    return out


@needs_codex
def test_codex_checkout_hooks_without_a_plugin(tmp_path_factory):
    """docs/hosts.md: a checkout works without a plugin install when a hooks config points at
    the checkout's venv and launcher. Here hooks/codex.json becomes $CODEX_HOME/hooks.json."""
    assert VENV is not None
    world = World(tmp_path_factory.mktemp("codex-checkout"))
    home = codex_home(world, "codex-checkout")
    text = (PLUGIN / "hooks" / "codex.json").read_text()
    text = text.replace("${CLAUDE_PLUGIN_DATA}/venv", str(VENV))
    text = text.replace("${CLAUDE_PLUGIN_ROOT}", str(PLUGIN))
    (home / "hooks.json").write_text(text)
    s = run_codex(world, home, PROMPT)
    assert s.done.returncode == 0, s.where()
    for event in ("SessionStart", "UserPromptSubmit"):
        assert [r["reason"] for r in world.logged("codex", event)] == ["injected"], s.where()
    texts = developer_texts(s.turn_requests()[0])
    assert any(SKILL_LINE in t and START_MARKER in t for t in texts), s.where()
    assert any(MARKER in t for t in texts), s.where()


# ---- the turn-end reflection ---------------------------------------------------------------

FAILING_COMMAND = "ls /zmem-live-missing-dir"
REFLECTION = "ZMem reflection:"


@needs_claude
def test_claude_stop_reflects_once_after_a_failed_tool_call(tmp_path_factory):
    """Claude Code reports the failed Bash call as PostToolUseFailure; the Stop hook's
    decision:block makes it call the model once more with the question, and the Stop after
    that (stop_hook_active) stays silent."""
    world = World(tmp_path_factory.mktemp("claude-reflect"))
    s = run_claude(world, PROMPT, "--allowedTools", "Bash", tool_command=FAILING_COMMAND)
    assert len(world.logged("claude", "PostToolUseFailure")) == 1, s.where()
    stops = [r["reason"] for r in world.logged("claude", "Stop")]
    assert stops == ["reflect", "skipped"], s.where()
    assert sum(REFLECTION in b for b in s.turn()) == 1, s.where()


@needs_codex
def test_codex_stop_reflects_once_after_a_failed_tool_call(codex_world):
    world, home = codex_world
    world.clear_log()
    s = run_codex(world, home, PROMPT, tool_command=FAILING_COMMAND)
    post = world.logged("codex", "PostToolUse")
    assert len(post) == 1, s.where()
    stops = [r["reason"] for r in world.logged("codex", "Stop")]
    assert stops[:1] == ["reflect"] and "reflect" not in stops[1:], s.where()
    assert "hook: Stop Completed" in s.done.stderr or "hook: Stop" in s.done.stderr, s.where()
    assert any(REFLECTION in b for b in s.bodies()), s.where()


# ---- zmem setup (issue 20) -------------------------------------------------------------------

SETUP_MARKER = "zmem-setup-marker-4411"


@needs_claude
def test_claude_after_zmem_setup_recalls_a_memory_added_without_namespace(tmp_path_factory):
    """No plugin: `zmem setup claude` writes the hooks into ~/.claude/settings.json, a memory is
    added in the checkout with no --namespace, and the prompt hook of a real Claude Code
    session there injects it."""
    assert VENV is not None
    world = World(tmp_path_factory.mktemp("claude-setup"))

    def zmem(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run(
            [str(VENV / "bin" / "python"), "-c", "from zmem.cli import main; main()", *args],
            env=world.env(), cwd=world.project, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done

    setup = zmem("setup", "claude")
    assert str(world.home / ".claude" / "settings.json") in setup.stdout
    lesson = f"Open a pull request only after make check passes ({SETUP_MARKER})"
    added = zmem("add", "--type", "lesson", "--signal", "user", "--content", lesson)
    assert NS in added.stderr
    world.bury(LATER_ROWS)  # SessionStart shows these; the prompt hook brings the lesson
    assert CLAUDE is not None
    env = world.env(
        ANTHROPIC_BASE_URL="{MOCK_URL}", ANTHROPIC_API_KEY="sk-ant-offline-test",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1",
    )  # fmt: skip
    prompt = "When may I open a pull request?"
    s = Session(world, *_run(world, [str(CLAUDE), "-p", prompt], env))
    assert [r["reason"] for r in world.logged("claude", "UserPromptSubmit")] == ["injected"], (
        s.where()
    )
    assert any(SETUP_MARKER in body for body in s.turn(prompt)), s.where()


@needs_codex
def test_codex_after_zmem_setup_recalls_a_memory_added_without_namespace(tmp_path_factory):
    """No plugin: `zmem setup codex` writes $CODEX_HOME/hooks.json; a real Codex session in the
    checkout gets the memory added there without --namespace."""
    assert VENV is not None and CODEX is not None
    world = World(tmp_path_factory.mktemp("codex-setup"))
    home = codex_home(world, "codex-setup")
    env = world.env(CODEX_HOME=str(home))

    def zmem(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run(
            [str(VENV / "bin" / "python"), "-c", "from zmem.cli import main; main()", *args],
            env=env, cwd=world.project, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done

    assert "hooks.json: updated" in zmem("setup", "codex").stdout
    lesson = f"Open a pull request only after make check passes ({SETUP_MARKER})"
    zmem("add", "--type", "lesson", "--signal", "user", "--content", lesson)
    world.bury(LATER_ROWS)  # SessionStart shows these; the prompt hook brings the lesson
    prompt = "When may I open a pull request?"
    s = run_codex(world, home, prompt)
    assert s.done.returncode == 0, s.where()
    assert [r["reason"] for r in world.logged("codex", "UserPromptSubmit")] == ["injected"], (
        s.where()
    )
    assert any(SETUP_MARKER in t for r in s.turn_requests(prompt) for t in developer_texts(r))


# ---- the http prompt hook (issue 36) ---------------------------------------------------------

HTTP_MARKERS = ("zmem-http-marker-5120", "zmem-http-marker-5121")


@needs_claude
def test_claude_http_prompt_hook_answers_and_survives_a_killed_resident_process(
    tmp_path_factory,
):
    """`zmem setup claude` wires the prompt as an http hook: the real Claude Code POSTs it to
    the keeper's port, the resident process answers, the lesson reaches the model and no hook
    process starts for the prompt. Then the answering process is killed, and the session's
    next prompt (`--continue`: the same session) still gets its memory."""
    import signal

    assert VENV is not None and CLAUDE is not None
    world = World(tmp_path_factory.mktemp("claude-http"))
    daemon_on = {"ZMEM_HOOK_DAEMON": "1"}

    def zmem(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run(
            [str(VENV / "bin" / "python"), "-c", "from zmem.cli import main; main()", *args],
            env=world.env(**daemon_on), cwd=world.project, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done

    def workers() -> list[int]:
        found = subprocess.run(
            ["pgrep", "-f", f"zmem.resident.daemon {world.data} --http-fd"],
            capture_output=True, text=True,
        ).stdout.split()  # fmt: skip
        return [int(p) for p in found]

    setup = zmem("setup", "claude", "--no-model")
    assert "UserPromptSubmit (http)" in setup.stdout, setup.stdout
    settings = json.loads((world.home / ".claude" / "settings.json").read_text())
    assert settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]["type"] == "http"
    first = f"Open a pull request only after make check passes ({HTTP_MARKERS[0]})"
    second = f"Database migrations run through alembic upgrade head ({HTTP_MARKERS[1]})"
    zmem("add", "--type", "lesson", "--signal", "user", "--content", first)
    zmem("add", "--type", "lesson", "--signal", "user", "--content", second)
    world.bury(LATER_ROWS)  # SessionStart shows these; the prompt hook brings the lessons
    env = world.env(
        ANTHROPIC_BASE_URL="{MOCK_URL}", ANTHROPIC_API_KEY="sk-ant-offline-test",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1", **daemon_on,
    )  # fmt: skip
    try:
        prompt = "When may I open a pull request?"
        s = Session(world, *_run(world, [str(CLAUDE), "-p", prompt], env))
        prompts = world.logged("claude", "UserPromptSubmit")
        assert [(r["reason"], r.get("via")) for r in prompts] == [("injected", "http")], s.where()
        assert any(HTTP_MARKERS[0] in body for body in s.turn(prompt)), s.where()
        killed = workers()
        assert killed, s.where()
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
        world.clear_log()
        prompt = "How do I run the database migrations?"
        s = Session(world, *_run(world, [str(CLAUDE), "-p", "--continue", prompt], env))
        prompts = world.logged("claude", "UserPromptSubmit")
        assert [(r["reason"], r.get("via")) for r in prompts] == [("injected", "http")], s.where()
        assert any(HTTP_MARKERS[1] in body for body in s.turn(prompt)), s.where()
        assert not set(workers()) & set(killed)
    finally:
        from zmem.resident import keeper

        keeper.stop(world.data)
