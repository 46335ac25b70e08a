"""The Stop / SubagentStop reflection and `zmem failures`, through the real hook entry point
and CLI: silent with no new failures, one continuation per new batch of failed or rejected
tool calls in each host's accepted shape, never while the host reports a stop hook already
active, off with ZMEM_REFLECT=0, and the next prompt's capture nudge not repeated after it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from zmem.hosts import emit

SID = "sess-reflect-1"


def hook(run_cli, host: str, event: str, doc: dict) -> str:
    result = run_cli("hook", event, "--host", host, input=json.dumps(doc))
    assert result.exit_code == 0
    return result.output


def fail_pytest(run_cli, host: str, cwd: Path, session: str = SID) -> None:
    doc = {
        "session_id": session, "cwd": str(cwd), "hook_event_name": "PostToolUse",
        "tool_name": "Bash", "tool_input": {"command": "pytest -x tests/test_api.py"},
        "tool_response": {"stdout": "", "stderr": "1 failed", "exit_code": 1},
    }  # fmt: skip
    assert hook(run_cli, host, "PostToolUse", doc) == ""


def stop(run_cli, host: str, cwd: Path, event: str = "Stop", **extra) -> str:
    doc = {"session_id": SID, "cwd": str(cwd), "hook_event_name": event,
           "stop_hook_active": False, **extra}  # fmt: skip
    return hook(run_cli, host, event, doc)


@pytest.mark.parametrize("host", ["claude", "codex", "zcode"])
def test_one_reflection_per_new_batch_of_failures(run_cli, tmp_path, host):
    assert stop(run_cli, host, tmp_path) == ""  # nothing failed: silent
    fail_pytest(run_cli, host, tmp_path)
    doc = json.loads(stop(run_cli, host, tmp_path))
    assert set(doc) == {"decision", "reason"} and doc["decision"] == "block"
    assert "1 failed tool call(s) (pytest test_api.py)" in doc["reason"]
    assert "--signal" in doc["reason"]
    if host == "codex":
        assert emit.codex_valid(doc)
    assert stop(run_cli, host, tmp_path) == ""  # the same failures: asked once
    time.sleep(1.1)  # the ring keeps whole seconds
    fail_pytest(run_cli, host, tmp_path)
    assert "decision" in stop(run_cli, host, tmp_path)


def test_never_while_a_stop_hook_is_active_and_off_by_setting(run_cli, tmp_path, monkeypatch):
    fail_pytest(run_cli, "claude", tmp_path)
    assert stop(run_cli, "claude", tmp_path, stop_hook_active=True) == ""
    monkeypatch.setenv("ZMEM_REFLECT", "0")
    assert stop(run_cli, "claude", tmp_path) == ""
    monkeypatch.delenv("ZMEM_REFLECT")
    assert "decision" in stop(run_cli, "claude", tmp_path)  # still pending, now delivered


@pytest.mark.parametrize("host", ["claude", "codex"])
def test_subagent_stop_reflects_where_the_host_has_it(run_cli, tmp_path, host):
    fail_pytest(run_cli, host, tmp_path)
    doc = json.loads(stop(run_cli, host, tmp_path, "SubagentStop", agent_type="worker"))
    assert "this subagent's session" in doc["reason"]


def test_zcode_has_no_subagent_stop(run_cli, tmp_path):
    fail_pytest(run_cli, "zcode", tmp_path)
    assert stop(run_cli, "zcode", tmp_path, "SubagentStop") == ""


def transcript(path: Path, *, rejected_at: str) -> Path:
    entries = [
        {"type": "user", "timestamp": rejected_at, "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_9", "is_error": True,
             "content": "The user doesn't want to proceed with this tool use. The tool use "
                        "was rejected (eg. if it was a file edit, the new_string was NOT "
                        "written to the file). STOP what you are doing."}]}},
        {"type": "assistant", "timestamp": rejected_at, "message": {"content": "ok"}},
        "not json at all",
    ]  # fmt: skip
    path.write_text("".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in entries))
    return path


def test_user_rejections_from_a_claude_transcript(run_cli, tmp_path):
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    path = transcript(tmp_path / "t.jsonl", rejected_at=now)
    doc = json.loads(stop(run_cli, "claude", tmp_path, transcript_path=str(path)))
    assert "1 tool call(s) the user rejected" in doc["reason"]
    old = transcript(tmp_path / "old.jsonl", rejected_at="2020-01-01T00:00:00Z")
    assert stop(run_cli, "claude", tmp_path, transcript_path=str(old)) == ""


def test_no_second_nudge_on_the_next_prompt(run_cli, tmp_path, store_path):
    from conftest import add_row
    from zmem.store import MemoryStore

    with MemoryStore.open(store_path, create=True) as s:
        add_row(s, "Unrelated lesson about docs")
    fail_pytest(run_cli, "claude", tmp_path)
    assert "decision" in stop(run_cli, "claude", tmp_path)
    doc = {"session_id": SID, "cwd": str(tmp_path), "hook_event_name": "UserPromptSubmit",
           "prompt": "what next?"}  # fmt: skip
    assert "a tool call failed" not in hook(run_cli, "claude", "UserPromptSubmit", doc)


def test_failures_command(run_cli, tmp_path):
    fail_pytest(run_cli, "claude", tmp_path)
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    path = transcript(tmp_path / "t.jsonl", rejected_at=now)
    result = run_cli("failures", "--session", SID, "--transcript", str(path), "--json")
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    assert got["count"] == 2
    by_kind = {i["kind"]: i for i in got["items"]}
    assert by_kind["tool_failure"]["detail"] == "pytest test_api.py"  # allowlisted tokens only
    assert by_kind["tool_failure"]["tool"] == "Bash"
    assert by_kind["user_rejection"]["detail"].startswith("The user doesn't want to proceed")
    text = run_cli("failures", "--session", SID).stdout
    assert "Bash failed: pytest" in text
    assert "no failures" in run_cli("failures", "--session", "other").stdout
    missing = run_cli("failures", "--session", SID, "--transcript", str(tmp_path / "nope"))
    assert missing.exit_code == 2
    assert run_cli("failures").exit_code == 2  # --session is required


def rollout(path: Path, *, at: str, code: int, command: str) -> Path:
    """A Codex rollout line as Codex 0.171 writes a finished command (tests/test_live_hosts.py
    runs the real one)."""
    item = {"type": "CommandExecution", "id": "call_1", "command": ["/bin/bash", "-lc", command],
            "status": "failed" if code else "completed", "exit_code": code,
            "aggregated_output": "token=SECRET-VALUE-123"}  # fmt: skip
    entry = {"timestamp": at, "type": "event_msg",
             "payload": {"type": "item_completed", "item": item}}  # fmt: skip
    path.write_text(json.dumps(entry) + "\n" + "garbage CommandExecution\n")
    return path


def test_codex_failures_come_from_its_rollout(run_cli, tmp_path):
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    ok = rollout(tmp_path / "ok.jsonl", at=now, code=0, command="pytest -x")
    assert stop(run_cli, "codex", tmp_path, transcript_path=str(ok)) == ""
    bad = rollout(tmp_path / "bad.jsonl", at=now, code=2,
                  command="pytest -x --token=SECRET-VALUE-123")  # fmt: skip
    doc = json.loads(stop(run_cli, "codex", tmp_path, transcript_path=str(bad)))
    assert "1 failed tool call(s) (pytest)" in doc["reason"]
    assert "SECRET" not in doc["reason"]  # only allowlisted command tokens, never values
    listed = json.loads(run_cli("failures", "--session", SID, "--transcript", str(bad),
                                "--json").stdout)  # fmt: skip
    assert [i["detail"] for i in listed["items"]] == ["pytest"]
