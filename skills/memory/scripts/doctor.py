#!/usr/bin/env python3
"""The spec's diagnostics path: `python <doctor.py> [--project P] [--repo-root R]
[--format human|json|both]`. A thin shim over `zmem doctor` (read-only). Without --repo-root it
inspects the plugin root this script sits in: a plugin's venv holds a non-editable install, so
the package alone cannot tell where the host surfaces live."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

try:
    from zmem.cli import main
except ImportError:
    sys.path.insert(0, str(ROOT / "src"))
    from zmem.cli import main

if __name__ == "__main__":
    args = sys.argv[1:]
    if not any(a == "--repo-root" or a.startswith("--repo-root=") for a in args):
        args += ["--repo-root", str(ROOT)]
    main(["doctor", *args], prog_name="doctor.py")
