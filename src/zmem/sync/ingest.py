"""ingest-jsonl: validate every line first (a bad one is reported by its number and never
lands), run each row through the capture policy, then restore rows in bounded transactions
with their vectors computed outside the write lock, the next batch's while this one commits.
Links, episodes and memberships follow once every row has landed. Deterministic state restore:
no trust deltas, no link generation, and the same file ingested twice changes nothing."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import apsw

from zmem.capture import policy, writer
from zmem.capture.source import normalize_source_ref
from zmem.capture.writer import DEDUP_THRESHOLD
from zmem.db import graph, vectors
from zmem.db import sync as sync_db
from zmem.errors import Refusal, UsageError
from zmem.maintenance import bounded
from zmem.models import REDACTED_TAG, worst_taint
from zmem.sync.records import (
    BadRecord,
    EpisodeRecord,
    MembershipRecord,
    MemoryRecord,
    memory_record,
    parse,
)
from zmem.tokens import similarity_norm

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


@dataclass
class _Parsed:
    rows: list[MemoryRecord] = field(default_factory=list)
    episodes: list[EpisodeRecord] = field(default_factory=list)
    members: list[MembershipRecord] = field(default_factory=list)


def read(
    path: Path, report: IngestReport, now: str, capture_mode: str, source_ref: str | None
) -> _Parsed:
    """Every line validated and put through the capture policy, before anything is written."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    parsed = _Parsed()
    seen: dict[tuple[str, str], int] = {}
    with handle:
        for number, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            report.lines += 1
            try:
                record = parse(json.loads(raw.decode("utf-8")), number, now)
                key = _identity(record)
                if key in seen:
                    raise BadRecord(f"repeats the {key[0]} of line {seen[key]}")
                if isinstance(record, MemoryRecord):
                    _apply_policy(record, capture_mode, source_ref, report)
            except UnicodeDecodeError:
                report.malformed += 1
                report.fail(number, "not UTF-8 text")
                continue
            except ValueError as exc:  # BadRecord, and JSONDecodeError
                report.malformed += 1
                report.fail(number, str(exc) if isinstance(exc, BadRecord) else f"not JSON: {exc}")
                continue
            except UsageError as exc:
                report.malformed += 1
                report.fail(number, str(exc))
                continue
            except Refusal as exc:
                report.capture_refused += 1
                report.fail(number, str(exc))
                continue
            seen[key] = number
            if isinstance(record, MemoryRecord):
                parsed.rows.append(record)
                for reason in record.bad_links:
                    report.links_skipped += 1
                    report.fail(number, reason)
            elif isinstance(record, EpisodeRecord):
                parsed.episodes.append(record)
            else:
                parsed.members.append(record)
    return parsed


def _identity(record: Any) -> tuple[str, str]:
    if isinstance(record, MemoryRecord):
        return ("memory id", record.fields["id"])
    if isinstance(record, EpisodeRecord):
        return ("episode id", record.episode.id)
    return ("membership", f"{record.episode_id}/{record.memory_id}")


def _apply_policy(
    record: MemoryRecord, capture_mode: str, source_ref: str | None, report: IngestReport
) -> None:
    """The add path's capture policy on a remote row: namespace guard, enums, content cap,
    redaction (auto), injection tagging. The row keeps its recorded file hash: the file it
    names may not exist on this machine."""
    f = record.fields
    row = policy.prepare(
        f["content"],
        namespace=f["namespace"],
        type=f["type"],
        tags=f["tags"],
        signal=f["signal"],
        taint=f["taint"],
        source_ref=source_ref if source_ref is not None else f["source_ref"],
        confidence=f["confidence"],
        capture_mode=capture_mode,
        hash_source=False,
    )
    kinds = {w["type"] for w in row.warnings}
    report.redacted += "redacted" in kinds or REDACTED_TAG in row.tags
    report.injection_risk += "injection_risk" in kinds
    f.update(
        content=row.content,
        tags=row.tags,
        source_ref=row.source_ref,
        confidence=row.confidence,
        taint=row.taint,
    )


