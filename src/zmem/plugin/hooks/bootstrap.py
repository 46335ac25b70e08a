"""First-run bootstrap of the plugin, run with the system python3 while the plugin's venv does
not exist: creates <plugin data>/venv and, detached (a hook must return at once), installs ZMem
into it (the wheel in the plugin's wheels/, else the checkout the plugin tree lies in, else zmem
from the package index), compiles the launchers, and fetches the pinned MiniLM weights
(installing the plugin is the user's yes to that). `--repair`: a hook whose venv lacks its
packages (a first install that failed offline) installs again; `--upgrade`: SessionStart found
the plugin updated to a wheel the venv does not hold. At most one attempt per 10 minutes, so an
offline machine is not asked to run pip on every prompt. Prints nothing; always exits 0."""

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

RETRY_S = 600
# In the venv: marks it as this bootstrap's, naming the wheel it holds (zmem.resident.plugin_venv).
MARK = ".zmem-plugin-venv"


def plugin_data_dir() -> Path:
    data = os.environ.get("CLAUDE_PLUGIN_DATA") or os.environ.get("PLUGIN_DATA")
    return Path(data).expanduser() if data else Path.home() / ".zmem" / "plugin"


def install_source(root: Path) -> tuple[str, str]:
    """(what pip installs, what MARK records): the wheel in wheels/, else the checkout around
    the plugin tree (<checkout>/src/zmem/plugin), else the published zmem."""
    wheels = sorted((root / "wheels").glob("zmem-*.whl"))
    if wheels:
        return str(wheels[-1]), wheels[-1].name
    checkout = root.parents[2] if len(root.parents) > 2 else root
    if (checkout / "pyproject.toml").is_file() and (checkout / "src" / "zmem").is_dir():
        return str(checkout), str(checkout)
    return "zmem", "zmem"


def main(argv: list) -> None:
    root = Path(__file__).resolve().parents[1]
    data_dir = plugin_data_dir()
    venv = data_dir / "venv"
    made_here = (venv / MARK).is_file() or (venv.is_dir() and not venv.is_symlink())
    if ("--repair" in argv or "--upgrade" in argv) and not made_here:
        return  # a venv linked in (a checkout's .venv): not ours to touch
    data_dir.mkdir(parents=True, exist_ok=True)
    stamp = data_dir / "bootstrap.last"
    if stamp.exists() and time.time() - stamp.stat().st_mtime < RETRY_S:
        return  # an install is running or failed moments ago
    stamp.touch()
    q, python, (source, label) = shlex.quote, venv / "bin" / "python", install_source(root)
    mark, log, py = q(str(venv / MARK)), q(str(data_dir / "bootstrap.log")), q(str(python))
    make_venv = "" if python.exists() else f"{q(sys.executable)} -m venv {q(str(venv))} && "
    # pip compiles the package; the launchers are compiled here (with PYTHONDONTWRITEBYTECODE=1
    # every cold hook would). The model is its own step: offline, the hooks work lexically.
    script = (
        f"{make_venv}{py} -m pip install --quiet --upgrade {q(source)} > {log} 2>&1 && "
        f"printf '%s\\n' {q(label)} > {mark} && "
        f"{py} -m compileall -q {q(str(root / 'hooks'))} >> {log} 2>&1; "
        f"{py} -m zmem model --fetch >> {log} 2>&1"
    )
    subprocess.Popen(
        ["/bin/sh", "-c", script],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except Exception:
        pass
    sys.exit(0)
