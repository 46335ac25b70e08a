"""The host-side checks, from the hosts' own files, only ever parsed: Claude Code settings and
Codex config.toml (native memory that competes with ZMem, hook env that points elsewhere), the
Windows shell the hook commands need, the plugin's host surfaces and installed copies, and the
wiring `zmem setup` wrote (which install each host runs, and whether its paths still exist)."""

from __future__ import annotations

import re
import shutil
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from zmem import config, installation
from zmem.doctor import base
from zmem.doctor.base import FAIL, NA, OK, WARN, check, read_json


def _git_bash(env: Mapping[str, str]) -> str | None:
    pinned = env.get("CLAUDE_CODE_GIT_BASH_PATH")
    if pinned:
        return pinned if Path(pinned).is_file() else None
    found = shutil.which("bash", path=env.get("PATH"))
    # System32\bash.exe (and the WindowsApps alias) start WSL, not a Windows POSIX shell.
    if found and not re.search(r"(?i)[\\/](system32|windowsapps)[\\/]", found):
        return found
    for var in ("ProgramFiles", "ProgramFiles(x86)", "LOCALAPPDATA"):
        for sub in ("Git/bin/bash.exe", "Programs/Git/bin/bash.exe"):
            if env.get(var) and (Path(env[var]) / sub).is_file():
                return str(Path(env[var]) / sub)
    for root in ("C:/cygwin64", "C:/cygwin"):
        if (Path(root) / "bin" / "bash.exe").is_file():
            return str(Path(root) / "bin" / "bash.exe")
    return None


def windows_shell(env: Mapping[str, str]) -> dict[str, Any]:
    if not base.windows():
        return check("windows-shell", NA, f"not Windows ({sys.platform})")
    node, bash = shutil.which("node", path=env.get("PATH")), _git_bash(env)
    extra = {"node": node, "bash": bash}
    if bash is None:
        detail = "no Git Bash or Cygwin bash: the hook commands need a POSIX shell (install Git "
        detail += "for Windows or set CLAUDE_CODE_GIT_BASH_PATH)"
        return check("windows-shell", FAIL, detail, **extra)
    if node is None:
        return check("windows-shell", WARN, f"bash {bash}; node not on PATH", **extra)
    return check("windows-shell", OK, f"node {node}; bash {bash}", **extra)


# ---- host configuration ------------------------------------------------------------------


def _claude_dir(env: Mapping[str, str], home: Path) -> Path:
    return (
        Path(env["CLAUDE_CONFIG_DIR"]).expanduser()
        if env.get("CLAUDE_CONFIG_DIR")
        else home / ".claude"
    )


