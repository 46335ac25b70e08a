"""Launching the session-start upkeep (maintenance/session_task.py) from a hook without
delaying it: when something is due, one detached child at nice 10 runs it and logs one line to
zmem-bg.log (the child is `python -m zmem.resident.upkeep`)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from zmem import config
from zmem.maintenance import session_task


def _import_roots() -> list[str]:
    """Where this process found zmem and its native dependencies. The child imports the code
    this process runs (a plugin's copy, not another install); inside Hermes, whose Python may
    reach ZMem's install only through the plugins' bridge, the dependencies' folder too."""
    roots = [str(Path(__file__).resolve().parents[2])]
    spec = importlib.util.find_spec("apsw")
    if spec is not None and spec.origin:
        origin = Path(spec.origin).resolve()
        root = origin.parents[1] if origin.name.startswith("__init__") else origin.parent
        if str(root) not in roots:
            roots.append(str(root))
    return roots


def spawn(settings: config.Settings, trigger: str = "SessionStart") -> bool:
    """Start the upkeep when a job is due; False when nothing is (the common case: two stats).
    `trigger` names what launched it in the child's log line. Never raises: a hook's answer
    must not depend on its upkeep."""
    try:
        if not session_task.due(settings):
            return False
        roots = [*_import_roots(), os.environ.get("PYTHONPATH", "")]
        path = os.pathsep.join(p for p in roots if p)
        env = dict(
            os.environ,
            ZMEM_STORE=str(settings.store_path),
            ZMEM_DATA=str(settings.data_dir),
            PYTHONPATH=path,
        )
        subprocess.Popen(
            [sys.executable, "-m", "zmem.resident.upkeep", trigger],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
        return True
    except Exception:
        return False
