#!/usr/bin/env python3
"""The spec's diagnostics path: `python <doctor.py> [--project P] [--repo-root R]
[--format human|json|both]`. A thin shim over `zmem doctor` (read-only), run under a Python
that has ZMem (python_finder.py). Without --repo-root it inspects the plugin root this script
sits in: a plugin's venv holds a non-editable install, so the package alone cannot tell where
the host surfaces live."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from python_finder import PLUGIN_ROOT, load_main  # noqa: E402

if __name__ == "__main__":
    args = sys.argv[1:]
    if not any(a == "--repo-root" or a.startswith("--repo-root=") for a in args):
        args += ["--repo-root", str(PLUGIN_ROOT)]
    load_main()(["doctor", *args], prog_name="doctor.py")
