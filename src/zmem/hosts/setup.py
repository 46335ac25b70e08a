"""`zmem setup HOST` and `zmem setup HOST --remove`: wiring this ZMem install into a host's own
configuration, and taking it out again, as a plan first (what file, which entries) and then the
write. Hook entries point at this install's interpreter and hook entry point (installation.py:
`<prefix>/bin/zmem-hook` for an installed package, never a source tree it was built from);
entries ZMem wrote before are replaced, everything else in the file is kept, a file ZMem changes
is backed up once beside itself, and `--remove` puts the file back as it was when nothing else
changed since."""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zmem import installation
from zmem.config import default_data_dir
from zmem.errors import UsageError
from zmem.resident import http_hook, wire

HOSTS = ("claude", "codex", "zcode", "hermes", "mcp")
# The environment a hook must see to find the store this install uses: hosts do not pass the
# shell's variables to hooks of a plugin they start later.
_CARRIED_ENV = ("ZMEM_DATA", "ZMEM_STORE")
BACKUP_SUFFIX = ".zmem-backup"
_TEMPLATES = {"claude": "hooks.json", "codex": "codex.json", "zcode": "zcode.json"}
PROMPT_HOOKS = ("http", "command")  # how `setup claude` wires the prompt (http: no process)
HTTP_HOOK_TIMEOUT_S = 10  # a resident process started cold answers in ~2 s; warm in ~20 ms


@dataclass
class Change:
    path: Path
    before: str | None  # None: the file does not exist yet
    after: str | None  # None: the file is deleted (a removal that leaves nothing of ours)
    summary: list[str] = field(default_factory=list)
    # Files ZMem made earlier that this change deletes (the backup, once it is restored).
    drop: list[Path] = field(default_factory=list)
    restored: bool = False  # `after` is the backup's own text: the file as it was before setup
    private: bool = False  # it holds the http hook's secret: written readable by the user alone
    backup: bool = True  # copy the file as it was before ZMem first changed it

    @property
    def changed(self) -> bool:
        return self.before != self.after or any(p.exists() for p in self.drop)


def hook_command(event: str, host: str, env: dict[str, str], install: installation.Install) -> str:
    carried = " ".join(f"{k}={shlex.quote(env[k])}" for k in _CARRIED_ENV if env.get(k))
    prefix = f"env {carried} " if carried else ""
    python, launcher = shlex.quote(str(install.python)), shlex.quote(str(install.launcher))
    return f"{prefix}{python} -S {launcher} {event} --host {host}"


def _template(host: str) -> dict[str, Any]:
    path = installation.HOOKS_DIR / _TEMPLATES[host]
    return json.loads(path.read_text(encoding="utf-8"))["hooks"]


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not UTF-8 text; fix it first") from None


def _read_json(path: Path) -> tuple[str | None, dict[str, Any]]:
    text = _read_text(path)
    if text is None:
        return None, {}
    try:
        doc = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise UsageError(f"{path} is not valid JSON ({exc}); fix it first") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{path} does not hold a JSON object; fix it first")
    return text, doc


def is_ours(entry: Any) -> bool:
    """A hook entry ZMem wrote (any install's: a launcher of ours in its command, or the http
    prompt hook's path in its URL)."""
    if not isinstance(entry, dict):
        return False
    handlers = [h for h in entry.get("hooks", []) or [] if isinstance(h, dict)]
    commands = [str(h.get("command", "")) for h in handlers]
    if any(http_hook.PATH_PREFIX in str(h.get("url", "")) for h in handlers):
        return True
    return any(mark in c for c in commands for mark in installation.HOOK_MARKS)


def _hooks_of(path: Path, doc: dict[str, Any]) -> dict[str, Any]:
    hooks = doc.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise UsageError(f'{path}: "hooks" is not an object; fix it first')
    for event, entries in (hooks or {}).items():
        if not isinstance(entries, list):
            raise UsageError(f'{path}: "hooks.{event}" is not a list; fix it first')
    return hooks if hooks is not None else {}


