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
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import apsw

from zmem import config
from zmem.db import changes, hub_state, memories, origin
from zmem.db import hub as hubdb
from zmem.db import sync as sync_db
from zmem.db.connect import transaction
from zmem.errors import HubRefused, Refusal
from zmem.models import GLOBAL_NAMESPACE
from zmem.sync import hub_records as rec
from zmem.sync.hub_local import (  # re-exported: the sync's own names
    STATE_NAME,
    HubConfig,
    SyncReport,
    _record_error,
    hub_dir,
    recorded,
)

if TYPE_CHECKING:
    from zmem.sync.hub_screen import Screened
    from zmem.sync.ingest import IngestReport

# The capture policy, the screening and the ingest path are imported by the work that needs
# them: a sync with nothing new (quick) never does.

BATCH = 500  # objects a hub transaction (push) or page (pull)
# ---- push ------------------------------------------------------------------------------------


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
        self.role = cfg.role or ""
        self.writable = list(self.ns)

    def check_access(self) -> None:
        """The login and its grants, read once: a namespace the hub no longer grants stops the
        sync before anything moves (exit 2, naming it); a read-only one is pulled only."""
        try:
            self.role, granted = hubdb.access(self.hub)
        except hubdb.refused_errors() as exc:
            raise HubRefused(
                f"the hub {self.where} no longer lets {self.cfg.role} in (removed from the team: "
                f"{' '.join(str(exc).split())[:80]}); stop sharing {', '.join(self.ns)} with "
                "`zmem hub leave`; nothing changed"
            ) from None
        revoked = [ns for ns in self.ns if ns != GLOBAL_NAMESPACE and ns not in granted]
        if revoked:
            raise HubRefused(
                f"the hub {self.where} no longer grants {self.role} {', '.join(revoked)}: an "
                "admin runs `zmem hub grant`, or stop sharing it with `zmem hub leave "
                f"--namespace {revoked[0]}`; nothing changed"
            )
        self.writable = [ns for ns in self.ns if ns == GLOBAL_NAMESPACE or granted[ns]]
        self.report.read_only = [ns for ns in self.ns if ns not in self.writable]

    # -- push --

    def _outgoing_memory(self, m: Any) -> dict[str, Any] | None:
        """A row as it goes to the hub: the capture policy of this machine's mode first (auto
        redacts secrets, so none reaches the hub)."""
        from zmem.capture import policy

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

    def _send(self, objects: list[tuple[str, str, str, dict[str, Any]]]) -> bool:
        """One call of the hub's push() (its own transaction); then, only then, this side
        records what the hub holds. False when the hub left some object for later (another
        session held it): the caller keeps its cursor so they go again next sync."""
        if not objects:
            return True
        with self.hub.transaction():
            outcomes = hubdb.push(self.hub, objects, self.cfg.machine)
            _crash_point("push-mid")  # before the hub commits
        _crash_point("push")  # the hub committed; this side has not recorded it
        taken, refused = [], []
        busy = False
        for obj, outcome in zip(objects, outcomes, strict=True):
            kind, key, ns, body = obj
            if outcome == "busy":
                busy = True
                self.report.deferred += 1
                continue
            if outcome.startswith("refused"):
                refused.append((kind, key, 0, ns, self.role, self.cfg.machine, outcome))
            elif outcome != "unchanged":
                self.report.hub_changed += 1
            self.report.pushed[kind] += 1
            taken.append(obj)
        if refused:
            self.report.refused += len(refused)
            hub_state.quarantine(self.state, "push", refused, config.now_iso())
        hub_state.remember(self.state, [
            (kind, key, ns, rec.state_of(kind, body), self.role, self.cfg.machine)
            for kind, key, ns, body in taken
        ])  # fmt: skip
        return not busy

    def push(self) -> None:
        if not self.writable:
            return
        cursors = hub_state.cursors(self.state)
        # New rows (and rows first seen since the last push): rids only grow.
        after = cursors.get("push_rid", 0)
        while rows := sync_db.rows_after(self.conn, after, self.writable, self.batch):
            held = hub_state.known_of(self.state, "memory", [m.id for _, m in rows])
            out = [
                ("memory", m.id, m.namespace, body)
                for _, m in rows
                if held.get(m.id, -1) < int(m.superseded_at is not None)
                and (body := self._outgoing_memory(m)) is not None
            ]
            if not self._send(out):
                return  # the cursor stays: what was held goes again next sync
            after = rows[-1][0]
            hub_state.set_cursors(self.state, {"push_rid": after})
            self._tick("push", len(rows))
        # Tombstones of rows pushed or pulled before: counted first, listed second, so one
        # that lands in between is seen now or next time, never lost.
        count = changes.tombstone_count(self.conn, self.writable)
        if count != cursors.get("tomb_count"):
            dead = sync_db.tombstoned(self.conn, self.writable)
            held = hub_state.known(self.state, "memory")
            todo = [i for i in dead if held.get(i, 1) == 0]
            done = True
            for start in range(0, len(todo), self.batch):
                rows = memories.get_many(self.conn, todo[start : start + self.batch])
                done &= self._send(
                    [("memory", m.id, m.namespace, self._outgoing_memory(m)) for m in rows]
                )
            if done:
                hub_state.set_cursors(self.state, {"tomb_count": count})
        self._push_graph(cursors)

    def _push_graph(self, cursors: dict[str, int]) -> None:
        links, episodes, closed, members = changes.graph_counts(self.conn, self.writable)
        if links != cursors.get("link_count"):
            held = hub_state.known(self.state, "link")
            todo = [
                ("link", key, ns, rec.link_body(k))
                for ns, k in sync_db.links_in(self.conn, self.writable)
                if (key := rec.link_key(k.src, k.dst, k.relation)) not in held
            ]
            if self._in_batches(todo):
                hub_state.set_cursors(self.state, {"link_count": links})
        if (episodes, closed) != (cursors.get("episode_count"), cursors.get("closed_count")):
            held = hub_state.known(self.state, "episode")
            todo = [
                ("episode", e.id, e.namespace, rec.episode_body(e))
                for e in sync_db.episodes_in(self.conn, self.writable)
                if held.get(e.id, -1) < int(e.ended_at is not None)
            ]
            if self._in_batches(todo):
                hub_state.set_cursors(
                    self.state, {"episode_count": episodes, "closed_count": closed}
                )
        if members != cursors.get("member_count"):
            held = hub_state.known(self.state, "episode_memory")
            todo = [
                ("episode_memory", key, ns, rec.membership_body(e, m, at))
                for ns, e, m, at in sync_db.memberships_in(self.conn, self.writable)
                if (key := rec.membership_key(e, m)) not in held
            ]
            if self._in_batches(todo):
                hub_state.set_cursors(self.state, {"member_count": members})

    def _in_batches(self, objects: list[tuple[str, str, str, dict[str, Any]]]) -> bool:
        done = True
        for start in range(0, len(objects), self.batch):
            done &= self._send(objects[start : start + self.batch])
            self._tick("push", min(self.batch, len(objects) - start))
        return done

    # -- pull --

    def pull(self) -> None:
        """Every change the hub committed since the last pull's snapshot, page by page inside
        one window (the snapshot taken when this pull began): a change in flight at any
        snapshot is read once it commits, so no cursor passes a row it has not seen, and no
        open transaction anywhere holds a pull back."""
        marks = hub_state.marks(self.state)
        prev = marks.get("pull_prev") or hubdb.FIRST_SNAPSHOT
        window = marks.get("pull_window")
        after = int(marks.get("pull_after") or 0)
        if window is None:
            window, after = hubdb.snapshot(self.hub), 0
            hub_state.set_marks(self.state, {"pull_window": window, "pull_after": "0"})
        from zmem.sync.ingest import IngestReport

        spaces = [hubdb.hub_namespace(ns, self.role) for ns in self.ns]
        totals = IngestReport()
        while page := hubdb.page(self.hub, prev, window, after, spaces, self.batch):
            held = {
                kind: hub_state.known_of(self.state, kind, [r.key for r in page if r.kind == kind])
                for kind in rec.KINDS
            }
            # What this machine pushed comes back: nothing to apply when it holds that state
            # (a state the hub moved past it, a retirement from elsewhere, is applied).
            todo = [
                r for r in page
                if r.machine != self.cfg.machine or r.written_by != self.role
                or r.retired_by is not None
                or held.get(r.kind, {}).get(r.key, -1) < _state(r)
            ]  # fmt: skip
            _crash_point("pull-mid")  # the page read, nothing applied
            if todo:
                report = self._apply(todo)
                for k, v in report.to_dict().items():
                    if isinstance(v, int):
                        setattr(totals, k, getattr(totals, k) + v)
                totals.errors.extend(report.errors[: 50 - len(totals.errors)])
            hub_state.remember(self.state, [
                (r.kind, r.key, hubdb.local_namespace(r.namespace), _state(r), r.written_by,
                 r.machine)
                for r in page
            ])  # fmt: skip
            _crash_point("pull")  # applied and committed here; the cursor not moved
            after = page[-1].seq
            hub_state.set_marks(self.state, {"pull_after": str(after)})
            self._tick("pull", len(page))
        hub_state.set_marks(
            self.state, {"pull_prev": window, "pull_window": None, "pull_after": "0"}
        )
        self.report.ingest = {k: v for k, v in totals.to_dict().items() if v}

    def _apply(self, rows: Sequence[hubdb.HubRow]) -> IngestReport:
        """One page into the store: each object screened first (its shape, what the hub checked
        of it, what it would touch here), the bad ones quarantined; the rest through the ingest
        path: memories first (their capture policy, vectors, entities, the duplicate guard),
        then links, episodes, memberships. An object the ingest path cannot take is found by
        applying the page one object at a time, and quarantined too."""
        from zmem.sync.hub_screen import DATA_ERRORS, Screen
        from zmem.sync.ingest import IngestReport

        now = config.now_iso()
        screen = Screen(self.conn, self.role, now, self.settings.capture_mode)
        good, bad = screen.run(rows)
        self._quarantine(bad, now)
        try:
            report = self._ingest(good, now)
        except DATA_ERRORS:
            report = IngestReport()
            for one in good:
                try:
                    single = self._ingest([one], now)
                except DATA_ERRORS as exc:
                    self._quarantine([(one, f"could not be applied ({type(exc).__name__})")], now)
                    continue
                for k, v in single.to_dict().items():
                    if isinstance(v, int):
                        setattr(report, k, getattr(report, k) + v)
        self._record_origin(good, now)
        for r in good:
            self.report.pulled[r.row.kind] += 1
        return report

    def _ingest(self, items: Sequence[Screened], now: str) -> IngestReport:
        from zmem.sync.ingest import ingest_chunks

        chunk = [(n, "ok", s.record) for n, s in enumerate(items, 1) if s.row.kind != "link"]
        links: dict[str, list[dict[str, Any]]] = {}
        for s in items:
            if s.row.kind == "link":
                links.setdefault(s.record["src"], []).append(s.record)
        return ingest_chunks(
            self.conn, self.vectors, [chunk], now=now, hub=True, links=list(links.items())
        )

    def _quarantine(self, bad: Sequence[tuple[Any, str]], now: str) -> None:
        if not bad:
            return
        rows = []
        for item, reason in bad:
            r = getattr(item, "row", item)  # a Screened object or a bare HubRow
            rows.append((str(r.kind)[:40], str(r.key)[:400], r.seq, r.namespace,
                         r.written_by, str(r.machine)[:200], reason[:300]))  # fmt: skip
        hub_state.quarantine(self.state, "pull", rows, now)
        self.report.quarantined += len(rows)

    def _record_origin(self, good: Sequence[Screened], now: str) -> None:
        """Who wrote each pulled memory (and who retired it), beside it in the store."""
        rows = [
            (s.row.key, s.row.written_by, s.row.machine, s.row.written_by == self.role,
             s.row.retired_by, s.row.retired_machine, s.row.retired_at)
            for s in good if s.row.kind == "memory"
        ]  # fmt: skip
        if rows:
            with transaction(self.conn):
                origin.ensure(self.conn)
                origin.record(self.conn, rows, now)

    def _tick(self, phase: str, n: int) -> None:
        if self.progress:
            self.progress(phase, n)


