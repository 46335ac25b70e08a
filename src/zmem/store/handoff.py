"""The hand-off export as a MemoryStore method: which live rows go into the markdown pack
(ranked, limited, confident enough, none flagged as prompt injection); sync.pack renders it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from zmem.errors import Refusal, UsageError
from zmem.models import GLOBAL_NAMESPACE, Memory
from zmem.retrieval.scoring import row_injection_risk


class Handoff:
    """Mixed into MemoryStore, which provides `list`."""

    list: Callable[..., list[Memory]]

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
