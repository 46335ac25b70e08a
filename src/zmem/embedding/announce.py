"""Who is told that a MiniLM build from the weights is starting (a few seconds, once per user):
the CLI registers a notice here, so its first command is not silently slow. A leaf module, so
registering costs the CLI no model import."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

on_build: list[Callable[[Path], None]] = []
