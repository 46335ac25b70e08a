"""Finds a Python that can run ZMem, for the store.py and doctor.py shims: they may be run by
any interpreter (a system python without ZMem's packages) or executed directly. When this one
cannot import zmem, the script runs itself again under the first interpreter that can: the
plugin's venv, the environment (or checkout) this file's package lies in, a host plugin's data
dir, or the one behind `zmem` on PATH. ZMEM_PYTHON names one outright. Standard library only."""

import glob
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve()  # <plugin root>/skills/memory/scripts/python_finder.py
PLUGIN_ROOT = HERE.parents[3]  # <package>/plugin, or a host's copy of the plugin tree
_PKG = HERE.parents[4]  # a checkout's src/zmem: its src/ may go on sys.path (never a venv's)
CHECKOUT_SRC = _PKG.parent if _PKG.parent.name == "src" and (_PKG / "cli").is_dir() else None
_AGAIN = "ZMEM_SHIM_REEXEC"  # set before re-running: a second miss is an error, not a loop


def _venv_python(venv):
    parts = ("Scripts", "python.exe") if os.name == "nt" else ("bin", "python")
    return os.path.join(venv, *parts)


def _candidates():
    env = os.environ
    if env.get("ZMEM_PYTHON"):
        yield env["ZMEM_PYTHON"]
    for var in ("CLAUDE_PLUGIN_DATA", "PLUGIN_DATA"):
        if env.get(var):
            yield _venv_python(os.path.join(env[var], "venv"))
    for folder in HERE.parents:  # the environment (pyvenv.cfg) or checkout (.venv) around us
        venv = next((v for v in (folder, folder / ".venv") if (v / "pyvenv.cfg").is_file()), 0)
        if venv:
            yield _venv_python(str(venv))
            break
    home = str(Path.home())
    for pattern in (".claude/plugins/data/zmem*/venv", ".codex/plugins/data/zmem*/venv"):
        for venv in sorted(glob.glob(os.path.join(home, pattern))):
            yield _venv_python(venv)
    zmem = shutil.which("zmem")  # a tool install links it from its environment's bin/
    if zmem:
        yield os.path.join(
            os.path.dirname(os.path.realpath(zmem)), os.path.basename(_venv_python(""))
        )


def load_main():
    """zmem.cli.main, from this interpreter or (by re-running the script) another one."""
    # Popped at once: ZMem reads every ZMEM_* variable as a setting (doctor lists them, and the
    # hooks' resident process serves only clients whose settings equal its own).
    again = os.environ.pop(_AGAIN, None)
    for extra in (None, CHECKOUT_SRC):
        if extra is not None:
            sys.path.insert(0, str(extra))
        try:
            from zmem.cli import app, main  # app: the CLI's own dependencies, not just zmem

            del app
            return main
        except ImportError as exc:
            reason = exc
    tried = []
    if not again:
        # Paths, not their targets: a venv's python is a symlink to the very interpreter that
        # just failed, and runs with the venv's packages all the same.
        here = os.path.abspath(sys.executable)
        for python in _candidates():
            tried.append(python)
            if os.path.isfile(python) and os.access(python, os.X_OK):
                if os.path.abspath(python) != here:
                    os.environ[_AGAIN] = "1"
                    script = os.path.abspath(sys.argv[0])
                    os.execv(python, [python, script, *sys.argv[1:]])
    sys.stderr.write(
        f"zmem: error: this Python ({sys.executable}) cannot run ZMem ({reason}), and no "
        f"other was found (tried: {', '.join(tried) or 'none'}); install ZMem (uv tool install "
        "zmem), or set ZMEM_PYTHON to a Python that has it\n"
    )
    sys.exit(2)