def _dump(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def hook_config(
    host: str,
    path: Path,
    env: dict[str, str],
    install: installation.Install,
    http: http_hook.HttpConfig | None = None,
) -> Change:
    """The host's settings file with ZMem's hook entries merged in: one per event the host
    sends, in the shape of the plugin's hooks file, other entries untouched. With `http`, the
    events it serves (the prompt) are Claude Code `http` hooks to the keeper's port, carrying
    the secret, and the file becomes readable by the user alone."""
    before, doc = _read_json(path)
    hooks = _hooks_of(path, doc)
    doc["hooks"] = hooks
    summary = []
    for event, entries in _template(host).items():
        kept = [e for e in hooks.get(event, []) if not is_ours(e)]
        ours = []
        for entry in entries:
            entry = json.loads(json.dumps(entry))
            if http is not None and event in http_hook.EVENTS:
                entry["hooks"] = [_http_handler(event, http)]
            else:
                for h in entry["hooks"]:
                    h["command"] = hook_command(event, host, env, install)
            ours.append(entry)
        replaced = len(hooks.get(event, [])) - len(kept)
        hooks[event] = kept + ours
        how = " (http)" if http is not None and event in http_hook.EVENTS else ""
        summary.append(f"{event}{how}: {'replaced' if replaced else 'added'}")
    return Change(path, before, _dump(doc), summary, private=http is not None)


def _http_handler(event: str, http: http_hook.HttpConfig) -> dict[str, Any]:
    return {
        "type": "http",
        "url": http.url(event),
        "headers": {"Authorization": f"Bearer {http.secret}"},
        "timeout": HTTP_HOOK_TIMEOUT_S,
    }


def http_config(data_dir: Path, remove: bool) -> Change:
    """<data dir>/hookd-http.json: the port and secret the keeper and the hook share. Kept as
    it is when valid (setup again changes nothing); removed with --remove."""
    path = http_hook.config_path(data_dir)
    before = _read_text(path)
    if remove:
        return Change(
            path, before, None, ["http prompt hook: port and secret removed"], backup=False
        )
    previous = http_hook.parse_config(before)
    summary = []
    if previous is not None and http_hook.held_by_another(data_dir, previous.port):
        # Another program took the port: it would receive the prompts and the secret. A new
        # port, and a new secret (the old one may have been sent to it already).
        summary.append(f"127.0.0.1:{previous.port} is held by another program: moved")
        previous = None
    config = http_hook.new_config(previous)
    return Change(
        path, before, config.text(), [*summary, f"http prompt hook on 127.0.0.1:{config.port}"],
        private=True, backup=False,
    )  # fmt: skip


def unhook_config(path: Path) -> Change:
    """The host's settings file without ZMem's hook entries. When what is left is the file as
    it was before setup (its backup), the backup's own bytes come back; when nothing is left of
    a file setup created, the file goes."""
    before, doc = _read_json(path)
    backup = path.with_name(path.name + BACKUP_SUFFIX)
    drop = [backup] if backup.exists() else []
    if before is None:
        return Change(path, None, None, ["not there"], drop)
    hooks = _hooks_of(path, doc)
    summary = []
    for event in list(hooks):
        kept = [e for e in hooks[event] if not is_ours(e)]
        if len(kept) != len(hooks[event]):
            summary.append(f"{event}: removed")
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]
    if not summary:
        return Change(path, before, before, ["nothing of ZMem's"], drop)
    if "hooks" in doc and not hooks:
        del doc["hooks"]
    after: str | None = _dump(doc)
    if backup.exists():
        original = _read_text(backup)
        try:
            same = original is not None and json.loads(original or "{}") == doc
        except ValueError:
            same = False
        if same:
            return Change(path, before, original, summary, drop, restored=True)
    elif not doc:
        after = None  # setup made this file; nothing else was ever in it
    return Change(path, before, after, summary, drop)


def _claude_mcp(home: Path, env: dict[str, str], install: installation.Install, remove: bool):
    path = home / ".claude.json"
    before, doc = _read_json(path)
    servers = doc.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise UsageError(f'{path}: "mcpServers" is not an object; fix it first')
    if remove:
        if "zmem" not in servers:
            return Change(path, before, before, ["nothing of ZMem's"])
        del servers["zmem"]
        if not servers:
            del doc["mcpServers"]
        return Change(path, before, json.dumps(doc, indent=2) + "\n", ["mcpServers.zmem: removed"])
    carried = {k: env[k] for k in _CARRIED_ENV if env.get(k)}
    doc["mcpServers"] = servers
    servers["zmem"] = {
        "type": "stdio",
        "command": str(install.python),
        "args": ["-m", "zmem", "mcp", "--stdio"],
        "env": carried,
    }
    return Change(path, before, json.dumps(doc, indent=2) + "\n", ["mcpServers.zmem"])


def _codex_mcp(codex_home: Path, install: installation.Install, remove: bool) -> Change:
    toml = codex_home / "config.toml"
    text = _read_text(toml)
    body = text or ""
    args = ["-m", "zmem", "mcp", "--stdio"]
    command = json.dumps(str(install.python))
    table = f"[mcp_servers.zmem]\ncommand = {command}\nargs = {json.dumps(args)}\n"
    start = body.find("[mcp_servers.zmem]")
    if start >= 0:
        end = body.find("\n[", start + 1)
        rest = body[end + 1 :] if end >= 0 else ""
        body = body[:start] + ("" if remove else table) + rest
        if remove:
            body = body.rstrip("\n") + "\n" if body.strip() else ""
    elif remove:
        return Change(toml, text, text, ["nothing of ZMem's"])
    else:
        body = body + ("\n" if body and not body.endswith("\n\n") else "") + table
    after: str | None = body
    if remove and not body and text is not None:
        after = None
    summary = ["[mcp_servers.zmem]" + (": removed" if remove else "")]
    return Change(toml, text, after, summary)


