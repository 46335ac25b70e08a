#!/usr/bin/env python3
"""The spec's entry path for hosts and agents: `python <store.py> <subcommand>`. A thin shim over
the installed `zmem` package (or the checkout's src/ when run from a clone)."""

import sys
from pathlib import Path

try:
    from zmem.cli import main
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "src"))
    from zmem.cli import main

if __name__ == "__main__":
    main(prog_name="store.py")
