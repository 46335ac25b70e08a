"""First-run bootstrap, run with the system python3 when the plugin's venv does not exist yet:
creates <plugin data>/venv and installs the plugin root into it, detached (a hook must return
at once), single-flighted by a lock file. Prints nothing and always exits 0; the first hooks of
a fresh install are silent until the venv is ready."""

import os
import subprocess
import sys
import time
from pathlib import Path


def main() -> None:
    root = Path(__file__).resolve().parents[1]
    data = os.environ.get("CLAUDE_PLUGIN_DATA") or os.environ.get("PLUGIN_DATA")
    data_dir = Path(data).expanduser() if data else Path.home() / ".zmem" / "plugin"
    data_dir.mkdir(parents=True, exist_ok=True)
    lock = data_dir / "bootstrap.lock"
    try:
        if time.time() - lock.stat().st_mtime < 600:
            return  # another hook is already installing
    except OSError:
        pass
    lock.touch()
    venv = data_dir / "venv"
    script = (
        f'"{sys.executable}" -m venv "{venv}" && '
        f'"{venv}/bin/python" -m pip install --quiet "{root}" '
        f'> "{data_dir}/bootstrap.log" 2>&1; rm -f "{lock}"'
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
        main()
    except Exception:
        pass
    sys.exit(0)
