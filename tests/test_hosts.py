"""Units of the host layer: payload normalizers, Codex's strict output keys, the ops ring's
allowlist and caps, the query composition inside 500 characters, namespace derivation, the
correction queue and the transcript miner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zmem.capture import corrections
from zmem.capture import project_namespace as namespace
from zmem.hosts import emit, events, opsring, sidecars


def test_codex_apply_patch_normalizes_to_edit_with_paths():
    patch = "*** Begin Patch\n*** Update File: src/a.py\n*** Add File: b/c.md\n*** End Patch"
    ev = events.normalize(
        "codex", "PreToolUse", {"tool_name": "apply_patch", "tool_input": {"command": patch}}
    )
    assert ev.tool_name == "Edit" and ev.paths == ("src/a.py", "b/c.md") and ev.command is None


def test_zcode_tool_names_are_case_insensitive_and_failure_is_flagged():
    ev = events.normalize(
        "zcode", "PostToolUseFailure", {"tool_name": "bash", "tool_input": {"command": "ls"}}
    )
    assert ev.tool_name == "Bash" and ev.command == "ls" and ev.tool_failed


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
        max_leaves=20,
    )
)
@settings(max_examples=200, deadline=None)
def test_normalize_never_fails_on_any_json_object(value):
    doc = {"tool_name": value, "tool_input": value, "prompt": value, "cwd": value, "x": value}
    for name in ("UserPromptSubmit", "PreToolUse", "PostToolUse", "SubagentStart"):
        events.normalize("claude", name, doc)


def test_codex_output_key_sets():
    out = emit.render("codex", "UserPromptSubmit", "ctx")
    assert emit.codex_valid(json.loads(out))
    assert not emit.codex_valid({"hookSpecificOutput": {"hookEventName": "X", "extra": 1}})
    assert not emit.codex_valid({"hookSpecificOutput": {"hookEventName": "X"}, "note": 1})
    assert emit.render("codex", "PreCompact", "ctx") == ""  # no context event on Codex
    assert emit.render("claude", "Stop", "ctx") == ""  # Stop context keeps Claude running
    assert emit.render("claude", "SessionStart", "  ") == ""


def test_command_tokens_keep_only_allowlisted_shapes():
    toks = opsring.command_tokens(
        "cd repo && git reset --soft origin/main; pytest -x tests/test_app.py | tee out.log"
        " && curl -H 'Authorization: Bearer sk-abcdefghijklmnopqrstuvwxyz123456' api"
    )
    assert "git reset" in toks and "--soft" in toks and "pytest" in toks
    assert "test_app.py" in toks and "main" in toks or "out.log" in toks
    assert not any("sk-" in t or "Bearer" in t or t == "api" or t == "repo" for t in toks)


def test_ring_trims_to_newest_lines(tmp_path: Path):
    path = opsring.ring_path(tmp_path, "s")
    trimmed = 0
    for i in range(3000):
        opsring.record(tmp_path, "s", "Bash", [f"file{i:05d}.py", "pytest"])
        lines = path.read_text().splitlines() if i % 50 == 0 or i == 2999 else None
        if lines is not None and len(lines) < i + 1:
            trimmed += 1
        assert path.stat().st_size <= opsring.RING_CAP_BYTES + 100
    assert trimmed
    last = path.read_text().splitlines()
    assert last[-1].split("\t")[2].startswith("file02999.py")
    opsring._trim(path)
    assert len(path.read_text().splitlines()) == opsring.RING_KEEP_LINES


@given(st.text(max_size=900), st.lists(st.text(alphabet="abc.py -", max_size=30), max_size=40))
def test_query_stays_inside_the_cap(prompt, tokens):
    query, used = opsring.compose_query(prompt, [t for t in tokens if t])
    assert len(query) <= opsring.QUERY_CAP
    assert used <= len(tokens)


def test_query_ops_tokens_are_never_severed():
    query, used = opsring.compose_query("p" * 1000, ["git stash pop", "settings.py"])
    assert used == 2 and query.endswith("git stash pop settings.py") and len(query) <= 500


@pytest.mark.parametrize(
    "url",
    [
        "git@github.com:Acme/Widget.git",
        "https://github.com/Acme/Widget",
        "https://user@GitHub.com/Acme/Widget.git/",
        "ssh://git@github.com:22/Acme/Widget.git",
        "https://github.com/acme/widget",
    ],
)
def test_remote_spellings_agree(url):
    # Case too (issue 47): the forges compare owner and repository without it.
    assert namespace.canonical_remote(url) == "github.com/acme/widget"


def test_two_clones_share_a_namespace_and_plain_dirs_use_basename(tmp_path: Path):
    for name in ("one", "two"):
        git = tmp_path / name / ".git"
        git.mkdir(parents=True)
        url = "git@github.com:a/r.git" if name == "one" else "https://github.com/a/r"
        (git / "config").write_text(f'[remote "origin"]\n\turl = {url}\n')
    (tmp_path / "one" / "sub").mkdir()
    assert namespace.derive(tmp_path / "one" / "sub") == namespace.derive(tmp_path / "two")
    plain = tmp_path / "plain dir"
    plain.mkdir()
    assert namespace.derive(plain) == "project:plain-dir"


def test_worktree_git_file_follows_commondir(tmp_path: Path):
    main = tmp_path / "main" / ".git"
    (main / "worktrees" / "wt").mkdir(parents=True)
    (main / "config").write_text('[remote "origin"]\n\turl = git@gitlab.com:g/p.git\n')
    (main / "worktrees" / "wt" / "commondir").write_text("../..\n")
    wt = tmp_path / "wt"
    wt.mkdir()
    (wt / ".git").write_text(f"gitdir: {main / 'worktrees' / 'wt'}\n")
    assert namespace.derive(wt) == "project:gitlab.com/g/p"


def test_migration_map_pairs(tmp_path: Path):
    (tmp_path / "r" / ".git").mkdir(parents=True)
    (tmp_path / "r" / ".git" / "config").write_text('[remote "o"]\n\turl = git@h.io:o/r.git\n')
    raw = json.dumps({"project:old": str(tmp_path / "r"), "project:other": "/nonexistent"})
    assert namespace.migration_pairs(raw, "project:h.io/o/r") == ["project:old"]
    assert namespace.migration_pairs("{bad", "project:x") == []


def test_queue_clear_needs_exactly_one_selector(tmp_path: Path):
    item = sidecars.enqueue(tmp_path, "project:x", {"message": "no, use uv", "confidence": 0.7})
    with pytest.raises(ValueError):
        sidecars.clear(tmp_path, "project:x")
    with pytest.raises(ValueError):
        sidecars.clear(tmp_path, "project:x", ids=(item["id"],), all_items=True)
    assert sidecars.clear(tmp_path, "project:x", ids=(item["id"],)) == 1
    assert sidecars.queue_items(tmp_path, "project:x") == []


def test_queue_cli_rejects_flagless_clear(run_cli):
    result = run_cli("queue-clear", "--namespace", "project:x")
    assert result.exit_code == 2


def test_drop_stale_keeps_confident_items(tmp_path: Path):
    sidecars.enqueue(tmp_path, "p:x", {"message": "a", "confidence": 0.5})
    sidecars.enqueue(tmp_path, "p:x", {"message": "b", "confidence": 0.9})
    later = 10**12
    assert sidecars.clear(tmp_path, "p:x", drop_stale=True, now=later) == 1
    assert [i["message"] for i in sidecars.queue_items(tmp_path, "p:x")] == ["b"]


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("No, use pnpm instead of npm in this repo.", "correction"),
        ("remember: the staging DB is read-only", "remember"),
        ("We always squash merge feature branches.", "convention"),
    ],
)
def test_corrections_detect(text, kind):
    found = corrections.detect(text)
    assert found is not None and found["type"] == kind


@pytest.mark.parametrize("text", ["Please add a test for the parser.", "/clear", "<system>x"])
def test_corrections_ignore_ordinary_prompts(text):
    assert corrections.detect(text) is None


def test_corrections_transcript_cli(run_cli, tmp_path: Path):
    path = tmp_path / "t.jsonl"
    rows = [
        {"type": "user", "message": {"role": "user", "content": "No, use uv instead of pip."}},
        {"type": "user", "message": {"content": [{"type": "tool_result", "content": "no, use"}]}},
        {"type": "assistant", "message": {"content": "remember: this is the assistant"}},
        {"type": "user", "message": {"content": [{"type": "text", "text": "Thanks, looks good"}]}},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\nnot json\n")
    doc = json.loads(run_cli("corrections", "--transcript", str(path)).output)
    assert doc["count"] == 1 and doc["items"][0]["message"].startswith("No, use uv")
    assert set(doc["items"][0]) >= {"message", "type", "patterns", "confidence", "sentiment"}


def test_doctor_is_read_only_and_reports(run_cli, store_path, tmp_path: Path):
    result = run_cli("doctor", "--format", "json", "--project", str(tmp_path))
    assert result.exit_code == 0
    doc = json.loads(result.output)
    names = {c["check"] for c in doc["checks"]}
    assert {"store-path", "python", "sqlite", "schema", "host-surfaces", "namespace"} <= names
    assert not store_path.exists()  # never creates the store
    surfaces = next(c for c in doc["checks"] if c["check"] == "host-surfaces")
    assert all(surfaces["surfaces"].values())


def test_doctor_script_shim_runs(store_path):
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1] / "src" / "zmem" / "plugin"
    script = root / "skills" / "memory" / "scripts" / "doctor.py"
    done = subprocess.run(
        [sys.executable, str(script), "--format", "human"], capture_output=True, timeout=60
    )
    assert done.returncode == 0 and b"doctor:" in done.stdout


def test_plugin_manifests_and_hook_configs_are_consistent():
    root = Path(__file__).resolve().parents[1] / "src" / "zmem" / "plugin"
    claude = json.loads((root / "hooks" / "hooks.json").read_text())["hooks"]
    codex = json.loads((root / "hooks" / "codex.json").read_text())["hooks"]
    zcode = json.loads((root / "hooks" / "zcode.json").read_text())["hooks"]
    assert set(zcode) == events.HOST_EVENTS["zcode"]  # exactly its seven events
    # Stop / SubagentStop run only the reflection, which asks to go on after new failures.
    assert {"Stop", "SubagentStop"} <= set(claude) and {"Stop", "SubagentStop"} <= set(codex)
    for host, cfg in (("claude", claude), ("codex", codex), ("zcode", zcode)):
        assert set(cfg) <= events.HOST_EVENTS[host]
        for event, entries in cfg.items():
            for e in entries:
                for h in e["hooks"]:
                    assert f" {event} --host {host}" in h["command"]
                    assert "venv/bin/python" in h["command"]  # no shell shim on the hot path
    for manifest in (".claude-plugin/plugin.json", ".codex-plugin/plugin.json"):
        assert json.loads((root / manifest).read_text())["name"] == "zmem"
    skill = (root / "skills" / "memory" / "SKILL.md").read_text()
    assert skill.startswith("---\nname: memory\n") and "# Memory skill: invoke" in skill


def test_the_plugins_mcp_placeholder_answers_the_handshake_with_no_tools():
    """Before the plugin's venv exists its .mcp.json starts hooks/zmem_mcp_pending.py: a server
    that failed to start would be remembered by Claude Code as needing auth and never started
    again (found with the real CLI, issue 31)."""
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[1] / "src/zmem/plugin/hooks/zmem_mcp_pending.py"
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "recall"}},
    ]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-S", str(script)],
        input="".join(json.dumps(m) + "\n" for m in messages),
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 0 and done.stderr == ""
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["id"] for r in replies] == [1, 2, 3]
    assert replies[0]["result"]["protocolVersion"] == "2025-06-18"
    assert "being installed" in replies[0]["result"]["instructions"]
    assert replies[1]["result"] == {"tools": []}
    assert replies[2]["error"]["code"] == -32601
    mcp = json.loads((script.parents[1] / ".mcp.json").read_text())["mcpServers"]["zmem"]
    assert mcp["args"][-1].endswith(
        'exec python3 "${CLAUDE_PLUGIN_ROOT}/hooks/zmem_mcp_pending.py"'
    )
