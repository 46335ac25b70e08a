"""organize: the sleep-time job. On the most recent live rows (the episode) it backfills entity
links and memory links, runs consolidate's own clustering, compresses the keepers that grew
past ZMEM_KEEPER_COMPRESS_CHARS, and writes topic summaries (one per entity with enough live
rows in a namespace, and an overview per namespace) keyed on `organize:` source refs. It shares
consolidate's cadence gate, clock and lock; each step commits in short transactions and a
rerun after a kill redoes only what is missing."""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import apsw

from zmem import config
from zmem.capture import judge, policy, writer
from zmem.config import Settings
from zmem.db import consolidation as db
from zmem.db import graph, memories
from zmem.db.connect import read_snapshot
from zmem.maintenance import bounded
from zmem.maintenance.clusters import Vectors
from zmem.maintenance.consolidate import (
    DEFAULT_THRESHOLD,
    Report,
    cadence_gate,
    consolidate_rows,
    merged_state,
    prune,
    record_run,
    replace_row,
    single_flight,
)
from zmem.models import INJECTION_TAG, Memory, worst_taint
from zmem.tokens import first_sentence, similarity_norm, split_sentences, words

TOPIC_MIN_MEMBERS = 3  # an entity with fewer rows in the working set is not a topic
TOPIC_SENTENCES = 6  # first sentences a topic summary quotes
OVERVIEW_MIN_TOPICS = 2
TOPIC_TAG = "organize-topic"
BACKFILL_PER_TXN = 32
SUMMARIES_PER_TXN = 16
_TOPIC_HEAD = re.compile(r"^Topic: (.+) \((\d+) memories in ")


@dataclass
class OrganizeReport:
    dry_run: bool
    forced: bool = False
    skipped: str | None = None
    episode_ids: list[str] = field(default_factory=list)
    entity_backfill: int = 0
    link_backfill: int = 0
    compressed: int = 0
    topics: int = 0
    summaries: int = 0
    live_before: int = 0
    live_after: int = 0
    consolidate: Report | None = None
    warnings: list[str] = field(default_factory=list)
    longest_txn_ms: float = 0.0

    @property
    def pruned(self) -> int:
        return len(self.consolidate.pruned) if self.consolidate else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "forced": self.forced,
            "skipped": self.skipped,
            "episode_ids": self.episode_ids,
            "entity_backfill": self.entity_backfill,
            "link_backfill": self.link_backfill,
            "compressed": self.compressed,
            "topics": self.topics,
            "summaries": self.summaries,
            "pruned": self.pruned,
            "live_before": self.live_before,
            "live_after": self.live_after,
            "consolidate": self.consolidate.to_dict() if self.consolidate else None,
            "warnings": self.warnings,
            "longest_txn_ms": round(self.longest_txn_ms, 1),
        }


def compress(text: str, cap: int) -> str:
    """Order-preserving unique sentences, dropping whole sentences from the tail only, until
    the text fits `cap` (the first sentence always stays)."""
    seen: set[str] = set()
    kept: list[str] = []
    size = 0
    for sentence in split_sentences(text):
        key = " ".join(words(sentence)) or sentence
        if key in seen:
            continue
        seen.add(key)
        add = len(sentence) + (1 if kept else 0)
        if kept and size + add > cap:
            break
        kept.append(sentence)
        size += add
    return " ".join(kept)


def _namespace_key(namespace: str) -> str:
    return hashlib.blake2b(namespace.encode("utf-8"), digest_size=4).hexdigest()


def topic_ref(namespace: str, entity_id: str) -> str:
    return f"{db.ORGANIZE_SOURCE_PREFIX}topic:{_namespace_key(namespace)}:{entity_id}"


def overview_ref(namespace: str) -> str:
    return f"{db.ORGANIZE_SOURCE_PREFIX}overview:{_namespace_key(namespace)}"


@dataclass(frozen=True)
class Summary:
    namespace: str
    source_ref: str
    content: str
    taint: str


