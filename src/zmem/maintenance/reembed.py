"""reembed: backfill missing vectors (flagless) or rebuild every live row's vector under a
profile (--all), in bounded transactions. A conversion to another profile stages the new
vectors beside the live index, flips the index and the committed profile in one short
transaction, then copies the staged vectors onto the rows; a kill at any point leaves the old
index or the new one live, each row's vector of one profile, and a rerun resumes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import apsw

from zmem import config
from zmem.db import vectors
from zmem.embedding import PROFILE_DIMS, PROFILE_MODELS, PROFILES, get_embedder
from zmem.embedding.background import BackgroundEmbedder
from zmem.errors import Refusal, UsageError
from zmem.maintenance import bounded
from zmem.maintenance.bounded import BoundedJob

Progress = Callable[[int, int], None]

JOB_KEY = vectors.CONVERSION_KEY
# Rows per write transaction, whatever --batch says: --batch sets the texts per model call,
# this bounds how long a writer beside the job can wait (~0.5 ms a row with the vec0 insert).
MAX_ROWS_PER_TXN = 128
# Rows per copy transaction after the flip (~20 us a row: ~40 ms per transaction).
COPY_CHUNK = 2000


@dataclass
class ReembedReport:
    profile: str
    model: str
    dim: int
    mode: str  # "backfill" | "all"
    live_rows: int
    rows_to_change: int
    rows_changed: int
    index_recreated: bool
    dry_run: bool
    skipped: str | None = None
    resumed: bool = False  # an interrupted conversion was taken up where it stopped
    pending: str | None = None  # an interrupted conversion this run left alone
    abandoned: str | None = None  # the target of an interrupted conversion this run dropped
    transactions: int = 0
    longest_transaction_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _needs(conn: apsw.Connection, model: str, dim: int, everything: bool) -> list[tuple[int, str]]:
    """(rid, content) to embed. Backfill: rows without a vector of this size (a handle opened
    before a conversion may have stored one of another size: as good as none). --all: also rows
    of another model, so switching back and forth is honest."""
    return vectors.needing(conn, None if not everything else model, dim)


def _blobs(matrix: Any) -> list[bytes]:
    return [vec.astype("<f4").tobytes() for vec in matrix]


def run(
    conn: apsw.Connection,
    data_dir: Any,
    *,
    everything: bool = False,
    profile: str | None = None,
    active_profile: str = "minilm",
    batch: int = 64,
    dry_run: bool = False,
    confirm: bool = False,
    progress: Progress | None = None,
) -> ReembedReport:
    if profile is not None and not everything:
        raise UsageError(
            f"--profile needs --all (it converts every vector): zmem reembed --all --profile "
            f"{profile}"
        )
    target = profile or active_profile
    if target not in PROFILES:
        raise UsageError(f"unknown profile {target!r} ({', '.join(PROFILES)})")
    if batch < 1:
        raise UsageError("--batch must be at least 1")
    model, dim = PROFILE_MODELS[target], PROFILE_DIMS[target]
    committed_profile, committed_dim = vectors.committed(conn)
    pending = BoundedJob.pending(conn, JOB_KEY)
    copying = pending is not None and pending.get("phase") == "copy"
    if copying:
        # The flip happened: the store is committed to the job's profile already.
        assert pending is not None
        committed_profile, committed_dim = pending["profile"], pending["dim"]
    rows = _needs(conn, model, dim, everything)
    live = vectors.live_count(conn)
    report = ReembedReport(
        target, model, dim, "all" if everything else "backfill", live, len(rows), 0,
        False, dry_run,
    )  # fmt: skip
    if pending is not None and not copying and not _same_job(pending, target, dim, conn):
        report.pending = (
            f"an interrupted conversion to {pending.get('profile')} is pending: "
            f"zmem reembed --all --profile {pending.get('profile')} resumes it"
        )
    if not everything and committed_dim is not None and committed_dim != dim:
        raise Refusal(
            f"this store's vectors are {committed_dim}-d ({committed_profile}); backfilling "
            f"{dim}-d {target} vectors would mix sizes: zmem reembed --all --profile {target}"
        )
    if everything and target == "fake" and not confirm:
        real = [m for m in vectors.embedded_models(conn) if m not in (None, PROFILE_MODELS["fake"])]
        if real or committed_profile not in (None, "fake"):
            raise Refusal(
                "the store holds real (non-fake) vectors; replacing them with fake ones cannot "
                "be undone without the model: add --confirm if that is what you want"
            )
    if dry_run:
        return report
    has_vec = vectors.available(conn)
    if not has_vec and vectors.table_exists(conn):
        raise Refusal(
            "this store has a vector index but sqlite-vec is not loadable here: reinstall zmem "
            "(pip install --force-reinstall zmem) and run reembed again"
        )
    try:
        embedder = BackgroundEmbedder(lambda: get_embedder(target, data_dir))
    except Exception as exc:
        if not everything:  # flagless: no runtime or model is a graceful skip, not an error
            report.skipped = f"no {target} embedder here: {exc}"
            return report
        raise Refusal(f"cannot load the {target} model: {exc}") from None
    try:
        return _work(conn, embedder, report, pending, everything, batch, rows, progress)
    finally:
        embedder.close()


def _work(
    conn: apsw.Connection,
    embedder: BackgroundEmbedder,
    report: ReembedReport,
    pending: dict[str, Any] | None,
    everything: bool,
    batch: int,
    rows: list[tuple[int, str]],
    progress: Progress | None,
) -> ReembedReport:
    target, model, dim = report.profile, report.model, report.dim
    copying = pending is not None and pending.get("phase") == "copy"
    committed_profile, committed_dim = vectors.committed(conn)
    has_vec = vectors.available(conn)
    runner = _Run(conn, embedder, model, dim, target, batch, has_vec, report, progress)
    if copying:
        # Whatever this run was asked, first finish the copy the flip committed to.
        assert pending is not None
        job, _ = BoundedJob.claim(conn, JOB_KEY, dict, lambda s: True, _noop, "reembed")
        report.resumed = True
        runner.copy(job, resumed=True)
        committed_profile, committed_dim = vectors.committed(conn)
        rows = _needs(conn, model, dim, everything)
    converting = everything and (
        committed_profile not in (None, target) or committed_dim not in (None, dim)
    )
    stale = BoundedJob.pending(conn, JOB_KEY)
    if everything and stale is not None and not _same_job(stale, target, dim, conn):
        # --all to another profile than the interrupted conversion's: the operator chose; what
        # that conversion built (never the live index) goes.
        job, _ = BoundedJob.claim(conn, JOB_KEY, dict, lambda s: False, _abandon, "reembed")
        job.finish()
        report.abandoned, report.pending = str(stale.get("profile")), None
    if converting:
        job, resumed = BoundedJob.claim(
            conn,
            JOB_KEY,
            lambda: _fresh(conn, target, model, dim),
            lambda s: _same_job(s, target, dim, conn),
            _abandon,
            "reembed",
        )
        report.resumed = resumed
        report.index_recreated = True
        report.pending = None
        runner.stage(job)
        runner.copy(job, resumed=False)
        rows = _needs(conn, model, dim, everything)  # rows written beside the conversion
    runner.in_place(rows)
    runner.repair_index()
    if not converting and (everything or committed_dim is None):
        if vectors.committed(conn) != (target, dim):
            runner.commit_profile()
    report.transactions = len(runner.held)
    report.longest_transaction_ms = round(max(runner.held, default=0.0) * 1000, 1)
    return report


def _noop(conn: apsw.Connection, abandoned: dict[str, Any] | None) -> None:
    pass


def _fresh(conn: apsw.Connection, target: str, model: str, dim: int) -> dict[str, Any]:
    live = vectors.active(conn)
    return {
        "job": "reembed",
        "profile": target,
        "model": model,
        "dim": dim,
        "from_table": live,
        "table": vectors.spare(live),
        "at": config.now_iso(),
        "phase": "stage",
        "cursor": 0,
        "done": 0,
    }


def _same_job(state: dict[str, Any], target: str, dim: int, conn: apsw.Connection) -> bool:
    """A saved stage-phase job converting to the same profile from the index live now."""
    return (
        state.get("phase") == "stage"
        and state.get("profile") == target
        and state.get("dim") == dim
        and state.get("from_table") == vectors.active(conn)
        and isinstance(state.get("cursor"), int)
    )


def _abandon(conn: apsw.Connection, abandoned: dict[str, Any] | None) -> None:
    """Clear what an abandoned conversion built (never the live index), and make room."""
    live = vectors.active(conn)
    spare = vectors.spare(live)
    if vectors.table_exists(conn, spare):
        vectors.drop(conn, spare)
    vectors.drop_stage(conn)


class _Run:
    """One reembed run's batches, each its own transaction."""

    def __init__(
        self,
        conn: apsw.Connection,
        embedder: BackgroundEmbedder,
        model: str,
        dim: int,
        target: str,
        batch: int,
        has_vec: bool,
        report: ReembedReport,
        progress: Progress | None,
    ):
        self.conn = conn
        self.embedder = embedder
        self.model, self.dim, self.target = model, dim, target
        self.batch = batch
        self.has_vec = has_vec
        self.report = report
        self.progress = progress
        self.held: list[float] = []
        self.total = report.rows_to_change

    def _tick(self) -> None:
        if self.progress is not None:
            self.progress(self.report.rows_changed, max(self.total, self.report.rows_changed))

    def stage(self, job: BoundedJob) -> None:
        """Embed every live row past the cursor into the stage and the spare index, batch by
        batch, then flip. Rows added since the run started are converted by the backfill after
        the flip (their old vectors, or none, are never read under the new profile)."""
        st = job.state
        spare = st["table"] if self.has_vec else None

        def prepare(c: apsw.Connection) -> None:
            built = vectors.stage_exists(c) and (spare is None or vectors.table_exists(c, spare))
            if not built:  # killed before its first batch: nothing staged yet
                st["cursor"], st["done"] = 0, 0
            vectors.create_stage(c)
            if spare is not None:
                vectors.create_table(c, spare, self.dim)

        job.step(prepare)
        # Rows written after this point are left to the backfill after the flip: writers
        # faster than the model would otherwise keep the flip from ever coming.
        last = vectors.last_rid(self.conn)

        def after(cursor: int) -> list[tuple[int, str, str]]:
            return [r for r in vectors.live_after(self.conn, cursor, self.batch) if r[0] <= last]

        rows = after(st["cursor"])
        ahead = self.embedder.submit([content for _, _, content in rows]) if rows else None
        while rows and ahead is not None:
            blobs = _blobs(ahead.result())
            # The next batch embeds on the model's thread while this one commits.
            following = after(rows[-1][0])
            ahead = (
                self.embedder.submit([content for _, _, content in following])
                if following
                else None
            )
            staged = [(rid, ns, blob) for (rid, ns, _), blob in zip(rows, blobs, strict=True)]
            for start in range(0, len(staged), MAX_ROWS_PER_TXN):
                part = staged[start : start + MAX_ROWS_PER_TXN]

                def apply(c: apsw.Connection, part: list[tuple[int, str, bytes]] = part) -> None:
                    vectors.stage(c, spare, part)
                    st["cursor"] = part[-1][0]
                    st["done"] += len(part)

                # Waiting for the next batch's model call leaves writers their gap.
                job.step(apply, pause=False)
            self.report.rows_changed = st["done"]
            self._tick()
            rows = following

        # Rows tombstoned during the staging leave the spare index in bounded batches first,
        # so the flip itself only handles the few tombstoned in between.
        dead = vectors.staged_dead(self.conn)
        for start in range(0, len(dead), MAX_ROWS_PER_TXN):
            part = dead[start : start + MAX_ROWS_PER_TXN]

            def forget(c: apsw.Connection, part: list[int] = part) -> None:
                vectors.unstage(c, part)
                if spare is not None:
                    vectors.unindex(c, part, spare)

            job.step(forget)

        def flip(c: apsw.Connection) -> None:
            dead = vectors.staged_dead(c)
            vectors.unstage(c, dead)
            if spare is not None:
                vectors.unindex(c, dead, spare)
                old = st["from_table"]
                if vectors.table_exists(c, old):
                    vectors.drop(c, old)
                vectors.flip(c, spare, self.target, self.dim)
            else:
                vectors.set_committed(c, self.target, self.dim)
            st["phase"], st["cursor"] = "copy", 0

        job.step(flip)
        self.held += job.held
        job.held = []

    def copy(self, job: BoundedJob, resumed: bool) -> None:
        """After the flip: move the staged vectors onto their rows in chunks, then forget the
        job. Until a row's chunk lands it keeps its old vector with its old marker, which every
        reader of the new profile skips (a row is never half of one profile)."""
        st = job.state
        while True:
            span = vectors.staged_span(self.conn, st["cursor"], COPY_CHUNK)
            if span is None:
                break

            def apply(c: apsw.Connection, span: tuple[int, int] = span) -> None:
                copied = vectors.copy_staged(c, span[0], span[1], st["model"], st["at"])
                st["cursor"] = span[1]
                if resumed:  # rows staged by the killed run: converted by this one
                    self.report.rows_changed += copied

            job.step(apply)
        job.finish(vectors.drop_stage)
        self.held += job.held
        job.held = []

    def in_place(self, rows: list[tuple[int, str]]) -> None:
        """Rows of the live profile that lack its vector: embed and index them in place, a
        bounded transaction per batch (a row tombstoned meanwhile is left alone)."""
        if not rows:
            return
        at = config.now_iso()
        self.total = max(self.total, self.report.rows_changed + len(rows))
        chunks = [rows[i : i + self.batch] for i in range(0, len(rows), self.batch)]
        ahead = self.embedder.submit([content for _, content in chunks[0]])
        for n, chunk in enumerate(chunks):
            blobs = _blobs(ahead.result())
            if n + 1 < len(chunks):  # embedding the next chunk while this one commits
                ahead = self.embedder.submit([content for _, content in chunks[n + 1]])
            for sub in range(0, len(chunk), MAX_ROWS_PER_TXN):
                pairs = list(zip(chunk, blobs, strict=True))[sub : sub + MAX_ROWS_PER_TXN]
                self._timed(lambda c, pairs=pairs: self._write(c, pairs, at))
            self._tick()

    def _write(
        self, c: apsw.Connection, pairs: list[tuple[tuple[int, str], bytes]], at: str
    ) -> None:
        if self.has_vec and not vectors.table_exists(c):
            vectors.create(c, self.target, self.dim)
        changed = [
            rid for (rid, _), blob in pairs if vectors.set_embedding(c, rid, blob, self.model, at)
        ]
        if self.has_vec and changed:
            vectors.index_rows(c, changed)
        self.report.rows_changed += len(changed)

    def repair_index(self) -> None:
        """Make the live index hold exactly the live rows' vectors of this profile (rows written
        by a process without sqlite-vec, or tombstoned there, are caught up here): one scan to
        find the difference, then bounded transactions to fix it."""
        if not self.has_vec or not vectors.table_exists(self.conn):
            return
        if vectors.committed(self.conn)[1] != self.dim:
            return
        meant = vectors.meant_rids(self.conn, self.model, self.dim)
        held = vectors.indexed_rids(self.conn)
        missing, extra = sorted(meant - held), sorted(held - meant)
        # vec0 writes cost ~0.5 ms a row: the same bound as a staging batch.
        for start in range(0, len(missing), MAX_ROWS_PER_TXN):
            part = missing[start : start + MAX_ROWS_PER_TXN]
            self._timed(lambda c, part=part: vectors.index_rows(c, part))
        for start in range(0, len(extra), MAX_ROWS_PER_TXN):
            part = extra[start : start + MAX_ROWS_PER_TXN]
            self._timed(lambda c, part=part: vectors.unindex(c, part))

    def commit_profile(self) -> None:
        self._timed(lambda c: vectors.set_committed(c, self.target, self.dim))

    def _timed(self, apply: Callable[[apsw.Connection], Any]) -> None:
        self.held.append(bounded.commit(self.conn, apply)[1])
