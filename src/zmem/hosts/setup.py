"""`zmem setup HOST`: wiring this ZMem install into a host's own configuration in one step, as
a plan first (what file, which entries) and then the write. Hook entries point at this
install's interpreter and launcher; entries ZMem wrote before are replaced, everything else in
the file is kept, and a file ZMem changes is backed up once beside itself."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zmem.errors import UsageError

HOSTS = ("claude", "codex", "zcode", "hermes", "mcp")
ROOT = Path(__file__).resolve().parents[3]  # a checkout's root (hooks/ lives there)
MARK = "zmem_hook.py"  # what identifies a hook entry ZMem wrote
# The environment a hook must see to find the store this install uses: hosts do not pass the
# shell's variables to hooks of a plugin they start later.
_CARRIED_ENV = ("ZMEM_DATA", "ZMEM_STORE")


@dataclass
class Change:
    path: Path
    before: str | None  # None: the file does not exist yet
    after: str
    summary: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.before != self.after


def _launcher() -> Path:
    launcher = ROOT / "hooks" / MARK
    if not launcher.is_file():
        raise UsageError(
            f"no hook launcher at {launcher}: `zmem setup` wires the hooks of a checkout "
            "install (make install); for a plugin install use the host's plugin manager"
        )
    return launcher


def _command(event: str, host: str, env: dict[str, str]) -> str:
    carried = " ".join(f"{k}={shlex.quote(env[k])}" for k in _CARRIED_ENV if env.get(k))
    prefix = f"env {carried} " if carried else ""
    python, launcher = shlex.quote(sys.executable), shlex.quote(str(_launcher()))
    return f"{prefix}{python} -S {launcher} {event} --host {host}"


def _template(host: str) -> dict[str, Any]:
    name = {"claude": "hooks.json", "codex": "codex.json", "zcode": "zcode.json"}[host]
    return json.loads((ROOT / "hooks" / name).read_text(encoding="utf-8"))["hooks"]


def _read_json(path: Path) -> tuple[str | None, dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, {}
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        doc = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise UsageError(f"{path} is not valid JSON ({exc}); fix it first") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{path} does not hold a JSON object; fix it first")
    return text, doc


def hook_config(host: str, path: Path, env: dict[str, str]) -> Change:
    """The host's settings file with ZMem's hook entries merged in: one per event the host
    sends, in the shape of the plugin's hooks file, other entries untouched."""
    before, doc = _read_json(path)
    hooks = doc.get("hooks")
    if hooks is None:
        hooks = doc["hooks"] = {}
    if not isinstance(hooks, dict):
        raise UsageError(f'{path}: "hooks" is not an object; fix it first')
    summary = []
    for event, entries in _template(host).items():
        kept = [e for e in hooks.get(event, []) if not _ours(e)]
        ours = []
        for entry in entries:
            entry = json.loads(json.dumps(entry))
            for h in entry["hooks"]:
                h["command"] = _command(event, host, env)
            ours.append(entry)
        replaced = len(hooks.get(event, [])) - len(kept)
        hooks[event] = kept + ours
        summary.append(f"{event}: {'replaced' if replaced else 'added'}")
    after = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    return Change(path, before, after, summary)


def _ours(entry: Any) -> bool:
    if not isinstance(entry, dict):
        return False
    return any(MARK in str(h.get("command", "")) for h in entry.get("hooks", []) or [])


def mcp_configs(home: Path, codex_home: Path, env: dict[str, str]) -> list[Change]:
    """The MCP server (stdio) registered with Claude Code (~/.claude.json) and Codex
    (config.toml), with the store's location in its environment."""
    command = sys.executable
    args = ["-m", "zmem", "mcp", "--stdio"]
    carried = {k: env[k] for k in _CARRIED_ENV if env.get(k)}
    path = home / ".claude.json"
    before, doc = _read_json(path)
    servers = doc.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise UsageError(f'{path}: "mcpServers" is not an object; fix it first')
    servers["zmem"] = {"type": "stdio", "command": command, "args": args, "env": carried}
    claude = Change(path, before, json.dumps(doc, indent=2) + "\n", ["mcpServers.zmem"])

    toml = codex_home / "config.toml"
    try:
        text = toml.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = None
    table = f"[mcp_servers.zmem]\ncommand = {json.dumps(command)}\nargs = {json.dumps(args)}\n"
    body = text or ""
    if "[mcp_servers.zmem]" in body:
        start = body.index("[mcp_servers.zmem]")
        end = body.find("\n[", start + 1)
        body = body[:start] + table + (body[end + 1 :] if end >= 0 else "")
    else:
        body = body + ("\n" if body and not body.endswith("\n\n") else "") + table
    codex = Change(toml, text, body, ["[mcp_servers.zmem]"])
    return [claude, codex]


def plan(host: str, env: dict[str, str] | None = None) -> list[Change]:
    env = dict(os.environ if env is None else env)
    home = Path(env.get("HOME") or Path.home())
    codex_home = Path(env.get("CODEX_HOME") or home / ".codex")
    if host == "claude":
        return [hook_config("claude", home / ".claude" / "settings.json", env)]
    if host == "codex":
        return [hook_config("codex", codex_home / "hooks.json", env)]
    if host == "zcode":
        # ZCode publishes no settings schema we could read; its hook file has Claude's shape
        # (hooks/zcode.json), and this is where its users keep settings. Overridable.
        path = Path(env.get("ZMEM_ZCODE_SETTINGS") or home / ".zcode" / "settings.json")
        return [hook_config("zcode", path, env)]
    if host == "mcp":
        return mcp_configs(home, codex_home, env)
    raise UsageError(f"unknown host {host!r} (one of: {', '.join(HOSTS)})")


def apply(changes: list[Change]) -> list[Path]:
    """Write the changed files (each through a temporary file), backing up an existing one
    once as <name>.zmem-backup. Returns the files written."""
    written = []
    for c in changes:
        if not c.changed:
            continue
        c.path.parent.mkdir(parents=True, exist_ok=True)
        backup = c.path.with_name(c.path.name + ".zmem-backup")
        if c.before is not None and not backup.exists():
            shutil.copy2(c.path, backup)
        tmp = c.path.with_name(f".{c.path.name}.tmp{os.getpid()}")
        try:
            tmp.write_text(c.after, encoding="utf-8")
            os.replace(tmp, c.path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise UsageError(f"cannot write {c.path}: {exc.strerror or exc}") from None
        written.append(c.path)
    return written
