"""What this install of ZMem is and where its parts are: the plugin tree the package carries
(hook launchers, host manifests, the memory skill), the interpreter and hook entry point a host
should run, and how it was installed (uv tool, pipx, a plugin's venv, a virtual environment, a
checkout), so that a missing or broken piece names the exact command that mends it."""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
# The plugin tree: the root of the Claude Code / Codex plugin, shipped inside the package so a
# wheel carries it (docs/decisions.md, "The plugin tree lives in the package").
PLUGIN_DIR = PACKAGE_DIR / "plugin"
HOOKS_DIR = PLUGIN_DIR / "hooks"
LAUNCHER = HOOKS_DIR / "zmem_hook.py"
BOOTSTRAP = HOOKS_DIR / "bootstrap.py"
STORE_SCRIPT = PLUGIN_DIR / "skills" / "memory" / "scripts" / "store.py"
# The wheel installs this script into the environment's scripts directory (pyproject).
HOOK_SCRIPT = "zmem-hook"
# What every hook command ZMem writes contains, whichever launcher it runs.
HOOK_MARKS = ("zmem_hook.py", HOOK_SCRIPT)
# bootstrap.py leaves this file in the venv it makes for a plugin.
PLUGIN_VENV_MARK = ".zmem-plugin-venv"
DIST_NAME = "zmem"

KINDS = ("checkout", "uv-tool", "pipx", "plugin", "venv", "system")


def _scripts_dir(prefix: Path) -> Path:
    return prefix / ("Scripts" if os.name == "nt" else "bin")


def venv_python(prefix: Path) -> Path:
    return _scripts_dir(prefix) / ("python.exe" if os.name == "nt" else "python")


def site_packages(prefix: Path) -> Path:
    if os.name == "nt":
        return prefix / "Lib" / "site-packages"
    return prefix / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"


@dataclass(frozen=True)
class Install:
    kind: str  # one of KINDS
    prefix: Path  # the environment (sys.prefix)
    package_dir: Path  # the zmem package this process runs
    # What the install was made from, when the installer recorded it (a wheel's path, a
    # directory, a requirement): what a repair reinstalls.
    source: str | None = None
    checkout: Path | None = None  # the source tree, for a checkout

    @property
    def python(self) -> Path:
        """The interpreter a host runs: the environment's own path (never its symlink's
        target, which is the base interpreter without this environment's packages)."""
        candidate = venv_python(self.prefix)
        return candidate if candidate.exists() else Path(sys.executable)

    @property
    def launcher(self) -> Path:
        """The hook entry point a host's settings point at. For an installed package, the
        scripts-directory entry point (it survives upgrades and a change of Python); for a
        checkout, the launcher in its tree (the code moves with the checkout anyway)."""
        script = _scripts_dir(self.prefix) / HOOK_SCRIPT
        if self.checkout is None and script.is_file():
            return script
        return self.package_dir / "plugin" / "hooks" / "zmem_hook.py"

    @property
    def lasting(self) -> bool:
        """False where the hooks depend on a directory the user may move or delete."""
        return self.checkout is None

    def repair_command(self) -> str:
        """The one command that reinstalls this install with everything it should hold."""
        quoted = shlex.quote(self.source or DIST_NAME)
        if self.kind == "checkout":
            return f"make -C {shlex.quote(str(self.checkout))} install"
        if self.kind == "uv-tool":
            return f"uv tool install --reinstall {quoted}"
        if self.kind == "pipx":
            return f"pipx reinstall {DIST_NAME}"
        if self.kind == "plugin":
            boot = shlex.quote(str(BOOTSTRAP))
            return f"python3 {boot} --repair (or reinstall the plugin in its host)"
        return f"{shlex.quote(str(self.python))} -m pip install --force-reinstall {quoted}"

    def describe(self) -> str:
        if self.kind == "checkout":
            return f"a checkout at {self.checkout}"
        where = {
            "uv-tool": "a uv tool install",
            "pipx": "a pipx install",
            "plugin": "a host plugin's venv",
            "venv": "a virtual environment",
            "system": "the system Python",
        }[self.kind]
        return f"{where} at {self.prefix}"