def _topic_summaries(conn: apsw.Connection, ids: Sequence[str]) -> list[Summary]:
    """One summary per (namespace, entity) with at least TOPIC_MIN_MEMBERS rows in the working
    set (what the recent work was about; an entity every row mentions once in a while is not
    a topic of it): the first sentences of its most confident live rows in the namespace. Rows
    flagged as injection risks are counted but never quoted."""
    out = []
    for entity_id, kind, name, namespace, recent in db.touched_topics(conn, ids):
        if recent < TOPIC_MIN_MEMBERS:
            continue
        count, rows = db.topic_members(conn, entity_id, namespace, TOPIC_SENTENCES * 4)
        if count < TOPIC_MIN_MEMBERS:
            continue
        quoted = [m for m in rows if INJECTION_TAG not in m.tags][:TOPIC_SENTENCES]
        if not quoted:
            continue
        lines = [f"Topic: {name} ({count} memories in {namespace}, {kind})"]
        lines += [f"- {first_sentence(m.content)}" for m in quoted]
        out.append(
            Summary(
                namespace,
                topic_ref(namespace, entity_id),
                "\n".join(lines),
                worst_taint(*(m.taint for m in quoted)),
            )
        )
    return out


def _live_summaries(conn: apsw.Connection) -> dict[str, Memory]:
    """Every live summary row by source ref: one scan (source_ref has no index, and organize
    never changes the schema), instead of one per summary."""
    return {
        m.source_ref or "": m for m in db.live_with_source_prefix(conn, db.ORGANIZE_SOURCE_PREFIX)
    }


def _overviews(live: dict[str, Memory], namespaces: Sequence[str]) -> list[Summary]:
    """The level above the topics: per namespace, its live topic summaries by size."""
    out = []
    for namespace in sorted(set(namespaces)):
        prefix = f"{db.ORGANIZE_SOURCE_PREFIX}topic:{_namespace_key(namespace)}:"
        topics = []
        taints = []
        for ref, m in sorted(live.items()):
            head = _TOPIC_HEAD.match(m.content)
            if ref.startswith(prefix) and head and m.namespace == namespace:
                topics.append((-int(head.group(2)), head.group(1)))
                taints.append(m.taint)
        if len(topics) < OVERVIEW_MIN_TOPICS:
            continue
        listed = ", ".join(f"{name} ({-n})" for n, name in sorted(topics))
        out.append(
            Summary(
                namespace,
                overview_ref(namespace),
                f"Topics in {namespace}: {listed}",
                worst_taint(*taints),
            )
        )
    return out


def _prepared(summary: Summary) -> policy.Prepared:
    # Through the capture policy in auto mode, so redaction runs on the quoted text.
    return policy.prepare(
        summary.content,
        namespace=summary.namespace,
        type="fact",
        tags=[TOPIC_TAG],
        signal="none",
        taint=summary.taint,
        source_ref=summary.source_ref,
        confidence=None,
        capture_mode="auto",
    )


def _write_summary(
    conn: apsw.Connection,
    row: policy.Prepared,
    existing_id: str | None,
    vector: writer.Vector,
    at: str,
) -> None:
    """Insert one summary row, refreshing (append-only) the live one it replaces."""
    existing = memories.get(conn, existing_id) if existing_id else None
    if existing is not None and not existing.live:
        existing = None  # someone retired it by hand: the new one starts a fresh lineage
    new_id = str(uuid.uuid4())
    if existing is not None:
        memories.tombstone(conn, existing.id, at, f"organize: summary refreshed into {new_id}")
    update_of = existing.id if existing else None
    norm = similarity_norm(row.content)
    memories.insert(conn, writer.new_memory(row, new_id, norm, at, vector, update_of))
    if existing is not None:
        graph.insert_link(conn, new_id, existing.id, "updates", None, at)
    writer.link_entities(conn, new_id, row.content, row.tags, at)


def _changed(
    summaries: Sequence[Summary], live: dict[str, Memory]
) -> list[tuple[policy.Prepared, str | None]]:
    """The summaries whose text differs from their live row's (or that have none), prepared,
    with the id of the row each replaces."""
    out = []
    for s in summaries:
        row = _prepared(s)
        existing = live.get(row.source_ref or s.source_ref)
        if existing is None or existing.content != row.content:
            out.append((row, existing.id if existing else None))
    return out


