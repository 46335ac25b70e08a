"""Launching the session-start upkeep (maintenance/session_task.py) from a hook without
delaying it: when something is due, one detached child at nice 10 runs it and logs one line to
zmem-bg.log (the child is `python -m zmem.resident.upkeep`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from zmem import config
from zmem.maintenance import session_task


def spawn(settings: config.Settings) -> bool:
    """Start the upkeep when a job is due; False when nothing is (the common case: two stats).
    Never raises: a hook's answer must not depend on its upkeep."""
    try:
        if not session_task.due(settings):
            return False
        # The child imports the code this hook runs (a plugin's copy, not another install).
        code = str(Path(__file__).resolve().parents[2])
        path = os.pathsep.join(p for p in (code, os.environ.get("PYTHONPATH", "")) if p)
        env = dict(
            os.environ,
            ZMEM_STORE=str(settings.store_path),
            ZMEM_DATA=str(settings.data_dir),
            PYTHONPATH=path,
        )
        subprocess.Popen(
            [sys.executable, "-m", "zmem.resident.upkeep"],
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
