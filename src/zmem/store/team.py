"""The team hub as MemoryStore methods (issue 32): a sync of this store with the hub its data
dir joined, over the store's own connection, settings and embedding state. The sync code is
imported when called, so a hook never loads psycopg."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import apsw

from zmem.config import Settings
from zmem.errors import UsageError

if TYPE_CHECKING:
    from zmem.store.vectors import StoreVectors
    from zmem.sync.hub_local import HubConfig, SyncReport


class Team:
    """Mixed into MemoryStore, which provides these three attributes."""

    _conn: apsw.Connection
    settings: Settings
    vectors: StoreVectors

    def hub_config(self) -> HubConfig:
        """The hub this store's data dir joined; UsageError when it joined none, or joined it
        for another store."""
        from zmem.sync import hub_local

        cfg = hub_local.load_config(self.settings.data_dir)
        if cfg is None:
            raise UsageError(
                "this data dir shares nothing: join a hub first "
                "(zmem hub join --url URL --namespace NS)"
            )
        if Path(self.settings.store_path).resolve() != Path(cfg.store).resolve():
            raise UsageError(
                f"this data dir joined the hub for the store {cfg.store}, not "
                f"{self.settings.store_path}: sync that store, or leave and join again"
            )
        return cfg

    def hub_sync(
        self, *, batch: int | None = None, progress: Callable[[str, int], None] | None = None
    ) -> SyncReport:
        """Push what this store wrote in its shared namespaces, then pull what others wrote
        (sync.hub). HubRefused / HubUnavailable when the hub will not or cannot answer."""
        from zmem.sync import hub

        cfg = self.hub_config()
        return hub.run(
            self._conn, self.vectors, self.settings, cfg,
            batch=batch or hub.BATCH, progress=progress,
        )  # fmt: skip

    def hub_distrusted(self) -> list[str]:
        """The roles whose rows this store keeps out of passive injection."""
        from zmem.db import origin

        return sorted(origin.distrusted(self._conn))

    def hub_distrust(self, role: str, *, on: bool = True) -> bool:
        """Keep a team member's rows out of every passive injection on this machine (`on`),
        or let them back; whether anything changed. The rows stay searchable, and rows pulled
        later are covered too (the rule is on the role, not on rows)."""
        from zmem import config
        from zmem.db import origin
        from zmem.db.connect import transaction

        role = role.strip()
        if not role or len(role) > 63:
            raise UsageError("name the member's role: --role ROLE (a PostgreSQL role name)")
        cfg = self.hub_config()
        if on and role == cfg.role:
            raise UsageError(f"{role} is this machine's own role: its rows are yours")
        with transaction(self._conn):
            return origin.set_distrust(self._conn, role, on, config.now_iso())
