#!/usr/bin/env python3
"""The spec's diagnostics path: `python <doctor.py> [--project P] [--repo-root R]
[--format human|json|both]`. A thin shim over `zmem doctor` (read-only)."""

import sys
from pathlib import Path

try:
    from zmem.cli import main
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "src"))
    from zmem.cli import main

if __name__ == "__main__":
    main(["doctor", *sys.argv[1:]], prog_name="doctor.py")