class _Ingest:
    def __init__(
        self,
        conn: apsw.Connection,
        store_vectors: Any,
        report: IngestReport,
        allow_tombstones: bool,
        now: str,
    ):
        self.conn = conn
        self.vectors = store_vectors
        self.report = report
        self.allow_tombstones = allow_tombstones
        self.now = now
        self.inserted: set[str] = set()
        self.alias: dict[str, str] = {}  # a folded remote id -> the local row it folded into
        self.check_dups = vectors.live_count(conn) > 0
        self.semantic = store_vectors.semantic()
        self.present: set[str] = set()  # ids of the file this store held before the run

    def rows(self, rows: Sequence[MemoryRecord], progress: Callable[[int, int], None] | None):
        batches = [rows[i : i + BATCH] for i in range(0, len(rows), BATCH)]
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="zmem-ingest") as pool:
            pending = pool.submit(self._embed, batches[0]) if batches else None
            done = 0
            for i, batch in enumerate(batches):
                assert pending is not None
                vecs = pending.result()
                if i + 1 < len(batches):  # the model works on the next batch while this commits
                    pending = pool.submit(self._embed, batches[i + 1])
                bounded.commit(self.conn, lambda conn, b=batch, v=vecs: self._write(b, v))
                done += len(batch)
                if progress:
                    progress(done, len(rows))

    def _embed(self, batch: Sequence[MemoryRecord]) -> list[Any]:
        """Vectors for the live rows this store does not hold yet (a re-ingest embeds nothing)."""
        todo = [
            i for i, r in enumerate(batch)
            if r.fields["superseded_at"] is None and r.fields["id"] not in self.present
        ]  # fmt: skip
        out: list[Any] = [None] * len(batch)
        texts = [batch[i].fields["content"] for i in todo]
        for i, vec in zip(todo, self.vectors.embed_many(texts), strict=True):
            out[i] = vec
        return out

    def _write(self, batch: Sequence[MemoryRecord], vecs: Sequence[Any]) -> None:
        local = sync_db.existing(self.conn, [r.fields["id"] for r in batch])
        for record, vec in zip(batch, vecs, strict=True):
            f = record.fields
            mine = local.get(f["id"])
            if mine is not None:
                self._known(mine, f)
                continue
            live = f["superseded_at"] is None
            norm = similarity_norm(f["content"]) if live else ""
            vec = self.vectors.for_write(vec) if live else None
            saturated: frozenset[str] = frozenset()
            if live and self.check_dups:
                twin, saturated = self._twin(f, norm, vec)
                if twin is not None:
                    self._fold(twin, f)
                    continue
            sync_db.restore(self.conn, f, norm, vec, self.now, saturated)
            writer.link_entities(self.conn, f["id"], f["content"], f["tags"], self.now)
            self.inserted.add(f["id"])
            self.report.inserted += 1

    def _known(self, mine: Any, f: dict[str, Any]) -> None:
        if f["superseded_at"] is not None and mine.live:
            if not self.allow_tombstones:
                self.report.tombstones_refused += 1
            elif sync_db.restore_tombstone(
                self.conn, mine.id, f["superseded_at"], f["valid_until"], f["supersede_reason"]
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

    def _twin(self, f: dict[str, Any], norm: str, vec: Any) -> tuple[Any, frozenset[str]]:
        """A live row that was here before this run and says the same thing with the same
        polarity and numbers. Rows of this file never fold into each other: the store they came
        from kept them apart."""
        neighbours, saturated = writer.find_neighbours(
            self.conn, f["content"], norm, f["namespace"], DEDUP_THRESHOLD, (), vec,
            self.semantic,
        )  # fmt: skip
        for n in neighbours:
            if n.similarity < DEDUP_THRESHOLD or n.candidate.id in self.inserted:
                continue
            if n.same_polarity and n.same_numbers:
                return n.candidate, saturated
            # Contradictions never merge, on any surface: the remote row lands as its own.
        return None, saturated

    def _fold(self, twin: Any, f: dict[str, Any]) -> None:
        tags = policy.merge_tags(twin.tags, f["tags"])
        taint = worst_taint(twin.taint, f["taint"])
        if tags != tuple(twin.tags) or taint != twin.taint:
            sync_db.fold(self.conn, twin.id, tags, taint)
        self.alias[f["id"]] = twin.id
        self.report.deduped += 1

    # ---- after every row -----------------------------------------------------------------

    def links(self, rows: Sequence[MemoryRecord]) -> None:
        edges = [
            (self.alias.get(r.fields["id"], r.fields["id"]), self.alias.get(k["dst"], k["dst"]), k)
            for r in rows
            for k in r.links
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
) -> IngestReport:
    report = IngestReport()
    if source_ref is not None:
        source_ref = normalize_source_ref(source_ref)  # a bad override refuses the whole run
    parsed = read(path, report, now, capture_mode, source_ref)
    job = _Ingest(conn, store_vectors, report, allow_tombstones, now)
    # Read once, before any batch: the embedding thread must not query the store while the
    # main thread holds the write lock, and ids new at the start are the ones worth a vector.
    job.present = sync_db.present_ids(conn, [r.fields["id"] for r in parsed.rows])
    job.rows(parsed.rows, progress)
    job.links(parsed.rows)
    job.episodes(parsed.episodes, parsed.members)
    return report
