"""The host-side checks, from the hosts' own files, only ever parsed: Claude Code settings and
Codex config.toml (native memory that competes with ZMem, hook env that points elsewhere), the
Windows shell the hook commands need, and the plugin's host surfaces and installed copies."""

from __future__ import annotations

import re
import shutil
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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
    root = Path(__file__).resolve().parents[3]  # src/zmem/doctor/ -> the checkout
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
