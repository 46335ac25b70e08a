"""`zmem sync` with the team hub (issue 32): push what this store wrote in its shared namespaces
since its last push, then pull what others wrote since its last pull, in bounded batches.
Each side keeps its cursor only after the batch it covers has committed, and both sides are
idempotent (the hub merges, the local apply skips what it holds), so a sync killed at any point
and run again ends as an uninterrupted one. Pulled rows go through the capture policy and the
duplicate guard like any ingest (sync.ingest, hub mode). The join's record (hub.json) and the
bookkeeping (db/hub_state.py) live in `<data dir>/hub/`; no password is ever kept."""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import apsw

from zmem import config
from zmem.capture import policy
from zmem.db import hub as hubdb
from zmem.db import hub_state, memories
from zmem.db import sync as sync_db
from zmem.errors import Refusal, UsageError
from zmem.sync import hub_records as rec
from zmem.sync import prepare
from zmem.sync.ingest import IngestReport, ingest_chunks

BATCH = 500  # objects a hub transaction (push) or page (pull)
CONFIG_NAME = "hub.json"
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
        doc = json.loads(path.read_text(encoding="utf-8"))
        return HubConfig(**doc)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError) as exc:
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
    return f"{socket.gethostname() or 'machine'}/{uuid.uuid4().hex[:8]}"


# ---- push ------------------------------------------------------------------------------------


