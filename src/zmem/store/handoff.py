"""Moving memories between stores and sessions, as MemoryStore methods: the markdown hand-off
pack (ranked, limited, confident enough, none flagged as prompt injection; sync.pack renders
it) and the box-to-box sync JSONL (sync.export writes it, sync.ingest restores it)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw

from zmem import config
from zmem.config import CAPTURE_MODES, Settings
from zmem.errors import Refusal, UsageError
from zmem.models import GLOBAL_NAMESPACE, Memory
from zmem.retrieval.scoring import row_injection_risk


class Handoff:
    """Mixed into MemoryStore, which provides `list`, its connection, settings and vectors."""

    list: Callable[..., list[Memory]]
    _conn: apsw.Connection
    settings: Settings
    vectors: Any

    def export_jsonl(
        self,
        write: Callable[[str], Any],
        *,
        namespace: str | None = None,
        include_superseded: bool = False,
    ) -> dict[str, int]:
        """Write the sync records through `write` (one line per call); returns the counts."""
        from zmem.sync.export import export

        return export(self._conn, write, namespace=namespace, include_superseded=include_superseded)

    def ingest_jsonl(
        self,
        path: str | Path,
        *,
        source_ref: str | None = None,
        allow_tombstones: bool = False,
        capture_mode: str | None = None,
        progress: Callable[[int, int], None] | None = None,
        workers: int | None = None,
    ) -> Any:
        """Restore an export-jsonl file: bad lines are counted and named, the rest land.
        `workers`: processes preparing lines (default: up to 4, one per core)."""
        from zmem.sync.ingest import ingest

        mode = capture_mode or self.settings.capture_mode
        if mode not in CAPTURE_MODES:
            raise UsageError(f"capture mode {mode!r} is not one of: {', '.join(CAPTURE_MODES)}")
        return ingest(
            self._conn, self.vectors, Path(path).expanduser(), now=config.now_iso(),
            capture_mode=mode, source_ref=source_ref, allow_tombstones=allow_tombstones,
            progress=progress, workers=workers,
        )  # fmt: skip

    def export_pack(
        self,
        namespace: str,
        *,
        project_limit: int = 50,
        global_limit: int = 15,
        min_confidence: float = 0.6,
        max_bytes: int = 32768,
    ) -> Any:
        from zmem.sync import pack

        if not 0.0 <= min_confidence <= 1.0:
            raise UsageError(f"--min-confidence {min_confidence!r} must be between 0 and 1")
        withheld = 0

        def chosen(ns: str, limit: int) -> list[Memory]:
            nonlocal withheld
            rows = [m for m in self.list(namespace=ns) if m.confidence >= min_confidence]
            # A pack goes straight into a model's context: a row that reads as an instruction
            # to the model is withheld, as the hooks withhold it.
            safe = [m for m in rows if not row_injection_risk(m)]
            withheld += len(rows) - len(safe)
            return pack.order(safe)[:limit]

        project = chosen(namespace, project_limit)
        global_rows = project if namespace == GLOBAL_NAMESPACE else chosen(
            GLOBAL_NAMESPACE, global_limit
        )  # fmt: skip
        if not project and not global_rows:
            raise Refusal(
                f"nothing to pack: no live memory of {namespace} or {GLOBAL_NAMESPACE} has "
                f"confidence >= {min_confidence:g}"
            )
        return pack.render(namespace, project, global_rows, max_bytes, withheld)
