"""One event type for every host: the normalizers that turn Claude Code, Codex and ZCode hook
payloads (and Hermes's tool-call events) into a HookEvent, and the table of which events each
host sends. Standard library only: the hook client imports this before it knows whether there
is any work."""

from __future__ import annotations

import re

# typing costs the hook client ~2.5 ms to import; the names are for annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

HOSTS = ("claude", "codex", "zcode")

# Events each host can send, spelled as the host spells them (Claude's spelling is canonical).
# Claude Code and Codex share nine events; Claude Code reports a failed tool call (a Bash
# command that exits non-zero included) as PostToolUseFailure, never as PostToolUse.
_CLAUDE_CODEX_EVENTS = frozenset(
    {
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "Stop",
        "PreCompact",
        "SubagentStart",
        "SubagentStop",
        "SessionEnd",
    }
)
HOST_EVENTS: dict[str, frozenset[str]] = {
    "claude": _CLAUDE_CODEX_EVENTS | {"PostToolUseFailure"},
    "codex": _CLAUDE_CODEX_EVENTS,
    # ZCode supports exactly seven events (spec, inject surface parity); PermissionRequest and
    # PostToolUseFailure exist there but ZMem has nothing to do on them.
    "zcode": frozenset(
        {
            "SessionStart",
            "UserPromptSubmit",
            "PreToolUse",
            "PermissionRequest",
            "PostToolUse",
            "PostToolUseFailure",
            "Stop",
        }
    ),
}

# Tools whose pending input is a hazard worth recalling on (spec: pre-tool inject matcher).
FILE_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})
HAZARD_TOOLS = FILE_TOOLS | {"Bash"}

# Other spellings hosts use for the same tools. Codex names its shell tool Bash and its patch
# tool apply_patch (aliases Edit/Write); ZCode's names are matched case-insensitively.
_TOOL_ALIASES = {
    "bash": "Bash",
    "shell": "Bash",
    "exec_command": "Bash",
    "edit": "Edit",
    "write": "Write",
    "multiedit": "MultiEdit",
    "notebookedit": "NotebookEdit",
    "apply_patch": "Edit",
}

_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+)$", re.MULTILINE)

# Hermes's names (hermes-agent 0.19.0) for the tools the ops ring records. A map of their own,
# not _TOOL_ALIASES: "terminal" or "patch" must not change what another host's event means.
# read_file stays out: the ring records Edit/Write/Bash events only (spec, query context),
# as the other hosts' PostToolUse matchers do.
HERMES_TOOLS = {"terminal": "Bash", "write_file": "Write", "patch": "Edit"}
# A tool result larger than this is not parsed for an exit code (the status field decides).
_RESULT_PARSE_MAX = 256 * 1024


class HookEvent:
    """One hook call, host-independent. A plain class, not a dataclass: the hook client imports
    this module on every call and `dataclasses` costs ~6 ms to import."""

    __slots__ = (
        "host",
        "name",
        "session_id",
        "cwd",
        "prompt",
        "tool_name",
        "command",
        "paths",
        "tool_failed",
        "source",
        "transcript_path",
        "agent_type",
        "task",
        "stop_hook_active",
        "query",
    )

    def __init__(
        self,
        host: str,
        name: str,
        session_id: str | None = None,
        cwd: str | None = None,
        prompt: str | None = None,
        tool_name: str | None = None,
        command: str | None = None,  # the shell command a Bash-like tool runs / ran
        paths: tuple[str, ...] = (),  # files a file tool touches / touched
        tool_failed: bool = False,
        source: str | None = None,
        transcript_path: str | None = None,
        agent_type: str | None = None,
        task: str | None = None,  # a subagent's delegated prompt, when the event carries it
        stop_hook_active: bool = False,
    ):
        self.host, self.name, self.session_id, self.cwd = host, name, session_id, cwd
        self.prompt, self.tool_name, self.command, self.paths = prompt, tool_name, command, paths
        self.tool_failed, self.source, self.transcript_path = tool_failed, source, transcript_path
        self.agent_type, self.task, self.stop_hook_active = agent_type, task, stop_hook_active
        # What a PreToolUse recalls on, once the dispatch has derived it (opsring.tool_query):
        # the check that there is anything to recall and the verb share one derivation.
        self.query: str | None = None


class BadPayload(ValueError):
    """The stdin payload is not a JSON object a hook can use."""


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def canonical_tool(name: Any) -> str | None:
    if not isinstance(name, str) or not name:
        return None
    return _TOOL_ALIASES.get(name.lower(), name)


def _command_text(tool_input: dict[str, Any]) -> str | None:
    cmd = tool_input.get("command")
    if isinstance(cmd, list):  # some Codex builds pass argv
        cmd = " ".join(str(part) for part in cmd)
    return _str(cmd)


