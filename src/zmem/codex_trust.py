"""Whether Codex will run ZMem's hooks (issue 49). Codex (0.171) runs a hook only once the
person has trusted it (its /hooks review, or "Trust all" at start); `codex exec` skips the
others without a word. It records trust in its config.toml, per hook, as
[hooks.state."<hooks file>:<event>:<group>:<handler>"] trusted_hash = "sha256:<hex>" (or
enabled = false), the hash being over the hook's definition: this module recomputes both from
the hooks file and says which of ZMem's hooks Codex will run."""

from __future__ import annotations

import hashlib
import json
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The states Codex's own review shows.
TRUSTED, UNTRUSTED, MODIFIED, DISABLED = "trusted", "untrusted", "modified", "disabled"

# Events whose matcher Codex leaves out of the hash (it does not apply to them).
_NO_MATCHER = {"pre_model_request", "post_model_request", "user_prompt_submit", "stop",
               "interrupt"}  # fmt: skip
_SHORT_TIMEOUT = {"session_end", "interrupt"}  # default 1 s, at most 3
_CONTEXT_LIMIT = {"pre_tool_use", "post_tool_use", "session_start", "user_prompt_submit",
                  "subagent_start"}  # fmt: skip

HOW_TO_TRUST = (
    'start `codex` and choose "Trust all and continue" (or review them in /hooks); '
    "`codex exec` skips untrusted hooks silently"
)


@dataclass(frozen=True)
class HookTrust:
    event: str  # as the hooks file names it: SessionStart
    key: str  # Codex's key in [hooks.state]
    state: str  # TRUSTED, UNTRUSTED, MODIFIED or DISABLED


def snake(event: str) -> str:
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", event).lower()


def hook_hash(event: str, group: Mapping[str, Any], handler: Mapping[str, Any]) -> str:
    """The hash Codex compares with trusted_hash: SHA-256 of the hook's identity as compact
    JSON with sorted keys (defaults filled in, fields Codex does not read left out)."""
    name = snake(event)
    timeout = handler.get("timeout")
    if not isinstance(timeout, int) or isinstance(timeout, bool):
        timeout = 1 if name in _SHORT_TIMEOUT else 600
    timeout = max(1, timeout)
    if name in _SHORT_TIMEOUT:
        timeout = min(timeout, 3)
    one: dict[str, Any] = {
        "type": "command", "command": handler.get("command"), "timeout": timeout,
        "async": handler.get("async") is True,
    }  # fmt: skip
    if handler.get("statusMessage") is not None:
        one["statusMessage"] = handler["statusMessage"]
    if name in _CONTEXT_LIMIT and handler.get("additionalContextLimit") is not None:
        one["additionalContextLimit"] = handler["additionalContextLimit"]
    ident: dict[str, Any] = {"event_name": name, "hooks": [one]}
    if name not in _NO_MATCHER and group.get("matcher") is not None:
        ident["matcher"] = group["matcher"]
    text = json.dumps(ident, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def codex_home(env: Mapping[str, str], home: Path) -> Path:
    return Path(env["CODEX_HOME"]).expanduser() if env.get("CODEX_HOME") else home / ".codex"


def key_path(env: Mapping[str, str], home: Path) -> str:
    """The hooks file as Codex spells it in its keys: under $CODEX_HOME fully resolved, else
    $HOME/.codex/hooks.json as written (a symlinked HOME is not resolved)."""
    if env.get("CODEX_HOME"):
        return os.path.realpath(Path(env["CODEX_HOME"]).expanduser() / "hooks.json")
    return str(home / ".codex" / "hooks.json")


def recorded(config_toml: Path) -> dict[str, dict[str, Any]]:
    """[hooks.state] of Codex's config.toml; {} when there is none or it does not parse (Codex
    then trusts nothing either)."""
    try:
        doc = tomllib.loads(config_toml.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}
    state = (doc.get("hooks") or {}).get("state") if isinstance(doc.get("hooks"), dict) else None
    return (
        {k: v for k, v in state.items() if isinstance(v, dict)} if isinstance(state, dict) else {}
    )


def states(
    hooks: Mapping[str, Any], path_in_key: str, config_toml: Path,
    select: Callable[[str], bool] = lambda command: True,
) -> list[HookTrust]:  # fmt: skip
    """Each selected hook of a hooks document (by its command), with the state Codex gives
    it. Indexes count every entry, selected or not, as Codex's keys do."""
    trust = recorded(config_toml)
    out = []
    for event, groups in (hooks.get("hooks") or {}).items():
        if not isinstance(groups, list):
            continue
        for gi, group in enumerate(groups):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            for hi, handler in enumerate(handlers if isinstance(handlers, list) else []):
                if not isinstance(handler, dict) or not select(str(handler.get("command"))):
                    continue
                key = f"{path_in_key}:{snake(event)}:{gi}:{hi}"
                entry = trust.get(key, {})
                if entry.get("enabled") is False:
                    state = DISABLED
                elif "trusted_hash" not in entry:
                    state = UNTRUSTED
                elif entry["trusted_hash"] == hook_hash(event, group, handler):
                    state = TRUSTED
                else:
                    state = MODIFIED
                out.append(HookTrust(event, key, state))
    return out


def describe(found: list[HookTrust]) -> str | None:
    """One line on what Codex will skip, or None when it runs them all."""
    skipped = [h for h in found if h.state != TRUSTED]
    if not skipped:
        return None
    by_state: dict[str, list[str]] = {}
    for h in skipped:
        by_state.setdefault(h.state, []).append(h.event)
    if len(skipped) == len(found) and set(by_state) == {UNTRUSTED}:
        which = f"ZMem's {len(found)} hooks: none is trusted yet"
    else:
        said = "; ".join(f"{state}: {', '.join(events)}" for state, events in by_state.items())
        which = f"{len(skipped)} of ZMem's {len(found)} hooks ({said})"
    if set(by_state) == {DISABLED}:
        return f"Codex will not run {which}: enable them in its /hooks"
    return f"Codex will not run {which}; to trust them, {HOW_TO_TRUST}"


def plugins(codex: Path) -> list[tuple[str, str, dict[str, Any]]]:
    """(plugin id, hooks file as its keys name it, the hooks document) of each zmem plugin
    Codex has enabled. A plugin hook's key is `<id>:<file relative to the plugin>:...` and its
    trusted_hash the same definition hash (Codex also fingerprints the plugin's files, which a
    plugin update changes: it then asks for a review again)."""
    try:
        doc = tomllib.loads((codex / "config.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []
    enabled = doc.get("plugins") if isinstance(doc.get("plugins"), dict) else {}
    out = []
    for plugin_id, entry in enabled.items():
        name, _, market = plugin_id.partition("@")
        if name != "zmem" or not market or not isinstance(entry, dict) or not entry.get("enabled"):
            continue
        versions = sorted((codex / "plugins" / "cache" / market / name).glob("*/.codex-plugin"),
                          key=lambda p: p.stat().st_mtime)  # fmt: skip
        if not versions:
            continue
        root = versions[-1].parent  # the copy installed last
        try:
            manifest = json.loads((root / ".codex-plugin" / "plugin.json").read_text("utf-8"))
            rel = str(manifest.get("hooks") or "hooks/hooks.json").removeprefix("./")
            hooks = json.loads((root / rel).read_text("utf-8"))
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(hooks, dict):
            out.append((plugin_id, rel, hooks))
    return out
