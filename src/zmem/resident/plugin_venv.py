"""A plugin's venv outliving the plugin's updates: a host updates a plugin by copying its new
version to a new folder, while the venv (in the plugin's data dir) keeps the wheel it was first
installed from. The launcher asks here on SessionStart whether the plugin now carries a wheel
the venv was not installed from, and then has the plugin's bootstrap upgrade it in the
background. Standard library only (the launcher runs without site)."""

from __future__ import annotations

import os
import subprocess
import sys

MARK = ".zmem-plugin-venv"  # in the venv: the wheel bootstrap.py installed it from


def update_pending(plugin_root: str, env_prefix: str) -> bool:
    """True when `plugin_root` (a copy of the plugin tree, with wheels/) carries a zmem wheel
    and the venv at `env_prefix`, made by its bootstrap, was installed from another one. A
    listdir and a small read, once a session."""
    try:
        wheels = os.listdir(os.path.join(plugin_root, "wheels"))
        with open(os.path.join(env_prefix, MARK), encoding="utf-8") as fh:
            held = fh.read().strip()
    except OSError:
        return False  # not a plugin copy run by the venv its bootstrap made
    ours = [n for n in wheels if n.startswith("zmem-") and n.endswith(".whl")]
    return bool(ours) and held not in ours


def upgrade(plugin_root: str) -> None:
    """Start the bootstrap's upgrade, detached (the hook returns at once)."""
    try:
        subprocess.Popen(
            [sys.executable, "-S", os.path.join(plugin_root, "hooks", "bootstrap.py"), "--upgrade"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        pass
