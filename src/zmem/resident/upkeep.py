"""The detached child a session start launches (zmem.hosts.upkeep.spawn): runs what upkeep is
due at nice 10 and logs one line to zmem-bg.log. Never raises: nobody would see it, and the next
session start tries again."""

from __future__ import annotations

import os
import re
import sys
from typing import Any

from zmem import config
from zmem.maintenance import session_task
from zmem.resident.client import log_line
from zmem.store import MemoryStore


def main() -> None:
    try:
        os.nice(10)  # the session the user is in comes first
    except OSError:
        pass
    settings = config.load_settings()

    def organize() -> dict[str, Any]:
        with MemoryStore.open(settings=settings, create=False) as store:
            return store.organize().to_dict()

    def sync() -> dict[str, Any]:
        with MemoryStore.open(settings=settings, create=False) as store:
            return store.hub_sync().to_dict()

    result = session_task.run(settings, organize, sync)
    reason = result.skipped and "skipped" or ("+".join(result.ran) or "nothing-due")
    fields = {"error": "; ".join(result.errors)} if result.errors else {}
    # What launched it: a coding host's SessionStart, or the Hermes provider's session.
    named = sys.argv[1] if len(sys.argv) > 1 else ""
    trigger = named if re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]{0,40}", named) else "SessionStart"
    log_line(settings.data_dir, "upkeep", trigger, reason, fields)


if __name__ == "__main__":
    try:
        main()
    except Exception:
        pass  # detached: nobody would see it, and the next session tries again
