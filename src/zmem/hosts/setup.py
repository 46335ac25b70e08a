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

from zmem import installation, untrusted
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


# A host's settings file can be large (~/.claude.json keeps every project's history); past this
# it is not one setup should rewrite.
SETTINGS_CAP = 64 << 20


def _read_text(path: Path) -> str | None:
    """A host config as text; None when there is none. A path that is not a regular file (a
    FIFO, a device such as /dev/null behind a symlink) is refused before a byte is read: setup
    would hang on it, or write a world-writable file where it points."""
    special = untrusted.kind(path)
    if special is not None:
        raise UsageError(
            f"{path} is {special}, not a regular file; setup reads and writes regular files only"
        )
    try:
        raw = untrusted.read_head(path, SETTINGS_CAP + 1, deadline_s=10.0)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(raw) > SETTINGS_CAP:
        raise UsageError(f"{path} is over {SETTINGS_CAP >> 20} MB; not a settings file setup edits")
    try:
        return raw.decode("utf-8")
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
    # The backup is the file as it was before ZMem first touched it: one that already holds
    # an entry of ours (a setup run again, a hook moved to a new port) is not that file.
    untouched = not any(is_ours(e) for entries in hooks.values() for e in entries)
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
    return Change(path, before, _dump(doc), summary, private=http is not None, backup=untouched)


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
    config = http_hook.new_config(previous, data_dir)
    return Change(
        path, before, config.text(), [*summary, f"http prompt hook on 127.0.0.1:{config.port}"],
        private=True, backup=False,
    )  # fmt: skip


def move_http_hook(data_dir: Path, env: dict[str, str]) -> http_hook.HttpConfig | None:
    """The http prompt hook on a new port with a new secret: Claude Code's settings (the URL
    and the bearer of ZMem's http entries) and <data dir>/hookd-http.json, as `setup claude`
    writes them, nothing else touched. For the session start that finds another user's program
    on the port (issue 48); None when the settings hold no such entry (nothing to move)."""
    path = host_files(env)["claude"]
    before, doc = _read_json(path)
    hooks = _hooks_of(path, doc)
    new = http_hook.new_config(None, data_dir)
    moved = False
    for entries in hooks.values():
        for entry in entries:
            handlers = entry.get("hooks") if isinstance(entry, dict) else None
            for h in handlers if isinstance(handlers, list) else []:
                url = str(h.get("url", "")) if isinstance(h, dict) else ""
                if h.get("type") == "http" and http_hook.PATH_PREFIX in url:
                    event = url.rsplit("/", 1)[-1]
                    h.update(_http_handler(event, new))
                    moved = True
    if not moved:
        return None
    config_path = http_hook.config_path(data_dir)
    apply([
        Change(path, before, _dump(doc), ["http prompt hook moved"], private=True, backup=False),
        Change(config_path, _read_text(config_path), new.text(), [], private=True, backup=False),
    ])  # fmt: skip
    return new


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


def _target(path: Path) -> Path:
    """Where a write to `path` lands: through a symlink to the file it names (the link is the
    user's, kept as it is), else the path itself."""
    try:
        return path.resolve(strict=False) if path.is_symlink() else path
    except (OSError, RuntimeError):  # a symlink loop
        raise UsageError(f"{path} is a symlink that leads nowhere readable; fix it first") from None


def _refuse_unwritable(c: Change) -> None:
    """A file the user made read-only stays as it is: writing beside it and renaming over it
    would succeed (even as root), and silently undo the user's choice. A path that is not a
    regular file (a FIFO, a device) is never written."""
    special = untrusted.kind(c.path)
    if special is not None:
        raise UsageError(f"{c.path} is {special}, not a regular file; setup will not write it")
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
                    _target(c.path).unlink(missing_ok=True)  # a link of the user's stays
                except OSError as exc:
                    raise UsageError(f"cannot remove {c.path}: {exc.strerror or exc}") from None
            else:
                _write(c)
            written.append(c.path)
        for extra in c.drop:
            extra.unlink(missing_ok=True)
    return written


def _write(c: Change) -> None:
    """The new text written whole beside the file and renamed over it: through a symlink to
    its target (the link stays), with the file's own mode (never wider than 0600 for one that
    holds the http hook's secret; 0644 less the umask for a new file), never following a
    symlink ZMem did not find there. The backup keeps the bytes and the mode the file had."""
    assert c.after is not None
    target = _target(c.path)
    tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
    backup = c.path.with_name(c.path.name + BACKUP_SUFFIX)
    try:
        old_mode = target.stat().st_mode & 0o7777 if c.before is not None else None
    except OSError:
        old_mode = None
    if c.restored and backup.exists():
        try:
            old_mode = backup.stat().st_mode & 0o7777  # the mode the file had before setup
        except OSError:
            pass
    mode = 0o644 & ~_umask() if old_mode is None else old_mode
    if c.private:
        mode = 0o600  # it holds the http hook's secret
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(c.after)
        os.chmod(tmp, mode)
        if c.before is not None and c.backup and not backup.exists():
            fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(c.before)
            os.chmod(backup, 0o600 if old_mode is None else old_mode)
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UsageError(f"cannot write {c.path}: {exc.strerror or exc}") from None


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
