"""What `zmem hermes-install` does: copy the plugin directories shipped as package data
(zmem/hermes_provider/plugins/zmem and zmem_hooks) into $HERMES_HOME/plugins/, replacing only
earlier copies of themselves, and, when asked, activate them through Hermes's own CLI, which owns
config.yaml's format. All or nothing: on any failure the plugins dir and config.yaml are put
back as they were."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from zmem.errors import UsageError, ZMemError

PLUGINS = ("zmem", "zmem_hooks")
# Package data (pyproject), so a wheel install carries them too.
SOURCE = Path(__file__).resolve().parent / "plugins"
# Every shipped plugin imports this: how an earlier copy of ours is told from someone else's.
MARKER = "zmem.hermes_provider"
CONFIG_LINES = "memory:\n  provider: zmem\nplugins:\n  enabled: [zmem_hooks]"
HERMES_COMMANDS = (
    ("config", "set", "memory.provider", "zmem"),
    ("plugins", "enable", "zmem_hooks"),
)
HERMES_TIMEOUT_S = 60


# zmem's requirements a Hermes process never needs: the MCP server, the inspector and the model
# build. The bridge does not serve them, so Hermes, which imports `mcp` when it can, keeps
# finding its own or none.
_NOT_FOR_HERMES = frozenset({"mcp", "uvicorn", "starlette", "jinja2", "python-multipart", "onnx"})


class ActivationFailed(ZMemError):
    """Hermes's CLI refused the activation; everything was put back (exit 2: nothing written)."""


@dataclass
class Plan:
    home: Path
    hermes: str | None  # the hermes command, when activating
    created: list[Path] = field(default_factory=list)  # dirs this install made

    @property
    def plugins_dir(self) -> Path:
        return self.home / "plugins"


def default_home() -> Path:
    raw = os.environ.get("HERMES_HOME", "").strip()
    return Path(raw).expanduser() if raw else Path.home() / ".hermes"


def plan(home: str | None, *, activate: bool, hermes_bin: str | None) -> Plan:
    """Every check before anything is written; a problem is one UsageError (exit 2)."""
    for name in PLUGINS:
        src = SOURCE / name
        if not (src / "__init__.py").is_file() or not (src / "plugin.yaml").is_file():
            raise UsageError(
                f"the Hermes plugin files are not at {src}: run hermes-install from the zmem "
                "installed from its checkout (pip install -e <checkout>)"
            )
    target = Path(home).expanduser() if home else default_home()
    if target.exists() and not target.is_dir():
        raise UsageError(f"--hermes-home {target} is not a directory")
    plugins = target / "plugins"
    if plugins.exists() and not plugins.is_dir():
        raise UsageError(f"{plugins} is not a directory")
    for name in PLUGINS:
        dest = plugins / name
        if dest.exists() and not _ours(dest):
            raise UsageError(f"{dest} holds another plugin; move it away first")
    hermes = _hermes_command(hermes_bin) if activate else None
    return Plan(target.resolve(), hermes)


def _ours(path: Path) -> bool:
    try:
        return path.is_dir() and MARKER in (path / "__init__.py").read_text(encoding="utf-8")
    except OSError:
        return False


def _top_level(dist) -> set[str]:
    listed = dist.read_text("top_level.txt")
    if listed:
        return {n.strip() for n in listed.splitlines() if n.strip()}
    names = set()
    for f in dist.files or []:
        first = f.parts[0] if f.parts else ""
        if first in ("..", "__pycache__") or first.endswith((".dist-info", ".data", ".pth")):
            continue
        name = first[:-3] if first.endswith(".py") else first.split(".")[0]
        if name.isidentifier():
            names.add(name)
    return names


def bridge_info() -> dict:
    """What the plugins need to import zmem from this install when Hermes's Python lacks it
    (zmem_bridge.py): this Python's version, where the package and its requirements are, and
    the top-level modules of zmem's runtime requirements, closed over theirs."""
    import importlib.metadata as md

    from zmem import installation

    modules, seen = {"zmem"}, set()
    todo = [_req_name(r) for r in md.requires("zmem") or [] if "extra ==" not in r]
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if not name or key in seen or key in _NOT_FOR_HERMES:
            continue
        seen.add(key)
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        modules |= _top_level(dist)
        todo += [_req_name(r) for r in dist.requires or [] if "extra ==" not in r]
    install = installation.detect()
    paths = [str(installation.PACKAGE_DIR.parent)]
    site = str(installation.site_packages(install.prefix))
    if site not in paths:
        paths.append(site)
    return {
        "python": f"{sys.version_info[0]}.{sys.version_info[1]}",
        "prefix": str(install.prefix),
        "paths": paths,
        "modules": sorted(modules),
    }


def _req_name(requirement: str) -> str:
    found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return found.group(1) if found else ""


def find_hermes() -> str | None:
    """The hermes command when there is one (setup activates through it, else says how)."""
    try:
        return _hermes_command(None)
    except UsageError:
        return None


