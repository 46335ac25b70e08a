"""What every doctor check shares: the four statuses, the shape of one result, and the small
read-only file helpers the checks use."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

OK, WARN, FAIL, NA = "ok", "warn", "fail", "n/a"
RANK = {NA: 0, OK: 1, WARN: 2, FAIL: 3}


def check(name: str, status: str, detail: str, **extra: Any) -> dict[str, Any]:
    """One result: its name, ok|warn|fail|n/a, a one-line detail, and structured extras."""
    return {"check": name, "status": status, "detail": detail, **extra}


def windows() -> bool:
    return os.name == "nt"


def existing(path: Path) -> Path:
    """`path`, or its nearest ancestor that exists (absolute)."""
    path = path.expanduser().absolute()
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object file, or None when it is missing, unreadable or not an object."""
    try:
        doc = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