def _paths(tool_name: str | None, raw_tool: Any, tool_input: dict[str, Any]) -> tuple[str, ...]:
    found: list[str] = []
    for key in ("file_path", "notebook_path", "path"):
        value = _str(tool_input.get(key))
        if value:
            found.append(value)
    edits = tool_input.get("edits")
    if isinstance(edits, list):
        for e in edits:
            if isinstance(e, dict) and _str(e.get("file_path")):
                found.append(e["file_path"])
    if isinstance(raw_tool, str) and raw_tool.lower() == "apply_patch":
        # Codex puts the whole patch in tool_input.command; its file headers name the paths.
        patch = _command_text(tool_input) or _str(tool_input.get("input")) or ""
        found += [m.strip() for m in _PATCH_FILE.findall(patch)]
    return tuple(dict.fromkeys(found))


def _failed(response: Any) -> bool:
    if isinstance(response, dict):
        for key in ("exit_code", "exitCode", "returncode"):
            code = response.get(key)
            if isinstance(code, int) and code != 0:
                return True
        if response.get("is_error") is True or response.get("interrupted") is True:
            return True
    return False


def normalize(host: str, event_name: str, payload: Any) -> HookEvent:
    """The host's payload as a HookEvent. Unknown extra fields are ignored; a payload that is
    not a JSON object raises BadPayload."""
    if host not in HOSTS:
        raise BadPayload(f"unknown host {host!r}")
    if not isinstance(payload, dict):
        raise BadPayload("payload is not a JSON object")
    raw_tool = payload.get("tool_name")
    tool = canonical_tool(raw_tool)
    tool_input = payload.get("tool_input")
    if not isinstance(tool_input, dict):
        tool_input = {}
    is_shell = tool == "Bash"
    failed = event_name == "PostToolUseFailure" or _failed(payload.get("tool_response"))
    task = _str(payload.get("prompt")) if event_name == "SubagentStart" else None
    if event_name == "SubagentStart" and task is None:
        task = _str(payload.get("task")) or _str(payload.get("description"))
    return HookEvent(
        host=host,
        name=event_name,
        session_id=_str(payload.get("session_id")),
        cwd=_str(payload.get("cwd")),
        prompt=(
            _str(payload.get("prompt"))
            if event_name == "UserPromptSubmit"
            else _str(payload.get("custom_instructions"))
            if event_name == "PreCompact"
            else None
        ),
        tool_name=tool,
        command=_command_text(tool_input) if is_shell else None,
        paths=() if is_shell else _paths(tool, raw_tool, tool_input),
        tool_failed=failed,
        source=_str(payload.get("source")) or _str(payload.get("trigger")),
        transcript_path=_str(payload.get("transcript_path")),
        agent_type=_str(payload.get("agent_type")),
        task=task,
        stop_hook_active=payload.get("stop_hook_active") is True,
    )


def hermes_tool_event(
    tool_name: Any,
    args: Any,
    *,
    session_id: Any,
    status: Any = None,
    result: Any = None,
) -> HookEvent | None:
    """A Hermes post_tool_call (or a tool call read back from a turn's messages) as a
    PostToolUse HookEvent; None for a tool the ring does not record. `status` is Hermes's
    "ok"/"error"; a terminal result whose JSON carries a non-zero exit_code failed too."""
    tool = HERMES_TOOLS.get(tool_name) if isinstance(tool_name, str) else None
    if tool is None:
        return None
    tool_input = args if isinstance(args, dict) else {}
    failed = (status is not None and status != "ok") or _failed(_result_object(result))
    if tool == "Bash":
        return HookEvent(
            host="hermes",
            name="PostToolUse",
            session_id=_str(session_id),
            tool_name=tool,
            command=_command_text(tool_input),
            tool_failed=failed,
        )
    paths = list(_paths(tool, tool_name, tool_input))
    # patch's mode="patch" carries a V4A patch, whose file headers are Codex's apply_patch's.
    paths += [m.strip() for m in _PATCH_FILE.findall(_str(tool_input.get("patch")) or "")]
    return HookEvent(
        host="hermes",
        name="PostToolUse",
        session_id=_str(session_id),
        tool_name=tool,
        paths=tuple(dict.fromkeys(paths)),
        tool_failed=failed,
    )


def _result_object(result: Any) -> Any:
    if isinstance(result, dict):
        return result
    if not isinstance(result, str) or len(result) > _RESULT_PARSE_MAX:
        return None
    text = result.lstrip()
    if not text.startswith("{"):
        return None
    import json  # only for a tool result; the hook client's cold path never gets here

    try:
        return json.loads(text)
    except ValueError:
        return None


class Outcome:
    """What a verb decided: the context text (None: print nothing) and the bg-log fields."""

    __slots__ = ("context", "reason", "fields")

    def __init__(
        self,
        context: str | None = None,
        reason: str = "empty-pool",
        fields: dict[str, Any] | None = None,
    ):
        self.context, self.reason = context, reason
        self.fields: dict[str, Any] = fields if fields is not None else {}
