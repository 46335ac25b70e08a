"""What a data dir keeps of the team hub, and what it can tell without the store's library or
the hub's driver (issue 47): the join's record (hub.json), the shape of a sync's report, the
bookkeeping's record of the last syncs (doctor, the inspector, `sync --status`), and the quick
sync: a sync with nothing new, answered from the bookkeeping, the store's change counts and one
statement to the hub through libpq. Imported by every `zmem sync` before anything heavier."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import apsw

from zmem import config, untrusted
from zmem.db import changes, hub_state
from zmem.db import hub as hubdb
from zmem.errors import UsageError
from zmem.namespace_keys import GLOBAL_NAMESPACE, fold_namespace_case

CONFIG_NAME = "hub.json"
CONFIG_CAP = 64 * 1024  # hub.json is a few hundred bytes; anything near this is not ours
STATE_NAME = "state.sqlite"


@dataclass
class HubConfig:
    url: str  # no password: libpq finds it (~/.pgpass, PGPASSWORD, a service file)
    namespaces: list[str]
    machine: str  # "<host>/<id>": who wrote what from where
    store: str  # the store this data dir joined for
    joined_at: str
    role: str | None = None


def hub_dir(data_dir: Path) -> Path:
    return Path(data_dir) / "hub"


def load_config(data_dir: Path) -> HubConfig | None:
    path = hub_dir(data_dir) / CONFIG_NAME
    try:
        doc = json.loads(untrusted.read_text(path, CONFIG_CAP))
        cfg = HubConfig(**doc)
        # Joined before project namespaces had one spelling: the hub migrated them too.
        cfg.namespaces = list(dict.fromkeys(fold_namespace_case(ns) for ns in cfg.namespaces))
        return cfg
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        raise UsageError(
            f"{path} is not a hub record ZMem wrote ({exc}); `zmem hub leave`"
        ) from None


def save_config(data_dir: Path, cfg: HubConfig) -> Path:
    folder = hub_dir(data_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / CONFIG_NAME
    tmp = path.with_name(f".{CONFIG_NAME}.{os.getpid()}")
    tmp.write_text(json.dumps(asdict(cfg), indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def new_machine_id() -> str:
    import socket
    import uuid

    return f"{socket.gethostname() or 'machine'}/{uuid.uuid4().hex[:8]}"


@dataclass
class SyncReport:
    pushed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(hubdb.KINDS, 0))
    pulled: dict[str, int] = field(default_factory=lambda: dict.fromkeys(hubdb.KINDS, 0))
    hub_changed: int = 0  # objects the hub took as new or changed state
    redacted: int = 0  # pushed with secrets redacted (capture mode auto)
    secret_warnings: int = 0  # pushed verbatim though secret-like (manual / reviewed)
    # Pulled objects set aside (malformed, another namespace's id, a body that disagrees with
    # what the hub checked): never applied, listed by `sync --status`.
    quarantined: int = 0
    refused: int = 0  # objects of this store the hub refused (listed the same way)
    deferred: int = 0  # objects another session held on the hub: pushed again next sync
    read_only: list[str] = field(default_factory=list)  # shared namespaces pulled, not pushed
    ingest: dict[str, Any] = field(default_factory=dict)
    behind: int | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Recorded:
    """What the last syncs left in the bookkeeping: read without the network or a write."""

    status: dict[str, str] = field(default_factory=dict)
    marks: dict[str, str | None] = field(default_factory=dict)
    writers: list[tuple] = field(default_factory=list)
    quarantine_counts: dict[str, int] = field(default_factory=dict)
    quarantine: list[dict[str, Any]] = field(default_factory=list)


def recorded(data_dir: Path) -> Recorded:
    state = hub_state.open_read_only(hub_dir(data_dir) / STATE_NAME)
    if state is None:
        return Recorded()
    out = Recorded()
    try:
        out.status = hub_state.status(state)
        out.writers = hub_state.writers(state)
        out.marks = hub_state.marks(state)
        out.quarantine_counts, out.quarantine = hub_state.quarantined(state)
    except apsw.Error:
        pass  # a bookkeeping file from before a table existed: what was read stands
    finally:
        state.close()
    return out


def _record_error(state: apsw.Connection, exc: Exception) -> None:
    hub_state.set_status(state, {"last_error": f"{config.now_iso()} {exc}"})


QUICK_ROWS = 2000  # past this many rows after the push cursor, the whole sync looks


def quick(settings: config.Settings) -> SyncReport | None:
    """A sync with nothing new, without the store's library or psycopg: the bookkeeping and the
    store's change counts say nothing is waiting to be pushed, and one statement through libpq
    (db.hub_probe) says nothing is waiting to be pulled; the status is recorded as a sync would
    record it. None whenever anything is to do, or cannot be told this way: the caller runs
    the whole sync (which also says what is wrong, a revoked grant for one). A hub that refuses
    or does not answer raises as a sync would, once."""
    from zmem.db import hub_probe
    from zmem.db.version import is_current

    t0 = time.monotonic()
    cfg = load_config(settings.data_dir)
    state_path = hub_dir(settings.data_dir) / STATE_NAME
    store_path = Path(settings.store_path)
    if cfg is None or not state_path.is_file() or not store_path.is_file():
        return None
    if store_path.resolve() != Path(cfg.store).resolve():
        return None
    state = hub_state.open_state(state_path)
    try:
        marks, cursors = hub_state.marks(state), hub_state.cursors(state)
        prev = marks.get("pull_prev")
        counted = ("tomb_count", "link_count", "episode_count", "closed_count", "member_count")
        if not prev or marks.get("pull_window") or any(k not in cursors for k in counted):
            return None
        try:
            row = hub_probe.changes_since(cfg.url, prev, cfg.namespaces)
        except hub_probe.ProbeError as exc:
            if not exc.connecting:
                return None  # the whole sync reads the statement's refusal its own way
            error = hubdb.connect_failure(str(exc), hubdb.describe(cfg.url))
            _record_error(state, error)
            raise error from None
        if row is None or None in row:
            return None
        role, access_json, snapshot, behind = row
        granted = json.loads(access_json or "{}")
        if any(ns != GLOBAL_NAMESPACE and ns not in granted for ns in cfg.namespaces):
            return None  # revoked: the whole sync says so
        if int(behind or 0) != 0:
            return None
        writable = [ns for ns in cfg.namespaces if ns == GLOBAL_NAMESPACE or granted[ns]]
        conn = changes.open_read_only(store_path)
        try:
            if not is_current(conn):
                return None  # the store's own open migrates it first
            # Rows past the push cursor are waiting unless the hub is known to hold them in
            # their state (the last pull brought them, after that sync's push ran).
            after = changes.rows_after(conn, cursors.get("push_rid", 0), writable, QUICK_ROWS)
            held = hub_state.known_of(state, "memory", [i for i, _ in after])
            if writable and (
                len(after) == QUICK_ROWS
                or any(held.get(i, -1) < dead for i, dead in after)
                or changes.tombstone_count(conn, writable) != cursors["tomb_count"]
                or changes.graph_counts(conn, writable) != tuple(cursors[k] for k in counted[1:])
            ):
                return None
        finally:
            conn.close()
        report = SyncReport(behind=0, read_only=[ns for ns in cfg.namespaces if ns not in writable])
        report.seconds = round(time.monotonic() - t0, 3)
        now = config.now_iso()
        hub_state.set_marks(state, {"pull_prev": snapshot})
        hub_state.set_status(state, {
            "last_push": now, "last_pull": now, "last_error": None,
            "last_report": json.dumps(report.to_dict()),
        })  # fmt: skip
        return report
    finally:
        state.close()