def _checkout_of(package_dir: Path) -> Path | None:
    root = package_dir.parent.parent
    if package_dir.parent.name == "src" and (root / "pyproject.toml").is_file():
        return root
    return None


def _uv_source(prefix: Path) -> str | None:
    try:
        receipt = tomllib.loads((prefix / "uv-receipt.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for req in (receipt.get("tool") or {}).get("requirements") or []:
        if isinstance(req, dict) and req.get("name") == DIST_NAME:
            for key in ("path", "directory", "url", "editable"):
                if req.get(key):
                    return str(req[key])
            return DIST_NAME
    return None


def _pipx_source(prefix: Path) -> str | None:
    try:
        meta = json.loads((prefix / "pipx_metadata.json").read_text(encoding="utf-8"))
        return str(meta["main_package"]["package_or_url"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def detect(prefix: Path | None = None, package_dir: Path | None = None) -> Install:
    """This process's install (or, for doctor, the one at `prefix`)."""
    prefix = Path(prefix or sys.prefix)
    package_dir = Path(package_dir or PACKAGE_DIR)
    checkout = _checkout_of(package_dir)
    if checkout is not None:
        return Install("checkout", prefix, package_dir, str(checkout), checkout)
    if (prefix / "uv-receipt.toml").is_file():
        return Install("uv-tool", prefix, package_dir, _uv_source(prefix))
    if (prefix / "pipx_metadata.json").is_file():
        return Install("pipx", prefix, package_dir, _pipx_source(prefix))
    if (prefix / PLUGIN_VENV_MARK).is_file():
        return Install("plugin", prefix, package_dir)
    if sys.prefix != sys.base_prefix or (prefix / "pyvenv.cfg").is_file():
        return Install("venv", prefix, package_dir)
    return Install("system", prefix, package_dir)


def missing_piece(what: str, module: str) -> str:
    """The one line for a dependency this install lacks (one install is the whole product, so
    a missing one means a broken or partial install)."""
    install = detect()
    return (
        f"{what} needs the Python package {module!r}, which this install lacks "
        f"({install.describe()}); run: {install.repair_command()}"
    )


def _hook_targets(command: str) -> tuple[str | None, str | None]:
    """(interpreter, launcher) of a hook command ZMem wrote (`[env K=V ...] PY -S LAUNCHER
    <Event> --host H`)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None, None
    while words and (words[0] == "env" or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0])):
        words.pop(0)
    if not words:
        return None, None
    launcher = next((w for w in words[1:] if any(m in w for m in HOOK_MARKS)), None)
    return words[0], launcher


def wired_hooks(path: Path) -> list[tuple[str | None, str | None]]:
    """(interpreter, launcher) of every ZMem hook a host's settings file wires."""
    try:
        doc = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return []
    hooks = doc.get("hooks") if isinstance(doc, dict) else None
    found = []
    for entries in hooks.values() if isinstance(hooks, dict) else []:
        for entry in entries if isinstance(entries, list) else []:
            for h in (entry.get("hooks") or []) if isinstance(entry, dict) else []:
                command = str(h.get("command", "")) if isinstance(h, dict) else ""
                if any(m in command for m in HOOK_MARKS):
                    found.append(_hook_targets(command))
    return sorted(set(found), key=str)


def dangling(env: Mapping[str, str], home: Path) -> list[tuple[str, Path, str]]:
    """(host, settings file, missing path) for every hook wired to an interpreter or launcher
    that no longer exists (ZMem uninstalled, or its environment moved, without `setup
    --remove`): the host runs a dead command on every event. Reads three small files and
    imports nothing heavy: every CLI command may ask it (once a day)."""

    def _dir(var: str, default: Path) -> Path:
        return Path(env[var]).expanduser() if env.get(var) else default

    files = {
        "claude": _dir("CLAUDE_CONFIG_DIR", home / ".claude") / "settings.json",
        "codex": _dir("CODEX_HOME", home / ".codex") / "hooks.json",
        "zcode": Path(env.get("ZMEM_ZCODE_SETTINGS") or home / ".zcode" / "settings.json"),
    }
    out = []
    for host, path in files.items():
        for python, launcher in wired_hooks(path):
            gone = next((p for p in (python, launcher) if p and not Path(p).exists()), None)
            if gone:
                out.append((host, path, gone))
                break
    return out