@dataclass
class SyncReport:
    pushed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(rec.KINDS, 0))
    pulled: dict[str, int] = field(default_factory=lambda: dict.fromkeys(rec.KINDS, 0))
    hub_changed: int = 0  # objects the hub took as new or changed state
    redacted: int = 0  # pushed with secrets redacted (capture mode auto)
    secret_warnings: int = 0  # pushed verbatim though secret-like (manual / reviewed)
    ingest: dict[str, Any] = field(default_factory=dict)
    behind: int | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Sync:
    def __init__(
        self,
        store_conn: apsw.Connection,
        store_vectors: Any,
        state: apsw.Connection,
        hub_conn: Any,
        cfg: HubConfig,
        settings: config.Settings,
        batch: int,
        progress: Callable[[str, int], None] | None,
    ):
        self.conn, self.vectors, self.state, self.hub = store_conn, store_vectors, state, hub_conn
        self.cfg, self.settings, self.batch, self.progress = cfg, settings, batch, progress
        self.where = hubdb.describe(cfg.url)
        self.report = SyncReport()
        self.ns = list(cfg.namespaces)

    # -- push --

    def _outgoing_memory(self, m: Any) -> dict[str, Any] | None:
        """A row as it goes to the hub: the capture policy of this machine's mode first (auto
        redacts secrets, so none reaches the hub)."""
        body = rec.memory_body(m)
        try:
            row = policy.prepare(
                m.content, namespace=m.namespace, type=m.type, tags=list(m.tags),
                signal=m.signal, taint=m.taint, source_ref=m.source_ref,
                confidence=m.confidence, capture_mode=self.settings.capture_mode,
                hash_source=False,
            )  # fmt: skip
        except Refusal:  # a secret-shaped source ref in auto mode: the row goes without it
            body["source_ref"] = None
            self.report.redacted += 1
            return body
        kinds = {w["type"] for w in row.warnings}
        if "redacted" in kinds or row.content != m.content or list(row.tags) != list(m.tags):
            self.report.redacted += 1
        if "secret_warning" in kinds:
            self.report.secret_warnings += 1
        body.update(content=row.content, tags=list(row.tags), source_ref=row.source_ref)
        return body

    def _send(self, objects: list[tuple[str, str, str, dict[str, Any]]]) -> None:
        """One hub transaction: the hub merges each object into what it holds; then (only then)
        this side records them as known."""
        if not objects:
            return
        with self.hub.transaction():
            hubdb.lock_for_push(self.hub)
            held = hubdb.existing(self.hub, [(k, key) for k, key, _, _ in objects])
            new, changed = [], []
            for kind, key, ns, body in objects:
                old = held.get((kind, key))
                if old is None:
                    new.append((kind, key, ns, body))
                else:
                    merged = rec.merge(kind, old, body)
                    if merged != old:
                        changed.append((kind, key, merged))
            hubdb.insert(self.hub, new, self.cfg.machine)
            hubdb.update(self.hub, changed, self.cfg.machine)
            _crash_point("push-mid")  # before the hub commits
        _crash_point("push")  # the hub committed; this side has not recorded it
        self.report.hub_changed += len(new) + len(changed)
        for kind, *_ in objects:
            self.report.pushed[kind] += 1
        hub_state.remember(self.state, [
            (kind, key, ns, rec.state_of(kind, body), self.cfg.role, self.cfg.machine)
            for kind, key, ns, body in objects
        ])  # fmt: skip

    def push(self) -> None:
        cursors = hub_state.cursors(self.state)
        # New rows (and rows first seen since the last push): rids only grow.
        after = cursors.get("push_rid", 0)
        while rows := sync_db.rows_after(self.conn, after, self.ns, self.batch):
            held = hub_state.known_of(self.state, "memory", [m.id for _, m in rows])
            out = [
                ("memory", m.id, m.namespace, body)
                for _, m in rows
                if held.get(m.id, -1) < int(m.superseded_at is not None)
                and (body := self._outgoing_memory(m)) is not None
            ]
            self._send(out)
            after = rows[-1][0]
            hub_state.set_cursors(self.state, {"push_rid": after})
            self._tick("push", len(rows))
        # Tombstones of rows pushed or pulled before: counted first, listed second, so one
        # that lands in between is seen now or next time, never lost.
        count = sync_db.tombstone_count(self.conn, self.ns)
        if count != cursors.get("tomb_count"):
            dead = sync_db.tombstoned(self.conn, self.ns)
            held = hub_state.known(self.state, "memory")
            todo = [i for i in dead if held.get(i, 1) == 0]
            for start in range(0, len(todo), self.batch):
                rows = memories.get_many(self.conn, todo[start : start + self.batch])
                self._send([("memory", m.id, m.namespace, self._outgoing_memory(m)) for m in rows])
            hub_state.set_cursors(self.state, {"tomb_count": count})
        self._push_graph(cursors)

    def _push_graph(self, cursors: dict[str, int]) -> None:
        links, episodes, closed, members = sync_db.graph_counts(self.conn, self.ns)
        if links != cursors.get("link_count"):
            held = hub_state.known(self.state, "link")
            todo = [
                ("link", key, ns, rec.link_body(k))
                for ns, k in sync_db.links_in(self.conn, self.ns)
                if (key := rec.link_key(k.src, k.dst, k.relation)) not in held
            ]
            self._in_batches(todo)
            hub_state.set_cursors(self.state, {"link_count": links})
        if (episodes, closed) != (cursors.get("episode_count"), cursors.get("closed_count")):
            held = hub_state.known(self.state, "episode")
            todo = [
                ("episode", e.id, e.namespace, rec.episode_body(e))
                for e in sync_db.episodes_in(self.conn, self.ns)
                if held.get(e.id, -1) < int(e.ended_at is not None)
            ]
            self._in_batches(todo)
            hub_state.set_cursors(self.state, {"episode_count": episodes, "closed_count": closed})
        if members != cursors.get("member_count"):
            held = hub_state.known(self.state, "episode_memory")
            todo = [
                ("episode_memory", key, ns, rec.membership_body(e, m, at))
                for ns, e, m, at in sync_db.memberships_in(self.conn, self.ns)
                if (key := rec.membership_key(e, m)) not in held
            ]
            self._in_batches(todo)
            hub_state.set_cursors(self.state, {"member_count": members})

    def _in_batches(self, objects: list[tuple[str, str, str, dict[str, Any]]]) -> None:
        for start in range(0, len(objects), self.batch):
            self._send(objects[start : start + self.batch])
            self._tick("push", min(self.batch, len(objects) - start))

    # -- pull --

    def pull(self) -> None:
        after = hub_state.cursors(self.state).get("pull_seq", 0)
        totals = IngestReport()
        while page := hubdb.page(self.hub, after, self.ns, self.batch):
            held = {
                kind: hub_state.known_of(self.state, kind, [r.key for r in page if r.kind == kind])
                for kind in rec.KINDS
            }
            # What this machine pushed comes back: nothing to apply when it holds that state
            # (a state the hub merged past it, a tombstone from elsewhere, is applied).
            todo = [
                r for r in page
                if r.machine != self.cfg.machine
                or held[r.kind].get(r.key, -1) < rec.state_of(r.kind, r.body)
            ]  # fmt: skip
            _crash_point("pull-mid")  # the page read, nothing applied
            if todo:
                report = self._apply(todo)
                for k, v in report.to_dict().items():
                    if isinstance(v, int):
                        setattr(totals, k, getattr(totals, k) + v)
                totals.errors.extend(report.errors[: 50 - len(totals.errors)])
            hub_state.remember(self.state, [
                (r.kind, r.key, r.namespace, rec.state_of(r.kind, r.body), r.written_by, r.machine)
                for r in page
            ])  # fmt: skip
            _crash_point("pull")  # applied and committed here; the cursor not moved
            after = page[-1].seq
            hub_state.set_cursors(self.state, {"pull_seq": after})
            for r in todo:
                self.report.pulled[r.kind] += 1
            self._tick("pull", len(page))
        self.report.ingest = {k: v for k, v in totals.to_dict().items() if v}

    def _apply(self, rows: Sequence[hubdb.HubRow]) -> IngestReport:
        """One page into the store through the ingest path: memories first (their capture
        policy, vectors, entities, the duplicate guard), then links, episodes, memberships."""
        order = {kind: i for i, kind in enumerate(rec.KINDS)}
        ranked = sorted(rows, key=lambda r: order[r.kind])
        lines = [(n, _line(r)) for n, r in enumerate(ranked, 1) if r.kind != "link"]
        links: dict[str, list[dict[str, Any]]] = {}
        for r in ranked:
            if r.kind == "link":
                links.setdefault(r.body["src"], []).append(r.body)
        now = config.now_iso()
        chunk = prepare.prepare_chunk((lines, now, self.settings.capture_mode, None))
        return ingest_chunks(
            self.conn, self.vectors, [chunk], now=now, hub=True, links=list(links.items())
        )

    def _tick(self, phase: str, n: int) -> None:
        if self.progress:
            self.progress(phase, n)


