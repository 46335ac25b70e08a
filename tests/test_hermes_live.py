"""The real hermes-agent 0.19.0 (PyPI, in .venv-hermes, which `make test` builds) with ZMem's
plugins: `zmem hermes-install --activate` puts them in a temporary HERMES_HOME through
Hermes's own CLI; Hermes discovers and loads the provider and drives it through MemoryManager
as its agent loop does; then full agent turns run offline against tests/hermes_standin.py (a
model stand-in on loopback), in which the model calls zmem_recall and a terminal command, and
the stand-in receives the prefetched memory, the tool result, and on the next turn the memory
that the terminal command's ops-ring tokens brought back. Each Hermes run is a subprocess of
.venv-hermes/bin/python (tests/hermes_driver.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hermes_standin import StandIn, text_of
from zmem import MemoryStore
from zmem.agent_tools.catalog import TOOLS
from zmem.hermes_provider import ZMemProvider
from zmem.hosts import opsring, sidecars

ROOT = Path(__file__).resolve().parents[1]
HERMES_VENV = ROOT / ".venv-hermes"
HERMES_PY = HERMES_VENV / "bin" / "python"
DRIVER = ROOT / "tests" / "hermes_driver.py"
SESSION = "20261204_120000_abc123"  # the driver's
NS = "project:github.com/acme/widget"
LESSON = "Run pytest -x before git push: CI takes 20 minutes (zmem-live-7731)."
# Shares no word with either prompt: only the ops ring's `git stash list` tokens reach it.
STASH = "When the stash list shows entries, pop them before rebasing (zmem-live-5512)."
PROMPT = "How should I run pytest before git push?"
CORRECTION = "No, use uv instead of pip. What should I do next?"
# Two more prompts that recall both lessons on their own words.
LATER = [
    "The stash list shows entries; should I pop them before rebasing?",
    "Remind me: run pytest before git push, and pop stash entries before rebasing?",
]
RUN_TIMEOUT = 120

pytestmark = pytest.mark.skipif(
    not HERMES_PY.exists(),
    reason="no .venv-hermes: `make .venv-hermes` installs hermes-agent 0.19.0 there "
    "(`make test` builds it first)",
)


@pytest.fixture
def hermes(tmp_path: Path) -> dict[str, Any]:
    """A Hermes home with ZMem installed and activated, a checkout to work in, the environment
    every Hermes run gets (no ZMEM_STORE/ZMEM_DATA: the store lives in the Hermes home), and a
    seeded store."""
    repo = tmp_path / "widget"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text(
        '[core]\n\tbare = false\n[remote "origin"]\n\turl = git@github.com:acme/widget.git\n'
    )
    home = tmp_path / "hermes"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path / "user"),
        "LANG": "C.UTF-8",
        "HERMES_HOME": str(home),
        "ZMEM_EMBED_PROFILE": "fake",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    version = subprocess.run(
        [str(HERMES_PY), "-c", "import importlib.metadata as m; print(m.version('hermes-agent'))"],
        capture_output=True,
        text=True,
        env=env,
        timeout=RUN_TIMEOUT,
    )
    assert version.stdout.strip() == "0.19.0", version.stderr
    # ZMem is not in Hermes's Python (make's .venv-hermes holds hermes-agent alone): this
    # checkout's install sets Hermes up, as a tool install would, and the plugins reach zmem
    # through the bridge it records (issue 31).
    installed = subprocess.run(
        [
            sys.executable,
            "-m",
            "zmem",
            "setup",
            "hermes",
            "--hermes-home",
            str(home),
        ],  # fmt: skip
        capture_output=True,
        text=True,
        # hermes on PATH, as where Hermes is installed: setup activates through it.
        env={**env, "PATH": f"{HERMES_VENV / 'bin'}{os.pathsep}{env['PATH']}"},
        cwd=repo,
        timeout=RUN_TIMEOUT,
    )
    assert installed.returncode == 0, installed.stderr
    assert "activated through" in installed.stdout, installed.stdout
    data = home / "zmem"
    with MemoryStore.open(data / "store.sqlite") as s:
        lesson = s.add(LESSON, namespace=NS, type="lesson", signal="test").id
        s.add(STASH, namespace=NS, type="lesson", signal="test")
    return {"home": home, "repo": repo, "env": env, "data": data, "lesson": lesson}


def run_driver(h: dict[str, Any], tmp_path: Path, *args: str) -> dict[str, Any]:
    out = tmp_path / f"{args[0]}.json"
    done = subprocess.run(
        [str(HERMES_PY), str(DRIVER), args[0], str(out), *args[1:]],
        capture_output=True,
        text=True,
        env=h["env"],
        cwd=h["repo"],
        timeout=RUN_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(out.read_text())


def counts(h: dict[str, Any]) -> tuple[int, int]:
    with MemoryStore.open(h["data"] / "store.sqlite") as s:
        m = s.get(h["lesson"])
        return m.retrieval_count, m.surfaced_count


def bg_log(h: dict[str, Any]) -> list[str]:
    return (h["data"] / "zmem-bg.log").read_text().splitlines()


def test_hermes_discovers_loads_and_drives_the_provider(hermes, tmp_path):
    out = run_driver(hermes, tmp_path, "manager", PROMPT, CORRECTION)
    assert [row[0] for row in out["discovered"]] == ["zmem"] and out["discovered"][0][2] is True
    assert out["plugin_module"] and out["is_memory_provider"]
    assert out["provider_class"] == "zmem.hermes_provider.provider.ZMemProvider"
    # Hermes's Python has no zmem: it came from this checkout, through the bridge.
    assert out["zmem_from"] == str(ROOT / "src" / "zmem" / "__init__.py")
    # `hermes plugins enable` turned the hook plugin on; the provider is left to its loader.
    assert out["general"]["zmem_hooks"] == {"kind": "standalone", "enabled": True, "hooks": 2}
    assert out["general"].get("zmem", {}).get("enabled") is not True
    assert out["post_tool_call_hooked"] and out["pre_llm_call_hooked"]
    assert "ZMem long-term memory" in out["system"] and NS in out["system"]
    assert out["tools"] == [t.schema(prefix="zmem_")["name"] for t in TOOLS]
    assert LESSON in out["prefetch"] and out["prefetch"].startswith("<zmem-memories>")
    assert out["fenced"].startswith("<memory-context>") and LESSON in out["fenced"]
    assert LESSON in [r["content"] for r in out["recall"]["results"]]
    assert out["bad_add"]["error"] == "invalid_arguments"
    assert out["flushed"] is True and out["drain"]["status"] == "drained"
    assert LESSON in out["pre_compress"]
    assert out["mcp"] == []
    queued = sidecars.queue_items(hermes["data"], NS)
    assert [(q["message"], q["session"]) for q in queued] == [
        (CORRECTION, "20261204_120000_abc123")
    ]
    # prefetch and pre-compress were surfaces; only the tool call was a retrieval.
    retrieved, surfaced = counts(hermes)
    assert retrieved == 1 and surfaced >= 2
    assert any("host=hermes event=prefetch reason=injected" in line for line in bg_log(hermes))


def _wait_for(probe: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def _script(text: str) -> list[tuple[str, dict[str, Any]]]:
    # Keyed on the user's own words: the injected memories that follow them mention pytest.
    if text.startswith(PROMPT):
        return [
            ("zmem_recall", {"query": "pytest before git push"}),
            ("terminal", {"command": "git stash list"}),
        ]
    return []


def _recalls_stash_without_the_ring(h: dict[str, Any]) -> bool:
    """The control: the same prompt, in a session with no ops ring, from this process."""
    control = ZMemProvider()
    control.initialize("control", hermes_home=str(h["home"]), agent_context="subagent")
    try:
        return STASH in control.prefetch(CORRECTION)
    finally:
        control.shutdown()


def _last_user(body: dict[str, Any]) -> str:
    users = [m for m in body["messages"] if m.get("role") == "user"]
    return text_of(users[-1].get("content"))


def test_an_offline_agent_turn_gets_the_memory_and_calls_zmem_recall(hermes, tmp_path, monkeypatch):
    monkeypatch.delenv("ZMEM_STORE")  # the control provider reads the Hermes home's store
    monkeypatch.delenv("ZMEM_DATA")
    monkeypatch.chdir(hermes["repo"])
    with StandIn(_script) as standin:
        turns = json.dumps([PROMPT, CORRECTION, *LATER])
        out = run_driver(hermes, tmp_path, "agent", standin.base_url, turns)
        bodies = standin.completions()
    assert out["memory_manager"] and out["mcp"] == []
    assert [f.startswith("FINAL:") for f in out["finals"]] == [True] * 4
    first = bodies[0]
    offered = {t["function"]["name"] for t in first["tools"]}
    assert {"zmem_recall", "zmem_add", "terminal"} <= offered
    system = text_of(first["messages"][0]["content"])
    assert first["messages"][0]["role"] == "system" and "ZMem long-term memory" in system
    # The prefetched memory reached the model inside Hermes's fence, with the user's message.
    asked = _last_user(first)
    assert asked.startswith(PROMPT) and "<memory-context>" in asked and LESSON in asked
    assert STASH not in asked
    # The model's zmem_recall call was answered by the provider.
    tool_results = [
        text_of(m.get("content")) for b in bodies for m in b["messages"] if m["role"] == "tool"
    ]
    recalled = [json.loads(t) for t in tool_results if t.lstrip().startswith('{"results"')]
    assert recalled and LESSON in [r["content"] for r in recalled[0]["results"]]
    # post_tool_call (the zmem_hooks plugin) put the terminal call in the ops ring...
    ring = opsring.recent_lines(hermes["data"], SESSION)
    assert [line.split("\t")[1:3] for line in ring] == [["Bash", "git stash list"]]
    # ...and before the next turn's model call, pre_llm_call (the zmem_hooks plugin) delivered
    # the hazard that command touched (the stash lesson shares no word with the prompt); the
    # turn's prefetch added no fence: all it recalled was in the context already.
    second = next(b for b in bodies if _last_user(b).startswith(CORRECTION))
    asked = _last_user(second)
    assert "ZMem recalled for the commands" in asked and STASH in asked
    assert "<memory-context>" not in asked
    assert not _recalls_stash_without_the_ring(hermes)
    assert any("event=pre_llm_call reason=injected" in x and "ops=" in x for x in bg_log(hermes))
    # The turn's prefetch then held back what the context already had (the lesson from the
    # first turn, the stash lesson just delivered), and no later turn brings either back,
    # though both prompts recall them: each was injected into the last request's context
    # exactly once (the lesson is also in the first turn's zmem_recall result, which the
    # model asked for).
    assert sum("event=prefetch reason=seen" in x for x in bg_log(hermes)) == 3  # turns 2-4
    last = json.dumps([m for m in bodies[-1]["messages"] if m["role"] == "user"])
    assert last.count("zmem-live-5512") == 1 and last.count("zmem-live-7731") == 1
    # sync_turn queued the correction from the clean text; api_content kept the fence.
    queued = sidecars.queue_items(hermes["data"], NS)
    assert [q["message"] for q in queued] == [CORRECTION]
    assert all("<memory-context>" not in (row["content"] or "") for row in out["user_rows"])
    assert any("<memory-context>" in (row["api_content"] or "") for row in out["user_rows"])
    assert counts(hermes)[0] == 1  # the one explicit recall
    # The session's start launched the upkeep a coding host's SessionStart launches, detached,
    # in Hermes's interpreter, which reaches ZMem's dependencies through the bridge's install.
    upkept = _wait_for(lambda: [x for x in bg_log(hermes) if "host=upkeep" in x])
    assert upkept and "event=hermes-initialize reason=backup+organize+sweep" in upkept[0]
    assert len(list((hermes["data"] / "backups").glob("store-*.sqlite"))) == 1
    assert (hermes["data"] / "sweep.last").is_file() and "error=" not in upkept[0]
    assert sys.executable != str(HERMES_PY)  # the agent ran in Hermes's own interpreter