class _Run:
    """One organize run's state: the connection, the settings, and the report it fills."""

    def __init__(
        self,
        conn: apsw.Connection,
        settings: Settings,
        vectors: Vectors,
        report: OrganizeReport,
    ):
        self.conn = conn
        self.settings = settings
        self.vectors = vectors
        self.report = report

    def commit(self, apply: Callable[[apsw.Connection], Any]) -> Any:
        out, held = bounded.commit(self.conn, apply)
        self.report.longest_txn_ms = max(self.report.longest_txn_ms, held * 1000)
        return out

    def backfill(self, rows: Sequence[db.Row]) -> None:
        """Steps 4 and 5: entity links, then memory links, for working rows that lack them."""
        ids = [r.memory.id for r in rows]
        with read_snapshot(self.conn):
            need_entities = db.without_entities(self.conn, ids)
            need_links = set(db.without_links(self.conn, ids))
        self.report.entity_backfill = len(need_entities)
        self.report.link_backfill = len(need_links)
        if self.report.dry_run:
            return
        by_id = {r.memory.id: r for r in rows}
        for start in range(0, len(need_entities), BACKFILL_PER_TXN):
            chunk = need_entities[start : start + BACKFILL_PER_TXN]

            def entities(conn: apsw.Connection, chunk=chunk) -> None:
                at = config.now_iso()
                for memory_id in chunk:
                    m = by_id[memory_id].memory
                    if not db.without_entities(conn, [memory_id]):
                        continue  # a concurrent write linked it meanwhile
                    writer.link_entities(conn, m.id, m.content, m.tags, at)

            self.commit(entities)
        semantic = self.vectors.semantic()
        link_rows = [by_id[i] for i in ids if i in need_links]
        for start in range(0, len(link_rows), BACKFILL_PER_TXN):
            chunk = link_rows[start : start + BACKFILL_PER_TXN]
            self.commit(lambda conn, chunk=chunk: self._link(conn, chunk, semantic))

    def _link(self, conn: apsw.Connection, chunk: Sequence[db.Row], semantic: Any) -> None:
        at = config.now_iso()
        threshold = min(self.settings.link_threshold, writer.DEDUP_THRESHOLD)
        for r in chunk:
            m = memories.get(conn, r.memory.id)
            if m is None or not m.live:
                continue
            vector = (r.embedding, m.embedding_model) if r.embedding and semantic else None
            neighbours, _ = writer.find_neighbours(
                conn, m.content, r.norm, m.namespace, threshold, (m.id,), vector, semantic,
                self.settings.link_threshold, judge.ASK_COSINE,
            )  # fmt: skip
            judged = writer.judge_neighbours(m.content, neighbours)
            writer.link_neighbours(conn, m.id, m.tags, judged, at, self.settings.link_threshold)
            # No agent is here to answer: what the judge cannot decide waits in the queue.
            writer.ask_about(conn, m.id, m.namespace, judged, at, "queue")

    def compress_grown(self, report: Report) -> list[str]:
        """Step 7: keepers consolidation grew past the cap, compressed as append-only updates.
        Returns the ids that replaced them."""
        cap = self.settings.keeper_compress_chars
        grown = [c for c in report.clusters if c.decision == "merge" and c.grows]
        if self.report.dry_run:
            self.report.compressed = sum(
                len(c.content) > cap and compress(c.content, cap) != c.content for c in grown
            )
            return []
        replaced = []
        for cluster in grown:
            if not cluster.applied or cluster.result_id is None:
                continue
            m = memories.get(self.conn, cluster.result_id)
            if m is None or not m.live or len(m.content) <= cap:
                continue
            text = compress(m.content, cap)
            if text == m.content:
                continue
            vector = self.vectors.embed(text)

            def apply(conn: apsw.Connection, m=m, text=text, vector=vector) -> str | None:
                fresh = memories.get(conn, m.id)
                if fresh is None or not fresh.live:
                    return None
                return replace_row(
                    conn, fresh, text, merged_state(fresh, []), self.vectors.for_write(vector),
                    config.now_iso(), "compressed",
                )  # fmt: skip

            new_id = self.commit(apply)
            if new_id is not None:
                cluster.result_id = new_id
                replaced.append(new_id)
                self.report.compressed += 1
        return replaced

    def summarize(self, ids: Sequence[str]) -> None:
        """Step 8: topic summaries, then the per-namespace overviews above them."""
        with read_snapshot(self.conn):
            topics = _topic_summaries(self.conn, ids)
            live = _live_summaries(self.conn)
        self.report.topics = len(topics)
        namespaces = [t.namespace for t in topics]
        if self.report.dry_run:
            self.report.summaries = len(_changed(topics, live))
            return
        self._write(_changed(topics, live))
        with read_snapshot(self.conn):
            live = _live_summaries(self.conn)
        self._write(_changed(_overviews(live, namespaces), live))

    def _write(self, todo: Sequence[tuple[policy.Prepared, str | None]]) -> None:
        for start in range(0, len(todo), SUMMARIES_PER_TXN):
            batch = todo[start : start + SUMMARIES_PER_TXN]
            planned = [self.vectors.embed(row.content) for row, _ in batch]

            def apply(conn: apsw.Connection, batch=batch, planned=planned) -> None:
                at = config.now_iso()
                for (row, existing), vector in zip(batch, planned, strict=True):
                    _write_summary(conn, row, existing, self.vectors.for_write(vector), at)

            self.commit(apply)
            self.report.summaries += len(batch)


