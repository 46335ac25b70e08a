"""ingest-jsonl: every line validated and put through the capture policy before it can land
(sync.prepare, in worker processes for a big file; a bad line is reported by its number and
never lands), rows restored in bounded transactions with their vectors computed outside the
write lock, the next batch's while this one commits. Links, episodes and memberships follow
once every row has landed. Deterministic state restore: no trust deltas, no link generation,
and the same file ingested twice changes nothing."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import apsw

from zmem.capture import judge, policy, writer
from zmem.capture.source import normalize_source_ref
from zmem.capture.writer import DEDUP_THRESHOLD
from zmem.db import graph, memories, vectors
from zmem.db import sync as sync_db
from zmem.db.connect import read_snapshot
from zmem.maintenance import bounded
from zmem.models import worst_taint
from zmem.sync import prepare
from zmem.sync.records import (
    EpisodeRecord,
    MembershipRecord,
    MemoryRecord,
    memory_record,
)

# Rows per write transaction. A batch holds the write lock ~0.3 s (the capture policy ran
# before, the model works on the next batch meanwhile), so an add beside an ingest waits that
# long at most; after each batch the job pauses up to 50 ms for such writers (bounded.commit),
# which costs ~15% of the run at this size and grew to a third at 256 rows a batch.
BATCH = 1024
LINK_BATCH = 2000
MAX_ERRORS_LISTED = 200


@dataclass
class IngestReport:
    lines: int = 0
    inserted: int = 0
    deduped: int = 0  # folded into a near-identical live local row
    unchanged: int = 0  # the id is here already, in the same state
    conflicts: int = 0  # the id is here in another state: the local row is kept
    tombstoned: int = 0  # --allow-tombstones retired a live local row
    tombstones_refused: int = 0
    capture_refused: int = 0
    malformed: int = 0
    redacted: int = 0
    # Rows kept verbatim (capture mode manual or reviewed) though they look like they hold a
    # secret: what `auto` would have redacted, reported as `add` reports it.
    secret_warnings: int = 0
    injection_risk: int = 0
    links_added: int = 0
    links_present: int = 0
    links_skipped: int = 0
    episodes_added: int = 0
    episodes_present: int = 0
    memberships_added: int = 0
    memberships_present: int = 0
    memberships_skipped: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)
    errors_not_listed: int = 0

    def fail(self, line: int, reason: str) -> None:
        if len(self.errors) < MAX_ERRORS_LISTED:
            self.errors.append({"line": line, "error": reason})
        else:
            self.errors_not_listed += 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Ingest:
    def __init__(
        self,
        conn: apsw.Connection,
        store_vectors: Any,
        report: IngestReport,
        allow_tombstones: bool,
        now: str,
        hub: bool = False,
    ):
        self.conn = conn
        # A team hub pull (sync/hub.py): rows keep their identity, so that every machine ends
        # with the same rows; a near-duplicate is resolved the same way on every machine (the
        # older one stays live, the later is tombstoned) instead of folded into a local row.
        self.hub = hub
        self.vectors = store_vectors
        self.report = report
        self.allow_tombstones = allow_tombstones
        self.now = now
        self.inserted: set[str] = set()
        self.asks: dict[str, list[Any]] = {}  # row id -> the judge's questions about it
        self.alias: dict[str, str] = {}  # a folded remote id -> the local row it folded into
        self.check_dups = vectors.live_count(conn) > 0
        self.semantic = store_vectors.semantic()
        self.model = ThreadPoolExecutor(max_workers=1, thread_name_prefix="zmem-ingest")
        self.pending: tuple[list[MemoryRecord], Future] | None = None

    def feed(self, batch: list[MemoryRecord]) -> None:
        """Queue a batch: the model embeds it on its thread while the previous one commits."""
        # Ids already here need no vector (a re-ingest embeds nothing); read before the batch
        # is submitted, so the model's thread never touches the store.
        present = sync_db.present_ids(self.conn, [r.fields["id"] for r in batch])
        future = self.model.submit(self._embed, batch, present)
        self.drain()
        self.pending = (batch, future)

    def drain(self) -> None:
        if self.pending is None:
            return
        batch, future = self.pending
        self.pending = None
        vecs = future.result()
        # Whether this store takes these vectors (one check a batch, not a pragma a row): all of
        # a batch come from one model.
        probe = next((v for v in vecs if v is not None), None)
        if probe is not None and self.vectors.for_write(probe) is None:
            vecs = [None] * len(batch)
        twins = self._twins(batch, vecs)
        bounded.commit(self.conn, lambda conn: self._write(batch, vecs, twins))

    def close(self) -> None:
        self.model.shutdown(wait=True)

    def _embed(self, batch: Sequence[MemoryRecord], present: set[str]) -> list[Any]:
        todo = [
            i for i, r in enumerate(batch)
            if r.fields["superseded_at"] is None and r.fields["id"] not in present
        ]  # fmt: skip
        out: list[Any] = [None] * len(batch)
        texts = [batch[i].fields["content"] for i in todo]
        for i, vec in zip(todo, self.vectors.embed_many(texts), strict=True):
            out[i] = vec
        return out

    def _twins(self, batch: Sequence[MemoryRecord], vecs: Sequence[Any]) -> list[Any]:
        """The twin (`_twin`) of each new live row, looked up from one read before the batch's
        transaction: a neighbour search a row, which inside the write lock held it 2 s a batch
        on a loaded machine at 10k MiniLM rows, and an add beside the ingest waited as long
        (bench/beside.py). The transaction re-reads each twin found."""
        out: list[Any] = [None] * len(batch)
        if not self.check_dups:
            return out
        with read_snapshot(self.conn):
            here = {m.id for m in memories.get_many(self.conn, [r.fields["id"] for r in batch])}
            for i, (record, vec) in enumerate(zip(batch, vecs, strict=True)):
                f = record.fields
                if f["superseded_at"] is None and f["id"] not in here:
                    out[i] = self._twin(f, record.norm, vec)
        return out

    def _write(
        self, batch: Sequence[MemoryRecord], vecs: Sequence[Any], twins: Sequence[Any]
    ) -> None:
        """One transaction: decide each row in file order, then insert the new ones and link
        their entities with one statement per table."""
        ids = [r.fields["id"] for r in batch]
        local = {m.id: m for m in memories.get_many(self.conn, ids)}
        new: list[tuple[dict[str, Any], str, Any]] = []
        mentions: list[tuple[str, Any]] = []
        retire: list[tuple[str, str]] = []  # (row, the duplicate it is retired for): hub pulls
        for record, vec, found in zip(batch, vecs, twins, strict=True):
            f = record.fields
            mine = local.get(f["id"])
            if mine is not None:
                self._known(mine, f)
                continue
            live = f["superseded_at"] is None
            # Only rows that were here before the run can be twins, so the rows of this batch
            # need not be in the indexes yet when a later one looks. A twin found before the
            # transaction is taken as it is now: a writer may have retired or tagged it since.
            if live and found is not None:
                twin = memories.get(self.conn, found.id)
                if twin is not None and not twin.live:
                    twin = None
                if twin is not None and self.hub:
                    retire.append(
                        _later((twin.id, twin.ingestion_ts), (f["id"], f["ingestion_ts"]))
                    )
                elif twin is not None:
                    self._fold(twin, f)
                    continue
            new.append((f, record.norm, vec))
            mentions.append((f["id"], record.mentions))
            self.inserted.add(f["id"])
        sync_db.restore_many(self.conn, new, self.now)
        writer.link_entities_many(self.conn, mentions, self.now)
        for f, _, _ in new:
            asks = self.asks.pop(f["id"], None)
            if asks:
                writer.ask_about(self.conn, f["id"], f["namespace"], asks, self.now, "queue")
        self.report.inserted += len(new)
        for later, keeper in retire:
            if memories.tombstone(self.conn, later, self.now, f"duplicate of {keeper}"):
                self.report.deduped += 1

    def _known(self, mine: Any, f: dict[str, Any]) -> None:
        if f["superseded_at"] is not None and mine.live:
            if not (self.allow_tombstones or self.hub):
                self.report.tombstones_refused += 1
            elif memories.tombstone(
                self.conn, mine.id, f["superseded_at"], f["supersede_reason"], f["valid_until"]
            ):
                self.report.tombstoned += 1
            return
        theirs = {**f, "tags": list(f["tags"]), "merged_from": list(f["merged_from"])}
        ours = memory_record(mine, [])
        same = all(ours.get(k) == v for k, v in theirs.items())
        if same:
            self.report.unchanged += 1
        else:
            self.report.conflicts += 1

    def _twin(self, f: dict[str, Any], norm: str, vec: Any) -> Any:
        """A live row that was here before this run and says the same thing with the same
        polarity and numbers. Rows of this file never fold into each other: the store they came
        from kept them apart."""
        neighbours, _ = writer.find_neighbours(
            self.conn, f["content"], norm, f["namespace"], DEDUP_THRESHOLD, (), vec,
            self.semantic, DEDUP_THRESHOLD, judge.ASK_COSINE,
        )  # fmt: skip
        judged = writer.judge_neighbours(
            f["content"], [n for n in neighbours if n.candidate.id not in self.inserted]
        )
        twins = [n for n, v in judged if v.decision == judge.FOLD]
        if twins:
            return max(twins, key=lambda n: (n.jaccard, n.similarity)).candidate
        # Contradictions never merge, on any surface: the remote row lands as its own. What
        # the judge cannot decide is queued once the row is in (no agent is here to ask).
        asks = [(n, v) for n, v in judged if v.decision == judge.ASK]
        if asks:
            self.asks[f["id"]] = asks
        return None

    def _fold(self, twin: Any, f: dict[str, Any]) -> None:
        tags = policy.merge_tags(twin.tags, f["tags"])
        taint = worst_taint(twin.taint, f["taint"])
        if tags != tuple(twin.tags) or taint != twin.taint:
            sync_db.fold(self.conn, twin.id, tags, taint)
        self.alias[f["id"]] = twin.id
        self.report.deduped += 1

    # ---- after every row -----------------------------------------------------------------

    def links(self, outgoing: Sequence[tuple[str, list[dict[str, Any]]]]) -> None:
        edges = [
            (self.alias.get(src, src), self.alias.get(k["dst"], k["dst"]), k)
            for src, links in outgoing
            for k in links
        ]
        for start in range(0, len(edges), LINK_BATCH):
            chunk = edges[start : start + LINK_BATCH]
            bounded.commit(self.conn, lambda conn, e=chunk: self._edges(e))

    def _edges(self, edges: Sequence[tuple[str, str, dict[str, Any]]]) -> None:
        here = sync_db.namespaces_of(self.conn, list({x for s, d, _ in edges for x in (s, d)}))
        for src, dst, k in edges:
            # Fail-closed: both ends here, in one namespace (the write path never links across).
            if src == dst or src not in here or here[src] != here.get(dst):
                self.report.links_skipped += 1
            elif graph.insert_link(
                self.conn, src, dst, k["relation"], k["score"], k["created_at"] or self.now
            ):
                self.report.links_added += 1
            else:
                self.report.links_present += 1

    def episodes(self, episodes: Sequence[EpisodeRecord], members: Sequence[MembershipRecord]):
        def apply(conn: apsw.Connection) -> None:
            for rec in episodes:
                e = rec.episode
                summary = self.alias.get(e.summary_memory_id or "", e.summary_memory_id)
                if summary is not None and not sync_db.present_ids(conn, [summary]):
                    summary = None  # its summary row did not land here; the episode still does
                if sync_db.restore_episode(conn, replace(e, summary_memory_id=summary)):
                    self.report.episodes_added += 1
                elif (
                    self.hub
                    and e.ended_at
                    and sync_db.close_episode(conn, replace(e, summary_memory_id=summary))
                ):
                    self.report.episodes_added += 1  # closed here as it was on the hub
                else:
                    self.report.episodes_present += 1
            wanted = [m.episode_id for m in members]
            have_episodes = sync_db.episode_ids_present(conn, wanted)
            ids = [self.alias.get(m.memory_id, m.memory_id) for m in members]
            have_rows = sync_db.present_ids(conn, ids)
            for m, memory_id in zip(members, ids, strict=True):
                if m.episode_id not in have_episodes or memory_id not in have_rows:
                    self.report.memberships_skipped += 1
                    self.report.fail(m.line, "membership names an episode or memory not here")
                elif graph.add_episode_member(conn, m.episode_id, memory_id, m.added_at):
                    self.report.memberships_added += 1
                else:
                    self.report.memberships_present += 1

        if episodes or members:
            bounded.commit(self.conn, apply)


def _later(a: tuple[str, str], b: tuple[str, str]) -> tuple[str, str]:
    """(the later row, the keeper) of two duplicates, by (ingestion time, id): the same answer
    on every machine, whichever arrived first."""
    first, second = sorted([a, b], key=lambda x: (x[1], x[0]))
    return second[0], first[0]


def _identity(record: Any) -> tuple[str, str]:
    if isinstance(record, MemoryRecord):
        return ("memory id", record.fields["id"])
    if isinstance(record, EpisodeRecord):
        return ("episode id", record.episode.id)
    return ("membership", f"{record.episode_id}/{record.memory_id}")


def ingest(
    conn: apsw.Connection,
    store_vectors: Any,
    path: Path,
    *,
    now: str,
    capture_mode: str,
    source_ref: str | None = None,
    allow_tombstones: bool = False,
    progress: Callable[[int, int], None] | None = None,
    workers: int | None = None,
) -> IngestReport:
    if source_ref is not None:
        source_ref = normalize_source_ref(source_ref)  # a bad override refuses the whole run
    total = prepare.count_lines(path)
    workers = prepare.default_workers() if workers is None else workers
    chunks = prepare.prepared(path, now, capture_mode, source_ref, workers, total)
    return ingest_chunks(
        conn, store_vectors, chunks, now=now, allow_tombstones=allow_tombstones,
        progress=progress, total=total,
    )  # fmt: skip


def ingest_chunks(
    conn: apsw.Connection,
    store_vectors: Any,
    chunks: Any,
    *,
    now: str,
    allow_tombstones: bool = False,
    hub: bool = False,
    progress: Callable[[int, int], None] | None = None,
    total: int = 0,
    links: Sequence[tuple[str, list[dict[str, Any]]]] = (),
) -> IngestReport:
    """The writer's side of an ingest over prepared chunks (sync.prepare): a file's, or a hub
    pull's page (`hub`: rows keep their identity, tombstones apply, closed episodes close;
    `links`: (src, links) that came apart from their rows, restored with theirs)."""
    report = IngestReport()
    job = _Ingest(conn, store_vectors, report, allow_tombstones, now, hub=hub)
    seen: dict[tuple[str, str], int] = {}
    outgoing: list[tuple[str, list[dict[str, Any]]]] = list(links)
    episodes: list[EpisodeRecord] = []
    members: list[MembershipRecord] = []
    batch: list[MemoryRecord] = []
    try:
        for chunk in chunks:
            for number, status, record in chunk:
                report.lines += 1
                if status != "ok":
                    if status == "refused":
                        report.capture_refused += 1
                    else:
                        report.malformed += 1
                    report.fail(number, record)
                    continue
                key = _identity(record)
                if key in seen:
                    report.malformed += 1
                    report.fail(number, f"repeats the {key[0]} of line {seen[key]}")
                    continue
                seen[key] = number
                if isinstance(record, EpisodeRecord):
                    episodes.append(record)
                elif isinstance(record, MembershipRecord):
                    members.append(record)
                else:
                    report.redacted += record.redacted
                    report.secret_warnings += record.secret_warning
                    report.injection_risk += record.injection
                    for reason in record.bad_links:
                        report.links_skipped += 1
                        report.fail(number, reason)
                    if record.links:
                        outgoing.append((record.fields["id"], record.links))
                    batch.append(record)
                    if len(batch) == BATCH:
                        job.feed(batch)
                        batch = []
            if progress and chunk:
                progress(min(chunk[-1][0], total), total)
        if batch:
            job.feed(batch)
        job.drain()
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()  # stops a file's workers now, not when the generator is collected
        job.close()
    job.links(outgoing)
    job.episodes(episodes, members)
    return report