def uninstall(home: str | None, hermes: str | None) -> list[Path]:
    """Take out what install() put in: ZMem's plugin directories (only copies of ours) and,
    through Hermes's own CLI when there is one, the activation. Returns what was removed."""
    target = Path(home).expanduser() if home else default_home()
    removed = []
    for name in PLUGINS:
        dest = target / "plugins" / name
        if dest.exists() and _ours(dest):
            try:
                shutil.rmtree(dest)
            except OSError as exc:
                raise ZMemError(f"cannot remove {dest}: {exc.strerror or exc}") from exc
            removed.append(dest)
    if hermes is not None and removed:
        env = {**os.environ, "HERMES_HOME": str(target)}

        def hermes_says(*args: str) -> str:
            done = subprocess.run(
                [hermes, *args], env=env, stdin=subprocess.DEVNULL, capture_output=True,
                text=True, timeout=HERMES_TIMEOUT_S, check=False,
            )  # fmt: skip
            return done.stdout.strip()

        hermes_says("plugins", "disable", "zmem_hooks")
        # Only our own activation is undone: a provider chosen since is the user's.
        if hermes_says("config", "get", "memory.provider") == "zmem":
            hermes_says("config", "set", "memory.provider", "")
    return removed


def _hermes_command(explicit: str | None) -> str:
    if explicit:
        found = shutil.which(explicit)
        if found is None:
            raise UsageError(f"--hermes-bin {explicit} is not an executable")
        return found
    # The hermes next to this Python first: zmem installed in Hermes's own environment.
    beside = Path(sys.executable).parent / "hermes"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("hermes")
    if found is None:
        raise UsageError("--activate needs the hermes command: none on PATH (see --hermes-bin)")
    return found


def install(p: Plan) -> list[Path]:
    """Copy the plugins (and activate them when the plan says so). Returns the directories."""
    swapped: list[tuple[Path, Path | None]] = []  # (installed dir, the earlier copy kept aside)
    config = p.home / "config.yaml"
    try:
        config_before = config.read_bytes() if config.is_file() else None
    except OSError as exc:
        raise ZMemError(f"cannot read {config}: {exc}") from exc
    try:
        for d in (p.home, p.plugins_dir):
            if not d.exists():
                d.mkdir(parents=True)
                p.created.append(d)
        for name in PLUGINS:
            swapped.append(_place(SOURCE / name, p.plugins_dir / name))
        if p.hermes is not None:
            _activate(p.hermes, p.home)
    except BaseException as exc:
        if p.hermes is not None:
            _restore_config(config, config_before)
        for dest, old in reversed(swapped):
            shutil.rmtree(dest, ignore_errors=True)
            if old is not None:
                old.rename(dest)
        for d in reversed(p.created):
            shutil.rmtree(d, ignore_errors=True)
        if isinstance(exc, OSError):
            # A permission or a full disk: a refusal with nothing written, not a bug.
            raise ZMemError(f"cannot install into {p.plugins_dir}: {exc}") from exc
        raise
    for _, old in swapped:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    return [p.plugins_dir / name for name in PLUGINS]


def _place(src: Path, dest: Path) -> tuple[Path, Path | None]:
    # Staged beside the target and renamed in, so Hermes never loads a half-copied plugin.
    staged = dest.with_name(f".{dest.name}.{os.getpid()}.new")
    shutil.rmtree(staged, ignore_errors=True)
    try:
        shutil.copytree(src, staged, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        shutil.copy2(SOURCE / "zmem_bridge.py", staged / "zmem_bridge.py")
        text = json.dumps(bridge_info(), indent=2) + "\n"
        (staged / "zmem_install.json").write_text(text, encoding="utf-8")
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    old = None
    if dest.exists():
        old = dest.with_name(f".{dest.name}.{os.getpid()}.old")
        shutil.rmtree(old, ignore_errors=True)
        dest.rename(old)
    staged.rename(dest)
    return dest, old


def _activate(hermes: str, home: Path) -> None:
    env = {**os.environ, "HERMES_HOME": str(home)}
    for args in HERMES_COMMANDS:
        try:
            done = subprocess.run(
                [hermes, *args],
                env=env,
                stdin=subprocess.DEVNULL,  # `plugins enable` asks about tool overrides: no
                capture_output=True,
                text=True,
                timeout=HERMES_TIMEOUT_S,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ActivationFailed(f"`hermes {' '.join(args)}` did not run: {exc}") from exc
        if done.returncode != 0:
            why = (done.stderr or done.stdout).strip().splitlines()
            raise ActivationFailed(
                f"`hermes {' '.join(args)}` failed (exit {done.returncode})"
                + (f": {why[-1]}" if why else "")
                + "; nothing was installed"
            )


def _restore_config(config: Path, before: bytes | None) -> None:
    try:
        if before is None:
            config.unlink(missing_ok=True)
        else:
            config.write_bytes(before)
    except OSError:
        pass