def _line(r: hubdb.HubRow) -> bytes:
    return json.dumps({**r.body, "kind": r.kind}, ensure_ascii=False).encode("utf-8")


def _crash_point(where: str) -> None:
    """Tests kill a sync at named points (ZMEM_TEST_SYNC_KILL=push:3 is the third push batch,
    right after the hub committed it and before this side recorded it); never set otherwise."""
    spec = os.environ.get("ZMEM_TEST_SYNC_KILL", "")
    if not spec or spec.rsplit(":", 1)[0] != where:
        return
    _crash_point.seen = getattr(_crash_point, "seen", {})  # type: ignore[attr-defined]
    seen = _crash_point.seen  # type: ignore[attr-defined]
    seen[where] = seen.get(where, 0) + 1
    if seen[where] == int(spec.rsplit(":", 1)[1]):
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


def run(
    store_conn: apsw.Connection,
    store_vectors: Any,
    settings: config.Settings,
    cfg: HubConfig,
    *,
    batch: int = BATCH,
    progress: Callable[[str, int], None] | None = None,
) -> SyncReport:
    """Push, then pull. A hub that refuses or goes away raises HubRefused / HubUnavailable;
    what committed before stays committed on both sides (the cursors say how far)."""
    t0 = time.monotonic()
    state = hub_state.open_state(hub_dir(settings.data_dir) / STATE_NAME)
    try:
        try:
            hub_conn = hubdb.connect(cfg.url)
        except Exception as exc:
            _record_error(state, exc)
            raise
        try:
            job = _Sync(store_conn, store_vectors, state, hub_conn, cfg, settings, batch, progress)
            try:
                job.push()
                hub_state.set_status(state, {"last_push": config.now_iso(), "last_error": None})
                job.pull()
                job.report.behind = 0
                hub_state.set_status(state, {"last_pull": config.now_iso(), "last_error": None})
            except Exception as exc:
                error = _as_refusal(exc, job.where)
                _record_error(state, error)
                raise error from None
        finally:
            hub_conn.close()
        job.report.seconds = round(time.monotonic() - t0, 3)
        hub_state.set_status(state, {"last_report": json.dumps(job.report.to_dict())})
        return job.report
    finally:
        state.close()


