"""Finds a Python that can run ZMem, for the store.py and doctor.py shims: they may be run by
any interpreter (a system python without ZMem's packages) or executed directly. When this one
cannot import zmem, the script runs itself again under the first interpreter that can: the
plugin's venv, the checkout's .venv, a host plugin's data dir, or the one behind `zmem` on
PATH. ZMEM_PYTHON names one outright. Standard library only."""

import glob
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
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
    yield _venv_python(str(ROOT / ".venv"))
    home = str(Path.home())
    for pattern in (".claude/plugins/data/zmem*/venv", ".codex/plugins/data/zmem*/venv"):
        for venv in sorted(glob.glob(os.path.join(home, pattern))):
            yield _venv_python(venv)
    zmem = shutil.which("zmem")
    if zmem:
        try:
            with open(zmem, "rb") as fh:
                first = fh.readline().decode("utf-8", "replace").strip()
        except OSError:
            first = ""
        if first.startswith("#!") and " " not in first[2:].strip():
            yield first[2:].strip()


def load_main():
    """zmem.cli.main, from this interpreter or (by re-running the script) another one."""
    # Popped at once: ZMem reads every ZMEM_* variable as a setting (doctor lists them, and the
    # hooks' resident process serves only clients whose settings equal its own).
    again = os.environ.pop(_AGAIN, None)
    try:
        from zmem.cli import main
    except ImportError:
        sys.path.insert(0, str(ROOT / "src"))
        try:
            from zmem.cli import main
        except ImportError as exc:
            reason = exc
        else:
            return main
    else:
        return main
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
        f"other was found (tried: {', '.join(tried) or 'none'}); run `make install` in the "
        "ZMem checkout, or set ZMEM_PYTHON to a Python that has it\n"
    )
    sys.exit(2)