def claude_settings(
    env: Mapping[str, str], home: Path, project: str | None
) -> list[tuple[Path, dict[str, Any]]]:
    """Claude Code's settings files that exist, lowest precedence first (user, project, local,
    managed)."""
    paths = [_claude_dir(env, home) / "settings.json"]
    if project:
        paths += [Path(project) / ".claude" / "settings.json"]
        paths += [Path(project) / ".claude" / "settings.local.json"]
    managed = {
        "darwin": "/Library/Application Support/ClaudeCode/managed-settings.json",
        "win32": "C:/ProgramData/ClaudeCode/managed-settings.json",
    }.get(sys.platform, "/etc/claude-code/managed-settings.json")
    paths.append(Path(managed))
    return [(p, doc) for p in paths if (doc := read_json(p)) is not None]


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def _claude_memory(env: Mapping[str, str], home: Path, project: str | None) -> dict[str, Any]:
    cdir = _claude_dir(env, home)
    if not (cdir.is_dir() or (home / ".claude.json").is_file()):
        return {"installed": False}
    # The highest-precedence file that sets autoMemoryEnabled decides; the
    # CLAUDE_CODE_DISABLE_AUTO_MEMORY variable (in the environment or a settings "env" block)
    # overrides every file.
    enabled, source = True, "default"
    for path, doc in claude_settings(env, home, project):
        if "autoMemoryEnabled" in doc:
            enabled, source = doc["autoMemoryEnabled"] is not False, str(path)
    for path, doc in claude_settings(env, home, project):
        if _truthy((doc.get("env") or {}).get("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "")):
            enabled, source = False, f"{path} env"
    if _truthy(env.get("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "")):
        enabled, source = False, "CLAUDE_CODE_DISABLE_AUTO_MEMORY"
    stores = sorted((cdir / "projects").glob("*/memory/MEMORY.md"))
    return {
        "installed": True,
        "auto_memory": enabled,
        "source": source,
        "memory_files": len(stores),
    }


def _codex_memory(env: Mapping[str, str], home: Path, project: str | None) -> dict[str, Any]:
    cdir = Path(env["CODEX_HOME"]).expanduser() if env.get("CODEX_HOME") else home / ".codex"
    if not cdir.is_dir():
        return {"installed": False}
    enabled, source, unreadable = False, "default", []
    files = [cdir / "config.toml"] + ([Path(project) / ".codex" / "config.toml"] if project else [])
    for path in files:
        try:
            doc = tomllib.loads(path.read_text("utf-8"))
        except FileNotFoundError:
            continue
        except (OSError, ValueError):
            unreadable.append(str(path))
            continue
        features = doc.get("features") or {}
        if "memories" in features:
            enabled, source = features["memories"] is True, str(path)
        table = doc.get("memories") or {}
        if table.get("generate_memories") is False and table.get("use_memories") is False:
            enabled, source = False, f"{path} [memories]"
    present = (cdir / "memories" / "MEMORY.md").is_file()
    return {
        "installed": True,
        "memories": enabled,
        "source": source,
        "memory_files": int(present),
        "unreadable": unreadable,
    }


def native_memory(env: Mapping[str, str], home: Path, project: str | None) -> dict[str, Any]:
    claude, codex = _claude_memory(env, home, project), _codex_memory(env, home, project)
    extra = {"claude": claude, "codex": codex}
    if not claude["installed"] and not codex["installed"]:
        return check("native-memory", NA, "neither Claude Code nor Codex config found", **extra)
    conflicts = []
    if claude.get("auto_memory"):
        where = "by default" if claude["source"] == "default" else f"per {claude['source']}"
        conflicts.append(
            f'Claude Code auto memory is on ({where}; set "autoMemoryEnabled": false in '
            "~/.claude/settings.json)"
        )
    if codex.get("memories"):
        conflicts.append(
            f"Codex memories are on (per {codex['source']}; set memories = false under [features])"
        )
    if conflicts:
        detail = "a second memory competes with ZMem: " + "; ".join(conflicts)
        return check("native-memory", WARN, detail, **extra)
    if codex.get("unreadable"):
        return check(
            "native-memory", WARN, f"unparsable: {', '.join(codex['unreadable'])}", **extra
        )
    return check("native-memory", OK, "host native memory is off", **extra)


def _default_root() -> Path | None:
    from zmem import installation

    root = installation.PLUGIN_DIR  # the plugin tree this package carries
    return root if (root / "skills" / "memory" / "SKILL.md").is_file() else None


def _installed_plugins(home: Path) -> dict[str, list[str]]:
    pattern = {
        "claude": (".claude/plugins/cache", "*/zmem*"),
        "codex": (".codex/plugins/cache", "*/zmem"),
    }
    return {
        host: sorted(str(p) for p in (home / folder).glob(glob))
        for host, (folder, glob) in pattern.items()
    }


def surfaces(repo_root: str | None, home: Path) -> dict[str, Any]:
    root = Path(repo_root) if repo_root else _default_root()
    installed = _installed_plugins(home)
    if root is None:
        detail = "pass --repo-root <zmem checkout or plugin root> to inspect its files"
        return check("host-surfaces", NA, detail, installed=installed)
    wanted = {
        "claude-plugin": root / ".claude-plugin" / "plugin.json",
        "claude-hooks": root / "hooks" / "hooks.json",
        "zcode-hooks": root / "hooks" / "zcode.json",
        "memory-skill": root / "skills" / "memory" / "SKILL.md",
        "store-script": root / "skills" / "memory" / "scripts" / "store.py",
        "doctor-script": root / "skills" / "memory" / "scripts" / "doctor.py",
        "launcher": root / "hooks" / "zmem_hook.py",
        # The launcher's work: without it every hook exits 0 silently (error=launcher in the log).
        "launcher-module": root / "hooks" / "zmem_launch.py",
        # Optional until the repo-local Codex lane exists.
        "codex-plugin": root / ".codex-plugin" / "plugin.json",
        "codex-hooks": root / "hooks" / "codex.json",
    }
    optional = ("codex-plugin", "codex-hooks")
    found: dict[str, bool] = {}
    for name, path in wanted.items():
        ok = path.is_file()
        if ok and path.suffix == ".json":
            ok = read_json(path) is not None
        found[name] = ok
    missing = [k for k, v in found.items() if not v and k not in optional]
    status = OK if not missing else WARN
    detail = f"{root}: " + ("all present" if not missing else "missing " + ", ".join(missing))
    absent = [k for k in optional if not found[k]]
    if absent:
        detail += f" (optional, absent: {', '.join(absent)})"
    return check(
        "host-surfaces",
        status,
        detail,
        root=str(root),
        surfaces=found,
        optional=list(optional),
        installed=installed,
    )


def claude_plugin(env: Mapping[str, str], home: Path) -> dict[str, Any]:
    """Whether Claude Code can load the zmem plugin: it reads a plugin added from a directory
    marketplace (`make marketplace`) in that directory, not from its own copy (2.1.332: "Read
    from: <dir>/plugins/zmem"), and once the directory moves it fails to load ("cache-miss")
    with no message in a session."""
    plugins = _claude_dir(env, home) / "plugins"
    installed = (read_json(plugins / "installed_plugins.json") or {}).get("plugins")
    names = [k.split("@", 1)[1] for k in installed or {} if k.startswith("zmem@") and "@" in k]
    if not names:
        return check("claude-plugin", NA, "the zmem plugin is not installed in Claude Code")
    markets = read_json(plugins / "known_marketplaces.json") or {}
    gone = []
    for name in names:
        source = (markets.get(name) or {}).get("source") or {}
        where = source.get("path") if source.get("source") == "directory" else None
        if isinstance(where, str) and not (Path(where) / "plugins" / "zmem").is_dir():
            gone.append((name, where))
    if not gone:
        return check("claude-plugin", OK, f"zmem@{', zmem@'.join(names)} loads", marketplaces=names)
    name, where = gone[0]
    return check(
        "claude-plugin", FAIL,
        f"Claude Code reads zmem@{name} from {where}, which no longer holds it: the plugin does "
        f"not load (and no session says so). Put the directory back, or run `claude plugin "
        f"marketplace add <its new place>`",
        marketplaces=names, missing=where,
    )  # fmt: skip


# ---- the wiring `zmem setup` wrote ---------------------------------------------------------


def codex_hooks(env: Mapping[str, str], home: Path) -> dict[str, Any]:
    """Whether Codex will run ZMem's hooks, those `zmem setup codex` wired and the zmem
    plugin's: it skips a hook nobody trusted in its /hooks review (silently under `codex
    exec`), and one changed since."""
    from zmem import codex_trust

    codex = codex_trust.codex_home(env, home)
    found = []
    hooks_file = codex / "hooks.json"
    doc = read_json(hooks_file)
    if isinstance(doc, dict) and installation.wired_hooks(hooks_file):
        found += codex_trust.states(
            doc, codex_trust.key_path(env, home), codex / "config.toml",
            lambda command: any(m in command for m in installation.HOOK_MARKS),
        )  # fmt: skip
    for plugin_id, rel, hooks in codex_trust.plugins(codex):
        found += codex_trust.states(hooks, f"{plugin_id}:{rel}", codex / "config.toml")
    if not found:
        return check("codex-hooks", NA, "no ZMem hooks in Codex (`zmem setup codex` wires them)")
    states = {h.key: h.state for h in found}
    line = codex_trust.describe(found)
    if line is None:
        return check("codex-hooks", OK, f"Codex trusts ZMem's {len(found)} hooks", states=states)
    return check("codex-hooks", WARN, line, states=states)


def _install_of(python: str) -> str:
    prefix = Path(python).parent.parent
    if prefix.absolute() == Path(sys.prefix).absolute():
        return f"this install ({installation.detect().describe()})"
    return str(prefix)


def wiring(env: Mapping[str, str], home: Path) -> dict[str, Any]:
    """Per host: whether `zmem setup` wired it, to which install, and whether every path its
    hooks (or its MCP entry, or its Hermes plugins) name still exists."""
    codex_home = Path(env["CODEX_HOME"]).expanduser() if env.get("CODEX_HOME") else home / ".codex"
    files = {
        "claude": _claude_dir(env, home) / "settings.json",
        "codex": codex_home / "hooks.json",
        "zcode": Path(env.get("ZMEM_ZCODE_SETTINGS") or home / ".zcode" / "settings.json"),
    }
    hosts: dict[str, dict[str, Any]] = {}
    for host, path in files.items():
        targets = installation.wired_hooks(path)
        if not targets:
            hosts[host] = {"wired": False}
            continue
        python, launcher = targets[0]
        paths = [p for t in targets for p in t if p]
        hosts[host] = {
            "wired": True, "file": str(path), "python": python, "launcher": launcher,
            "install": _install_of(python) if python else None,
            "missing": sorted({p for p in paths if not Path(p).exists()}),
            "fix": f"zmem setup {host}",
        }  # fmt: skip
    if hosts["claude"]["wired"]:
        hosts["claude"]["prompt_hook"] = _prompt_hook(env, home)
    mcp = ((read_json(home / ".claude.json") or {}).get("mcpServers") or {}).get("zmem")
    if isinstance(mcp, dict) and mcp.get("command"):
        command = str(mcp["command"])
        hosts["mcp"] = {
            "wired": True, "file": str(home / ".claude.json"), "python": command,
            "install": _install_of(command),
            "missing": [] if Path(command).exists() else [command], "fix": "zmem setup mcp",
        }  # fmt: skip
    hermes_home = (
        Path(env["HERMES_HOME"]).expanduser() if env.get("HERMES_HOME") else home / ".hermes"
    )
    record = read_json(hermes_home / "plugins" / "zmem" / "zmem_install.json")
    if record is not None:
        paths = [str(p) for p in record.get("paths") or []]
        hosts["hermes"] = {
            "wired": True, "file": str(hermes_home / "plugins" / "zmem"),
            "install": str(record.get("prefix")),
            "missing": [p for p in paths if not Path(p).exists()], "fix": "zmem setup hermes",
        }  # fmt: skip
    wired = {h: v for h, v in hosts.items() if v["wired"]}
    if not wired:
        return check("host-wiring", NA, "no host wired by `zmem setup`", hosts=hosts)
    broken = {h: v for h, v in wired.items() if v["missing"]}
    # A prompt hook whose port another program holds sends it every prompt and the secret: a
    # failure (doctor exits non-zero), not a warning.
    taken = any(PORT_TAKEN in str(v.get("prompt_hook", "")) for v in wired.values())
    parts = []
    for host, v in wired.items():
        if v["missing"]:
            parts.append(
                f"{host} points at {v['missing'][0]}, which no longer exists: run `{v['fix']}` "
                "from the install you use"
            )
        else:
            parts.append(f"{host} -> {v['install']}")
        if v.get("prompt_hook"):
            parts[-1] += f" (prompt: {v['prompt_hook']})"
    status = FAIL if taken else WARN if broken else OK
    return check("host-wiring", status, "; ".join(parts), hosts=hosts)


def _prompt_hook(env: Mapping[str, str], home: Path) -> str:
    """How Claude Code's prompt reaches ZMem: the http hook's port (from the file `setup`
    writes; the resident layer's own reader is above this one) and who holds it now: its
    keeper, nobody (the next session starts it), or another program, which would receive the
    prompts and the secret. Or a command hook."""
    from zmem import ports
    from zmem.layout import HTTP_CONFIG

    data = config.default_data_dir(env, home)
    doc = read_json(data / HTTP_CONFIG) or {}
    port, secret = doc.get("port"), doc.get("secret")
    if not isinstance(port, int):
        return "command hook"
    where = f"http hook on 127.0.0.1:{port}"
    foreign = ports.foreign_owner(port)
    if foreign is not None:  # the kernel's table: another user's socket, whatever its argv
        return (
            f"{where}, {PORT_TAKEN} of {ports.user_name(foreign)} (uid {foreign}), which would "
            "receive the prompts and the secret: run `zmem setup claude` to move it"
        )
    # Whatever listens must prove it knows the secret (argv proves nothing): a program of this
    # user that imitates the keeper fails here too.
    proven = ports.challenge(port, secret, timeout=5.0) if isinstance(secret, str) else None
    if proven is None or (proven is False and ports.released(port, within=1.0)):
        # Released: the keeper this question woke found its install deleted and left.
        return f"{where}, keeper not running (the next Claude Code session starts it)"
    if proven:
        return f"{where}, keeper running"
    pids = sorted(ports.listener_pids(port) or ())
    named = f" (pid {pids[0]}: {' '.join(ports.cmdline(pids[0]))[:80]})" if pids else ""
    return (
        f"{where}, {PORT_TAKEN}{named} that cannot prove it is ZMem's keeper: run "
        "`zmem setup claude` to move it"
    )


PORT_TAKEN = "held by another program"