def _as_refusal(exc: Exception, where: str) -> Exception:
    try:
        import psycopg
    except ImportError:
        return exc
    if isinstance(exc, psycopg.Error):
        return hubdb.failure(exc, where)
    return exc


def _record_error(state: apsw.Connection, exc: Exception) -> None:
    hub_state.set_status(state, {"last_error": f"{config.now_iso()} {exc}"})


def recorded(data_dir: Path) -> tuple[dict[str, str], dict[str, int], list[tuple]]:
    """(status, cursors, writers) as the last sync left them: no network, no write."""
    state = hub_state.open_read_only(hub_dir(data_dir) / STATE_NAME)
    if state is None:
        return {}, {}, []
    try:
        return hub_state.status(state), hub_state.cursors(state), hub_state.writers(state)
    except apsw.Error:
        return {}, {}, []
    finally:
        state.close()


def status(settings: config.Settings, cfg: HubConfig, *, ask_hub: bool = True) -> dict[str, Any]:
    """The last push and pull, the last error, and (asking the hub) how many rows this store is
    behind."""
    st, cursors, writers = recorded(settings.data_dir)
    out: dict[str, Any] = {
        "hub": hubdb.describe(cfg.url), "namespaces": cfg.namespaces, "machine": cfg.machine,
        "role": cfg.role, "last_push": st.get("last_push"), "last_pull": st.get("last_pull"),
        "last_error": st.get("last_error"), "behind": None, "reachable": None,
        "writers": [dict(zip(("namespace", "kind", "writer", "machine", "objects"), w,
                             strict=True)) for w in writers],
    }  # fmt: skip
    if ask_hub:
        try:
            conn = hubdb.connect(cfg.url, timeout=5)
        except Exception as exc:  # status reports a hub that is down; it does not fail on it
            out["reachable"] = False
            out["hub_error"] = str(exc)
        else:
            try:
                out["behind"] = hubdb.behind(conn, cursors.get("pull_seq", 0), cfg.namespaces)
                out["reachable"] = True
            finally:
                conn.close()
    return out


# ---- joining and leaving ---------------------------------------------------------------------


def init(url: str) -> dict[str, Any]:
    """Create (or migrate) the hub schema in an existing database, as a role that may create
    schemas and roles. The URL is used once and kept nowhere."""
    conn = hubdb.connect(url)
    try:
        before, after = hubdb.init(conn)
    except Exception as exc:
        raise _as_refusal(exc, hubdb.describe(url)) from None
    finally:
        conn.close()
    return {"hub": hubdb.describe(url), "schema_version_before": before,
            "schema_version": after, "member_role": hubdb.MEMBER_ROLE}  # fmt: skip


def grant(url: str, role: str, namespaces: Sequence[str], *, read_only: bool) -> dict[str, Any]:
    namespaces = _valid_namespaces(namespaces)
    conn = hubdb.connect(url)
    try:
        _require_schema(conn, url)
        hubdb.grant(conn, role, namespaces, can_write=not read_only)
    except UsageError:
        raise
    except Exception as exc:
        raise _as_refusal(exc, hubdb.describe(url)) from None
    finally:
        conn.close()
    return {"role": role, "namespaces": list(namespaces), "write": not read_only}