def _idle_gate(conn: apsw.Connection, settings: Settings) -> str | None:
    hours = settings.organize_idle_hours
    if hours <= 0:
        return None
    last = db.last_activity(conn)
    if last is None:
        return None
    idle = (config.now() - config.parse_instant(last)).total_seconds() / 3600
    if idle < hours:
        return f"last activity {idle:.1f} h ago, under ZMEM_ORGANIZE_IDLE_HOURS={hours:g}"
    return None


def organize(
    conn: apsw.Connection,
    settings: Settings,
    vectors: Vectors,
    *,
    prune_rows: bool = False,
    dry_run: bool = False,
    force: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> OrganizeReport:
    """The organize command (and the SessionStart upkeep's job). StoreBusy when another
    consolidate or organize holds the shared lock."""
    report = OrganizeReport(dry_run=dry_run, forced=force)
    sub = Report(dry_run=dry_run, threshold=DEFAULT_THRESHOLD)
    with single_flight(settings):
        with read_snapshot(conn):
            report.live_before = db.live_count(conn)
            gate = None if force else cadence_gate(conn, settings)
            if gate is not None:
                report.skipped = f"cadence gate ({gate})"
            else:
                idle = _idle_gate(conn, settings)
                if idle is not None:
                    report.skipped = f"idle gate ({idle})"
            if report.skipped:
                report.live_after = report.live_before
                return report
            episode = db.episode_ids(conn, settings.organize_episode_bound)
            rows = db.rows_by_id(conn, episode)
        report.episode_ids = episode
        run = _Run(conn, settings, vectors, report)
        run.backfill(rows)
        # Step 6: consolidate's own machinery on exactly the working set; its vector
        # comparisons are among these rows only, never the whole index.
        with read_snapshot(conn):
            rows = [r for r in db.rows_by_id(conn, episode) if r.memory.live]
            sub.live_before = report.live_before
        sub.examined = len(rows)
        sub.namespaces = sorted({r.memory.namespace for r in rows})
        consolidate_rows(
            conn, settings, vectors, rows, sub, merge_contested=False, progress=progress
        )
        report.consolidate = sub
        report.warnings += sub.warnings
        run.compress_grown(sub)
        gone = {m.id for c in sub.clusters if c.applied for m in [c.members[0], *c.absorbing]}
        working = [i for i in episode if i not in gone]
        working += [c.result_id for c in sub.clusters if c.applied and c.result_id]
        run.summarize(working)
        if prune_rows:
            prune(conn, settings, sub, ids=working)
        if not dry_run:
            run.commit(lambda c: record_run(c, config.now_iso()))
        with read_snapshot(conn):
            report.live_after = db.live_count(conn)
        if dry_run:
            report.live_after = report.live_before - sub.absorbed - len(sub.pruned)
        sub.live_after = report.live_after
        report.longest_txn_ms = max(report.longest_txn_ms, sub.longest_txn_ms)
    return report


def summary_line(report: dict[str, Any]) -> str:
    if report.get("skipped"):
        return f"[zmem] organize: skipped by {report['skipped']}"
    would = "would " if report["dry_run"] else ""
    c = report["consolidate"] or {}
    return (
        f"organize: episode of {len(report['episode_ids'])} row(s); {would}backfill entities "
        f"{report['entity_backfill']}, links {report['link_backfill']}; {would}merge "
        f"{c.get('merged', 0)} cluster(s) ({c.get('absorbed', 0)} absorbed, "
        f"{c.get('parked', 0)} parked); {would}compress {report['compressed']}; "
        f"{report['topics']} topic(s), {would}write {report['summaries']} summary row(s); "
        f"{would}prune {report['pruned']}; live rows {report['live_before']} -> "
        f"{report['live_after']}"
    )
