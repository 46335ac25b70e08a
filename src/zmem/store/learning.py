"""The learning loop's promotion step as MemoryStore methods: which lessons the ladder admits,
the preview, the review candidate, and the installation of the reviewed skill (sync.promote
renders and writes the files). Nothing here writes the store."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import apsw

from zmem import config
from zmem.config import Settings
from zmem.db import memories
from zmem.errors import Refusal
from zmem.models import Memory


class Learning:
    """Mixed into MemoryStore, which provides `get`, its connection and settings."""

    get: Callable[[str], Memory]
    _conn: apsw.Connection
    settings: Settings

    def promote_candidates(self, namespace: str | None = None) -> list[dict[str, Any]]:
        from zmem.sync import promote

        rows = memories.list_memories(self._conn, [namespace] if namespace else None, "lesson")
        return [promote.summary(m) for m in rows if not promote.ladder(m)]

    def promote(
        self,
        memory_id: str,
        *,
        confirm: bool = False,
        install: bool = False,
        description: str | None = None,
    ) -> dict[str, Any]:
        """Preview (neither flag), write the review candidate (confirm), or install the
        reviewed candidate into every host's skill folder (confirm and install). The ladder is
        checked each time: a lesson violated since its review is not installed."""
        from zmem.sync import promote

        m = self.get(memory_id)
        why = promote.ladder(m)
        if why:
            raise Refusal(f"{m.id} is not a promotion candidate: {'; '.join(why)}")
        out: dict[str, Any] = {**promote.summary(m), "eligible": True}
        data_dir = self.settings.data_dir
        if install:
            path, text, edited = promote.reviewed(data_dir, m)
            out.update(candidate=str(path), edited=edited)
            out["installed"] = promote.install(out["name"], text, promote.skill_dirs())
            return out
        text = promote.render(m, description, config.now_iso())
        if not confirm:
            out["preview"] = text
            return out
        try:
            _, _, edited = promote.reviewed(data_dir, m)
        except Refusal:
            edited = False  # none yet, or unusable: written afresh
        if edited:
            raise Refusal(
                f"the review candidate in {promote.candidate_dir(data_dir, m)} was edited; "
                "install it with --install-approved, or delete it to write a new one"
            )
        out["candidate"] = str(promote.write_candidate(data_dir, m, text))
        return out