def _state(r: hubdb.HubRow) -> int:
    return rec.state_of(r.kind, r.body) if isinstance(r.body, dict) else 0


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
    what committed before stays committed on both sides (the cursors say how far). A row the
    hub holds never fails the sync: it is applied or quarantined."""
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
                job.check_access()
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


def status(settings: config.Settings, cfg: HubConfig, *, ask_hub: bool = True) -> dict[str, Any]:
    """The last push and pull, the last error, what was quarantined, and (asking the hub) how
    many objects this store is behind."""
    rec_ = recorded(settings.data_dir)
    st = rec_.status
    out: dict[str, Any] = {
        "hub": hubdb.describe(cfg.url), "namespaces": cfg.namespaces, "machine": cfg.machine,
        "role": cfg.role, "last_push": st.get("last_push"), "last_pull": st.get("last_pull"),
        "last_error": st.get("last_error"), "behind": None, "reachable": None,
        "writers": [dict(zip(("namespace", "kind", "writer", "machine", "objects"), w,
                             strict=True)) for w in rec_.writers],
        "quarantined": rec_.quarantine_counts.get("pull", 0),
        "refused": rec_.quarantine_counts.get("push", 0),
        "quarantine": rec_.quarantine,
    }  # fmt: skip
    if ask_hub:
        try:
            conn = hubdb.connect(cfg.url, timeout=5)
        except Exception as exc:  # status reports a hub that is down; it does not fail on it
            out["reachable"] = False
            out["hub_error"] = str(exc)
        else:
            try:
                role = conn.execute("SELECT session_user").fetchone()[0]
                spaces = [hubdb.hub_namespace(ns, role) for ns in cfg.namespaces]
                prev = rec_.marks.get("pull_prev") or hubdb.FIRST_SNAPSHOT
                out["behind"] = hubdb.behind(conn, prev, spaces)
                out["reachable"] = True
            except Exception as exc:
                out["reachable"] = False
                out["hub_error"] = str(_as_refusal(exc, out["hub"]))
            finally:
                conn.close()
    return out