def mcp_configs(
    home: Path,
    codex_home: Path,
    env: dict[str, str],
    install: installation.Install,
    remove: bool = False,
) -> list[Change]:
    """The MCP server (stdio) registered with Claude Code (~/.claude.json) and Codex
    (config.toml), with the store's location in its environment."""
    return [_claude_mcp(home, env, install, remove), _codex_mcp(codex_home, install, remove)]


def host_files(env: dict[str, str]) -> dict[str, Path]:
    """Where each host keeps the hooks `setup` writes (doctor reads the same files)."""
    home = Path(env.get("HOME") or Path.home())
    codex_home = Path(env.get("CODEX_HOME") or home / ".codex")
    # ZCode publishes no settings schema we could read; its hook file has Claude's shape
    # (hooks/zcode.json), and this is where its users keep settings. Overridable.
    zcode = Path(env.get("ZMEM_ZCODE_SETTINGS") or home / ".zcode" / "settings.json")
    return {
        "claude": home / ".claude" / "settings.json",
        "codex": codex_home / "hooks.json",
        "zcode": zcode,
    }


def plan(
    host: str, env: dict[str, str] | None = None, *, remove: bool = False,
    install: installation.Install | None = None, prompt_hook: str | None = None,
) -> list[Change]:  # fmt: skip
    """The changes `setup HOST` makes. `prompt_hook`: "http" (Claude Code's default: the prompt
    starts no process) or "command"; other hosts take commands only."""
    env = dict(os.environ if env is None else env)
    install = install or installation.detect()
    home = Path(env.get("HOME") or Path.home())
    codex_home = Path(env.get("CODEX_HOME") or home / ".codex")
    if prompt_hook not in (None, *PROMPT_HOOKS):
        raise UsageError(f"--prompt-hook is one of {', '.join(PROMPT_HOOKS)}")
    if prompt_hook == "http" and host != "claude":
        raise UsageError(f"--prompt-hook http is for claude; {host} runs command hooks only")
    resident = wire.flag("ZMEM_HOOK_DAEMON", environ=env)
    if prompt_hook == "http" and not resident and not remove:
        raise UsageError(
            "--prompt-hook http is answered by the resident process, which ZMEM_HOOK_DAEMON=0 "
            "turns off: unset it, or use --prompt-hook command"
        )
    if host == "claude":
        path = host_files(env)[host]
        data_dir = default_data_dir(env, home)
        if remove:
            return [unhook_config(path), http_config(data_dir, remove=True)]
        if (prompt_hook or ("http" if resident else "command")) == "command":
            return [hook_config(host, path, env, install), http_config(data_dir, remove=True)]
        config = http_config(data_dir, remove=False)
        http = http_hook.parse_config(config.after)
        return [hook_config(host, path, env, install, http), config]
    if host in _TEMPLATES:
        path = host_files(env)[host]
        return [unhook_config(path) if remove else hook_config(host, path, env, install)]
    if host == "mcp":
        return mcp_configs(home, codex_home, env, install, remove)
    raise UsageError(f"unknown host {host!r} (one of: {', '.join(HOSTS)})")


def _refuse_unwritable(c: Change) -> None:
    """A file the user made read-only stays as it is: writing beside it and renaming over it
    would succeed (even as root), and silently undo the user's choice."""
    try:
        st = c.path.stat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UsageError(f"cannot read {c.path}: {exc.strerror or exc}") from None
    if not os.access(c.path, os.W_OK) or not st.st_mode & 0o222:
        raise UsageError(f"{c.path} is read-only; make it writable (chmod u+w) and run this again")


def apply(changes: list[Change]) -> list[Path]:
    """Write the changed files (each through a temporary file), backing up an existing one
    once as <name>.zmem-backup after its new text is staged. Every file is checked before
    any is written. Returns the files written (or deleted)."""
    todo = [c for c in changes if c.changed]
    for c in todo:
        if c.before != c.after:
            _refuse_unwritable(c)
    written = []
    for c in todo:
        if c.before != c.after:
            if c.after is None:
                try:
                    c.path.unlink(missing_ok=True)
                except OSError as exc:
                    raise UsageError(f"cannot remove {c.path}: {exc.strerror or exc}") from None
            else:
                _write(c)
            written.append(c.path)
        for extra in c.drop:
            extra.unlink(missing_ok=True)
    return written


def _write(c: Change) -> None:
    assert c.after is not None
    tmp = c.path.with_name(f".{c.path.name}.tmp{os.getpid()}")
    backup = c.path.with_name(c.path.name + BACKUP_SUFFIX)
    try:
        c.path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(c.after)
        if c.private:
            os.chmod(tmp, 0o600)  # it holds the http hook's secret
        elif c.before is not None:
            try:
                os.chmod(tmp, c.path.stat().st_mode & 0o7777)
            except OSError:
                pass
        if c.before is not None and c.backup and not backup.exists():
            with open(backup, "w", encoding="utf-8") as fh:
                fh.write(c.before)
        os.replace(tmp, c.path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UsageError(f"cannot write {c.path}: {exc.strerror or exc}") from None
