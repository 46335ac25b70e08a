"""The store's bulk jobs (reembed, consolidate, organize, rekey-namespace) as MemoryStore
methods: each runs over the store's own connection, settings and embedding state. The jobs are
imported when called, so a hook that never runs one never loads them."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import apsw

from zmem.config import Settings
from zmem.errors import UsageError

if TYPE_CHECKING:
    from zmem.maintenance.consolidate import Report as ConsolidateReport
    from zmem.maintenance.organize import OrganizeReport
    from zmem.maintenance.reembed import ReembedReport
    from zmem.store.vectors import StoreVectors


REKEY_BATCH = 500  # rows a transaction: a writer beside it waits for one batch at most


class BulkJobs:
    """Mixed into MemoryStore, which provides these three attributes."""

    _conn: apsw.Connection
    settings: Settings
    vectors: StoreVectors

    def reembed(
        self,
        *,
        all: bool = False,
        profile: str | None = None,
        batch: int = 64,
        dry_run: bool = False,
        confirm: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> ReembedReport:
        """Backfill missing vectors, or (all=True) rebuild every live vector under `profile`,
        recreating the vector index at its dimension in one transaction."""
        # Imported here: the job's thread pool and lease code cost every cold hook ~20 ms of
        # imports it never uses.
        from zmem.maintenance import reembed

        report = reembed.run(
            self._conn,
            self.settings.data_dir,
            everything=all,
            profile=profile,
            active_profile=self.settings.embed_profile,
            batch=batch,
            dry_run=dry_run,
            confirm=confirm,
            progress=progress,
        )
        self.vectors.prepare(check=False)
        return report

    def consolidate(
        self,
        *,
        threshold: float = 0.80,
        prune: bool = False,
        dry_run: bool = False,
        namespace: str | None = None,
        force: bool = False,
        merge_contested: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> ConsolidateReport:
        """Merge near-duplicate live memories (see maintenance.consolidate). StoreBusy when
        another consolidate or organize holds the shared lock."""
        from zmem.maintenance import consolidate

        if not 0.0 < threshold <= 1.0:
            raise UsageError(f"--threshold {threshold!r} must be above 0 and at most 1")
        return consolidate.consolidate(
            self._conn, self.settings, self.vectors, threshold=threshold, prune_rows=prune,
            dry_run=dry_run, namespace=namespace, force=force,
            merge_contested=merge_contested, progress=progress,
        )  # fmt: skip

    def organize(
        self,
        *,
        prune: bool = False,
        dry_run: bool = False,
        force: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> OrganizeReport:
        """The sleep-time organization job (see maintenance.organize)."""
        from zmem.maintenance import organize

        return organize.organize(
            self._conn, self.settings, self.vectors, prune_rows=prune, dry_run=dry_run,
            force=force, progress=progress,
        )  # fmt: skip

    def rekey_namespace(
        self,
        *,
        source: str | None = None,
        near_miss_global: bool = False,
        to: str | None = None,
        apply: bool = False,
    ) -> dict[str, Any]:
        """Move the LIVE rows of one namespace (`source`), or of every near-miss of the global
        namespace, to `to` (default user:global for near-misses). A preview unless `apply`;
        tombstoned rows keep their namespace (history is not rewritten)."""
        from zmem.capture.namespaces import is_near_miss_global, validate_namespace
        from zmem.db import memories
        from zmem.db.connect import read_snapshot, transaction
        from zmem.models import GLOBAL_NAMESPACE

        if (source is None) == (not near_miss_global):
            raise UsageError("rekey-namespace takes exactly one of --from or --near-miss-global")
        if to is None:
            if not near_miss_global:
                raise UsageError("rekey-namespace --from needs --to")
            to = GLOBAL_NAMESPACE
        validate_namespace(to)  # a near-miss target is refused like an add to it
        with read_snapshot(self._conn):
            counts = memories.live_namespace_counts(self._conn)
        if near_miss_global:
            moving = {ns: n for ns, n in counts.items() if is_near_miss_global(ns)}
        else:
            if source == to:
                raise UsageError("--from and --to name the same namespace")
            moving = {source: counts[source]} if source in counts else {}
        report = {"to": to, "from": moving, "rows": sum(moving.values()), "applied": False}
        if not apply:
            return report
        for old in sorted(moving):
            while True:
                with transaction(self._conn):
                    moved = memories.rekey_batch(self._conn, old, to, REKEY_BATCH)
                if moved < REKEY_BATCH:
                    break
        report["applied"] = True
        return report
