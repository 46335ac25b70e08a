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
    from zmem.sync.hub import HubConfig, SyncReport


class Team:
    """Mixed into MemoryStore, which provides these three attributes."""

    _conn: apsw.Connection
    settings: Settings
    vectors: StoreVectors

    def hub_config(self) -> HubConfig:
        """The hub this store's data dir joined; UsageError when it joined none, or joined it
        for another store."""
        from zmem.sync import hub

        cfg = hub.load_config(self.settings.data_dir)
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