def revoke(url: str, role: str, namespaces: Sequence[str]) -> dict[str, Any]:
    namespaces = _valid_namespaces(namespaces)
    conn = hubdb.connect(url)
    try:
        _require_schema(conn, url)
        removed = hubdb.revoke(conn, role, namespaces)
    except UsageError:
        raise
    except Exception as exc:
        raise _as_refusal(exc, hubdb.describe(url)) from None
    finally:
        conn.close()
    return {"role": role, "namespaces": list(namespaces), "removed": removed}


def _valid_namespaces(namespaces: Sequence[str]) -> list[str]:
    from zmem.capture.namespaces import validate_namespace

    if not namespaces:
        raise UsageError("name at least one namespace to share (--namespace NS)")
    return list(dict.fromkeys(validate_namespace(ns) for ns in namespaces))


def _require_schema(conn: Any, url: str) -> None:
    found = hubdb.version(conn)
    if found is None:
        raise UsageError(f"{hubdb.describe(url)} holds no ZMem hub: run `zmem hub init --url ...`")
    if found > hubdb.SCHEMA_VERSION:
        raise UsageError(
            f"the hub's schema is v{found}, newer than this ZMem knows (v{hubdb.SCHEMA_VERSION}):"
            " upgrade ZMem"
        )
    if found < hubdb.SCHEMA_VERSION:
        raise UsageError(
            f"the hub's schema is v{found}; this ZMem needs v{hubdb.SCHEMA_VERSION}: an admin "
            "runs `zmem hub init --url ...` to migrate it"
        )


def join(settings: config.Settings, url: str, namespaces: Sequence[str]) -> HubConfig:
    """Record the hub and the namespaces this data dir shares, after checking that the hub
    answers, holds a current schema, and lets this role read and write each namespace.
    Nothing is written when any check fails; nothing is pushed until a sync."""
    namespaces = _valid_namespaces(namespaces)
    if hubdb.has_password(url):
        raise UsageError(
            "the URL holds a password, which would be kept in plain text: put it in ~/.pgpass "
            "(host:port:dbname:user:password, mode 0600), PGPASSWORD or a service file, and "
            "give the URL without it"
        )
    existing = load_config(settings.data_dir)
    kept = hubdb.without_password(url)
    if existing is not None and existing.url != kept:
        raise UsageError(
            f"this data dir already shares with {hubdb.describe(existing.url)}: "
            "`zmem hub leave` first"
        )
    conn = hubdb.connect(url)
    try:
        _require_schema(conn, url)
        allowed = hubdb.access(conn)
        role = conn.execute("SELECT current_user").fetchone()[0]
    except UsageError:
        raise
    except Exception as exc:
        raise _as_refusal(exc, hubdb.describe(url)) from None
    finally:
        conn.close()
    wanted = list(dict.fromkeys([*(existing.namespaces if existing else []), *namespaces]))
    denied = [ns for ns in wanted if not allowed.get(ns)]
    if denied:
        how = "read-only for" if all(ns in allowed for ns in denied) else "not granted"
        raise UsageError(
            f"the role {role} is {how} {', '.join(denied)} on this hub: an admin runs "
            f"`zmem hub grant --role {role} --namespace ...`"
        )
    cfg = HubConfig(
        url=kept, namespaces=wanted,
        machine=existing.machine if existing else new_machine_id(),
        store=str(Path(settings.store_path).resolve()),
        joined_at=existing.joined_at if existing else config.now_iso(), role=role,
    )  # fmt: skip
    save_config(settings.data_dir, cfg)
    return cfg


def leave(settings: config.Settings) -> HubConfig | None:
    """Stop sharing: the hub record and this side's bookkeeping go; the store and the hub keep
    every row they hold."""
    import shutil

    cfg = load_config(settings.data_dir)
    folder = hub_dir(settings.data_dir)
    if folder.exists():
        shutil.rmtree(folder)
    return cfg
