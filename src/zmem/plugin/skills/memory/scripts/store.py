#!/usr/bin/env python3
"""The spec's entry path for hosts and agents: `python <store.py> <subcommand>`, or the file run
directly. A thin shim over the installed `zmem` package (or the checkout's src/), run under a
Python that has it (python_finder.py finds one when the caller's does not)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from python_finder import load_main  # noqa: E402

if __name__ == "__main__":
    load_main()(prog_name="store.py")
