"""consolidate: merge near-duplicate live memories into a keeper, with history kept, and the
cadence gate and single-flight lock it shares with organize.

A plan is made first, from one read, outside any write transaction: clusters per namespace and
type, each row similar to its keeper (cosine or token Jaccard, whichever says more), rows with
other numbers left out, a member merged only where the write path's judge would fold it (what
it cannot decide stays live and its question is queued, as ingest queues its own), members that
disagree in polarity parked (left live) unless the NLI judge or the operator clears them. Each
cluster then commits in its own short transaction after re-reading its rows: a row another
session changed meanwhile leaves its cluster for the next run. A killed run leaves every
cluster merged or untouched, and a rerun plans from what is there. The planning itself is in
clusters.py."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import apsw

from zmem import config
from zmem.capture import judge, writer
from zmem.capture.policy import MAX_TAGS
from zmem.config import Settings
from zmem.db import consolidation as db
from zmem.db import graph, memories, reviews
from zmem.db.connect import read_snapshot
from zmem.errors import StoreBusy, UsageError
from zmem.maintenance import bounded
from zmem.maintenance.backup import maintenance_lock
from zmem.maintenance.clusters import Cluster, Vectors, plan_clusters
from zmem.maintenance.nli import Judge
from zmem.models import MAX_COUNT, Memory, clamp_trust, worst_taint
from zmem.tokens import similarity_norm

LOCK = "consolidate"  # one lock for consolidate and organize (and restore takes it too)
META_LAST = "last_consolidation"
META_LIVE = "last_consolidation_live"
DEFAULT_THRESHOLD = 0.80
# --prune: "low confidence" is below the default recall floor, where a row never surfaces in
# a default recall anyway; "old" is older than ZMEM_UNRECALLED_DAYS.
PRUNE_MAX_CONFIDENCE = 0.25
CLUSTERS_PER_TXN = 8
# Rounds a run plans at most; each after the first replans only what the one before merged.
MAX_ROUNDS = 5
PRUNE_PER_TXN = 256
REVIEWS_PER_TXN = 256  # rows whose questions one transaction queues


# ---- the cadence gate, shared with organize ---------------------------------------------------


def cadence_gate(conn: apsw.Connection, settings: Settings) -> str | None:
    """Why an automatic run is skipped now, or None to run. Skipped only when the last run is
    younger than the interval AND the live rows grew less than the threshold since."""
    last = graph.get_meta(conn, META_LAST)
    if last is None:
        return None
    try:
        age = config.now() - config.parse_instant(last)
    except UsageError:
        return None  # an unreadable clock never blocks maintenance
    try:
        then = int(graph.get_meta(conn, META_LIVE) or 0)
    except ValueError:
        then = 0
    live = db.live_count(conn)
    growth = (live - then) / max(then, 1)
    days = age / timedelta(days=1)
    if days < settings.consolidate_min_interval_days and growth < (
        settings.consolidate_growth_threshold
    ):
        return (
            f"last run {days:.1f} days ago, under {settings.consolidate_min_interval_days:g}; "
            f"live rows grew {growth:.0%}, under {settings.consolidate_growth_threshold:.0%}; "
            "--force runs it now"
        )
    return None


def record_run(conn: apsw.Connection, at: str) -> None:
    graph.set_meta(conn, META_LAST, at)
    graph.set_meta(conn, META_LIVE, str(db.live_count(conn)))


class LockHeld(StoreBusy):
    """Another consolidate or organize is running: the loser skips cleanly (exit 0)."""


@contextlib.contextmanager
def single_flight(settings: Settings) -> Iterator[None]:
    """The one maintenance lock of consolidate and organize."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(maintenance_lock(settings.data_dir, LOCK))
        except StoreBusy as exc:
            raise LockHeld(str(exc)) from None
        yield


# ---- applying ---------------------------------------------------------------------------------


def _merged_tags(rows: Iterable[Memory]) -> tuple[str, ...]:
    seen: dict[str, str] = {}
    for m in rows:
        for t in m.tags:
            seen.setdefault(t.lower(), t)
    return tuple(seen.values())[:MAX_TAGS]


def _latest(*values: str | None) -> str | None:
    present = [v for v in values if v]
    return max(present) if present else None


def merged_state(keeper: Memory, absorbed: Sequence[tuple[Memory, str]]) -> dict[str, Any]:
    """Metadata of the merged row. Taint is the worst of the members (a merge never downgrades
    a riskier member), trust the lowest, confidence the highest with its signal; usage counters
    add up; provenance is a de-duplicated first-seen list, :truncated marking a dropped text.
    Freshness (refreshed_at, what recency scores) is the newest member's, not the merge's: a
    merge is not new evidence, and a fresh stamp lifted merged rows above better matches."""
    rows = [keeper, *(m for m, _ in absorbed)]
    best = max(rows, key=lambda m: (m.confidence, m is keeper))
    merged_from: dict[str, None] = dict.fromkeys(keeper.merged_from)
    for m, action in absorbed:
        merged_from.update(dict.fromkeys(m.merged_from))
        merged_from[m.id + (":truncated" if action == "truncated" else "")] = None
    return {
        "tags": _merged_tags(rows),
        "taint": worst_taint(*(m.taint for m in rows)),
        "confidence": best.confidence,
        "signal": best.signal,
        "trust_score": clamp_trust(min(m.trust_score for m in rows)),
        "merged_from": list(merged_from),
        "refreshed_at": max(m.refreshed_at or m.valid_from for m in rows),
        "counters": {
            "retrieval_count": min(MAX_COUNT, sum(m.retrieval_count for m in rows)),
            "last_retrieved": _latest(*(m.last_retrieved for m in rows)),
            "surfaced_count": min(MAX_COUNT, sum(m.surfaced_count for m in rows)),
            "last_surfaced": _latest(*(m.last_surfaced for m in rows)),
            "applied_count": min(MAX_COUNT, sum(m.applied_count for m in rows)),
            "violated_count": min(MAX_COUNT, sum(m.violated_count for m in rows)),
        },
    }


def replace_row(
    conn: apsw.Connection,
    old: Memory,
    content: str,
    state: dict[str, Any],
    vector: writer.Vector,
    at: str,
    reason: str,
    carry_from: Sequence[str] = (),
) -> str:
    """An append-only revision of `old` with new text and merged state: the new row links
    `updates` to the old, takes the links of the old row (and of `carry_from`), and the old row
    is tombstoned. Content never changes in place, so --as-of reads stay true."""
    new_id = str(uuid.uuid4())
    memories.insert(
        conn,
        memories.NewMemory(
            id=new_id,
            content=content,
            content_norm=similarity_norm(content),
            type=old.type,
            tags=state["tags"],
            namespace=old.namespace,
            signal=state["signal"],
            confidence=state["confidence"],
            taint=state["taint"],
            source_ref=old.source_ref,
            source_hash=old.source_hash,
            created_at=at,
            update_of=old.id,
            embedding=vector[0] if vector else None,
            embedding_model=vector[1] if vector else None,
        ),
    )
    db.write_merge_state(conn, new_id, **state)
    if not memories.tombstone(conn, old.id, at, f"{reason} into {new_id}"):
        raise StoreBusy(f"{old.id} was tombstoned by another session")
    graph.insert_link(conn, new_id, old.id, "updates", None, at)
    db.carry_links(conn, [old.id, *carry_from], new_id)
    writer.link_entities(conn, new_id, content, state["tags"], at)
    return new_id


def apply_cluster(
    conn: apsw.Connection, cluster: Cluster, vector: writer.Vector, at: str
) -> str | None:
    """Commit one planned cluster inside the caller's transaction: None (nothing written) when
    a member is no longer live, else the id of the merged row."""
    taken = [cluster.members[0], *cluster.absorbing]
    ids = [m.id for m in taken]
    rows = memories.get_many(conn, ids)
    if len(rows) != len(ids) or not all(m.live for m in rows):
        return None
    keeper, rest = rows[0], rows[1:]
    absorbed = [(m, member.action) for m, member in zip(rest, taken[1:], strict=True)]
    state = merged_state(keeper, absorbed)
    if cluster.grows:
        target = replace_row(
            conn, keeper, cluster.content, state, vector, at, "consolidated",
            carry_from=[m.id for m, _ in absorbed],
        )  # fmt: skip
    else:
        target = keeper.id
        db.write_merge_state(conn, target, **state)
        db.carry_links(conn, [m.id for m, _ in absorbed], target)
        if state["tags"] != keeper.tags:
            graph.unlink_memory_entities(conn, target)
            writer.link_entities(conn, target, keeper.content, state["tags"], at)
    for m, _ in absorbed:
        memories.tombstone(conn, m.id, at, f"consolidated into {target}")
    return target


# ---- the job ------------------------------------------------------------------------------------


@dataclass
class Report:
    dry_run: bool
    threshold: float
    skipped: str | None = None
    forced: bool = False
    namespaces: list[str] = field(default_factory=list)
    examined: int = 0
    beyond_cap: int = 0
    clusters: list[Cluster] = field(default_factory=list)
    merged: int = 0
    absorbed: int = 0
    parked: int = 0
    changed_meanwhile: int = 0
    pruned: list[str] = field(default_factory=list)
    live_before: int = 0
    live_after: int = 0
    nli_calls: int = 0
    # Questions queued for the pairs the write path's judge could not decide (a dry run: would
    # queue); a pair already asked is never queued again.
    reviews_queued: int = 0
    warnings: list[str] = field(default_factory=list)
    longest_txn_ms: float = 0.0
    # Rounds until a plan merges nothing more (a merged keeper's new text and vector can bring
    # a row the first plan left out within the threshold): one run leaves nothing for the next.
    rounds: int = 0
    fixed_point: bool = True
    parked_ids: set[str] = field(default_factory=set)
    absorbed_ids: set[str] = field(default_factory=set)
    seen_clusters: set[tuple[str, ...]] = field(default_factory=set)
    changed: set[tuple[str, str]] = field(default_factory=set)  # (namespace, type) merged into

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "skipped": self.skipped,
            "forced": self.forced,
            "threshold": self.threshold,
            "namespaces": self.namespaces,
            "examined": self.examined,
            "beyond_cap": self.beyond_cap,
            "clusters": [c.to_dict() for c in self.clusters],
            "merged": self.merged,
            "absorbed": self.absorbed,
            "parked": self.parked,
            "changed_meanwhile": self.changed_meanwhile,
            "pruned": len(self.pruned),
            "pruned_ids": self.pruned,
            "live_before": self.live_before,
            "live_after": self.live_after,
            "nli_calls": self.nli_calls,
            "reviews_queued": self.reviews_queued,
            "warnings": self.warnings,
            "longest_txn_ms": round(self.longest_txn_ms, 1),
            "rounds": self.rounds,
            "fixed_point": self.fixed_point,
        }


def _signature(cluster: Cluster) -> tuple[str, ...]:
    return (cluster.decision, *(f"{m.id}:{m.action}" for m in cluster.members))


def consolidate_rows(
    conn: apsw.Connection,
    settings: Settings,
    vectors: Vectors,
    rows: Sequence[db.Row],
    report: Report,
    *,
    merge_contested: bool,
    progress: Callable[[int, int], None] | None = None,
) -> None:
    """Plan and (unless a dry run) apply the clusters of `rows`: the step consolidate runs per
    namespace and organize runs on its working set."""
    ids = [r.memory.id for r in rows]
    with read_snapshot(conn):
        contradicting = db.contradicting_pairs(conn, ids)
        asked = reviews.among(conn, ids)
    nli = Judge.from_setting(settings.nli_cmd)
    clusters = plan_clusters(
        rows, settings, vectors, report.threshold, contradicting, nli, merge_contested, asked
    )
    if nli is not None:
        report.nli_calls += nli.calls
        report.warnings += nli.diagnostics
    # A later round plans the same contested clusters again: each is reported, and each parked
    # row counted, once.
    fresh = [c for c in clusters if _signature(c) not in report.seen_clusters]
    if report.rounds > 1:  # a later round reports what it merges, not what it parks again
        fresh = [c for c in fresh if c.decision == "merge" and c.absorbing]
    report.seen_clusters.update(_signature(c) for c in fresh)
    report.clusters += fresh
    if report.rounds <= 1:  # later rounds replan merged keepers: their parking is not news
        report.parked_ids.update(m.id for c in clusters for m in c.members if m.action == "parked")
    report.parked = len(report.parked_ids - report.absorbed_ids)
    todo = [c for c in clusters if c.decision == "merge"]
    if report.dry_run:
        report.merged += len(todo)
        report.absorbed += sum(len(c.absorbing) for c in todo)
        queue_reviews(conn, clusters, report)
        return
    for start in range(0, len(todo), CLUSTERS_PER_TXN):
        batch = todo[start : start + CLUSTERS_PER_TXN]
        # The model runs before the transaction: a write lock is never held across it. One
        # call per text: merged texts run to the model's 256 tokens, where a batch of them was
        # ~20 % slower per text than single calls on this class of machine (docs/decisions.md).
        planned = [vectors.embed(c.content) if c.grows else None for c in batch]

        def apply(conn: apsw.Connection, batch=batch, planned=planned) -> None:
            at = config.now_iso()
            for cluster, vector in zip(batch, planned, strict=True):
                target = apply_cluster(conn, cluster, vectors.for_write(vector), at)
                if target is None:
                    report.changed_meanwhile += 1
                    continue
                cluster.result_id, cluster.applied = target, True
                report.merged += 1
                report.absorbed += len(cluster.absorbing)
                report.changed.add((cluster.namespace, cluster.type))
                report.absorbed_ids.update(m.id for m in cluster.absorbing)

        _, held = bounded.commit(conn, apply)
        report.longest_txn_ms = max(report.longest_txn_ms, held * 1000)
        if progress is not None:
            progress(min(start + len(batch), len(todo)), len(todo))
    queue_reviews(conn, clusters, report)


def queue_reviews(conn: apsw.Connection, clusters: Sequence[Cluster], report: Report) -> None:
    """Queue the questions of the pairs the judge could not decide (origin "queue": no agent is
    here to ask), after the merges: a pair one of whose rows a merge retired is left to the
    next round, which asks about the merged row. The write path's rule holds: a pair already
    asked or answered is skipped, at most REVIEWS_PER_WRITE per row. A dry run only counts."""
    by_row: dict[str, tuple[db.Row, list[tuple[writer.Neighbour, judge.Verdict]]]] = {}
    for cluster in clusters:
        for ask in cluster.asks:
            by_row.setdefault(ask.new.memory.id, (ask.new, []))[1].append((ask.old, ask.verdict))
    if not by_row:
        return
    if report.dry_run:
        with read_snapshot(conn):
            report.reviews_queued += sum(
                len(writer.to_ask(conn, row_id, judged)) for row_id, (_, judged) in by_row.items()
            )
        return
    items = list(by_row.items())
    for start in range(0, len(items), REVIEWS_PER_TXN):

        def apply(conn: apsw.Connection, chunk=items[start : start + REVIEWS_PER_TXN]) -> None:
            at = config.now_iso()
            for row_id, (row, judged) in chunk:
                ids = [row_id, *(n.candidate.id for n, _ in judged)]
                live = {m.id for m in memories.get_many(conn, ids) if m.live}
                judged = [(n, v) for n, v in judged if n.candidate.id in live]
                if row_id in live and judged:
                    ns = row.memory.namespace
                    asked = writer.ask_about(conn, row_id, ns, judged, at, "queue")
                    report.reviews_queued += len(asked)

        _, held = bounded.commit(conn, apply)
        report.longest_txn_ms = max(report.longest_txn_ms, held * 1000)


def prune(
    conn: apsw.Connection,
    settings: Settings,
    report: Report,
    *,
    namespaces: Sequence[str] | None = None,
    ids: Sequence[str] | None = None,
) -> None:
    """--prune: tombstone live rows with no evidence of use (db.prune_candidates)."""
    now = config.now()
    cutoff = config.format_instant(now - timedelta(days=settings.unrecalled_days))
    with read_snapshot(conn):
        found = db.prune_candidates(
            conn,
            namespaces=namespaces,
            ids=ids,
            max_confidence=PRUNE_MAX_CONFIDENCE,
            older_than=cutoff,
            stale_surface_before=cutoff,
        )
    if report.dry_run:
        report.pruned += found
        return
    for start in range(0, len(found), PRUNE_PER_TXN):
        chunk = found[start : start + PRUNE_PER_TXN]

        def apply(conn: apsw.Connection, chunk=chunk) -> None:
            at = config.now_iso()
            for memory_id in chunk:
                if memories.tombstone(conn, memory_id, at, "pruned: never used"):
                    report.pruned.append(memory_id)

        _, held = bounded.commit(conn, apply)
        report.longest_txn_ms = max(report.longest_txn_ms, held * 1000)


def consolidate(
    conn: apsw.Connection,
    settings: Settings,
    vectors: Vectors,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    prune_rows: bool = False,
    dry_run: bool = False,
    namespace: str | None = None,
    force: bool = False,
    merge_contested: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> Report:
    """The consolidate command. StoreBusy when another consolidate or organize holds the lock."""
    report = Report(dry_run=dry_run, threshold=threshold, forced=force)
    with single_flight(settings):
        with read_snapshot(conn):
            report.live_before = db.live_count(conn)
            gate = None if force else cadence_gate(conn, settings)
            if gate is not None:
                report.skipped = f"cadence gate ({gate})"
                report.live_after = report.live_before
                return report
            names = [namespace] if namespace else db.live_namespaces(conn)
            report.namespaces = names
            groups = []
            for ns in names:
                rows, total = db.newest_live(conn, ns, config.CONSOLIDATE_NAMESPACE_CAP)
                groups.append(rows)
                report.examined += len(rows)
                report.beyond_cap += max(0, total - config.CONSOLIDATE_NAMESPACE_CAP)
        while groups:
            report.rounds += 1
            report.changed = set()
            for rows in groups:
                consolidate_rows(
                    conn, settings, vectors, rows, report,
                    merge_contested=merge_contested, progress=progress,
                )  # fmt: skip
            if dry_run or not report.changed:
                break  # a dry run plans one round: it applies nothing a next one could see
            if report.rounds == MAX_ROUNDS:
                report.fixed_point = False
                report.warnings.append(
                    f"still merging after {MAX_ROUNDS} rounds (in "
                    f"{', '.join(sorted({ns for ns, _ in report.changed}))}): run consolidate "
                    "again"
                )
                break
            # The next round plans only the namespace and type groups this one merged into.
            groups = []
            with read_snapshot(conn):
                for ns in sorted({ns for ns, _ in report.changed}):
                    rows, _ = db.newest_live(conn, ns, config.CONSOLIDATE_NAMESPACE_CAP)
                    keep = [r for r in rows if (ns, r.memory.type) in report.changed]
                    if keep:
                        groups.append(keep)
        if prune_rows:
            prune(conn, settings, report, namespaces=[namespace] if namespace else None)
        if not dry_run:
            bounded.commit(conn, lambda c: record_run(c, config.now_iso()), pause=False)
        with read_snapshot(conn):
            report.live_after = db.live_count(conn)
        if dry_run:
            report.live_after = report.live_before - report.absorbed - len(report.pruned)
    return report


def summary_line(report: dict[str, Any], what: str = "consolidate") -> str:
    if report.get("skipped"):
        return f"[zmem] {what}: skipped by {report['skipped']}"
    verb = "would merge" if report["dry_run"] else "merged"
    line = (
        f"{what}: {verb} {report['merged']} cluster(s), {report['absorbed']} row(s) absorbed; "
        f"{report['parked']} contested row(s) parked"
    )
    if report.get("reviews_queued"):
        verb = "would queue" if report["dry_run"] else "queued"
        line += f"; {verb} {report['reviews_queued']} review(s) (zmem review)"
    if report["pruned"]:
        line += f"; {'would prune' if report['dry_run'] else 'pruned'} {report['pruned']}"
    line += f"; live rows {report['live_before']} -> {report['live_after']}"
    return line


def cluster_lines(report: dict[str, Any]) -> list[str]:
    """--dry-run's per-row detail: every cluster, its decision, and what happens to each row."""
    out = []
    for c in report["clusters"]:
        head = f"{c['decision']}: {c['namespace']} {c['type']} keeper {c['keeper']}"
        if c["reason"]:
            head += f" ({c['reason']})"
        if c["would_lose_tokens"]:
            head += f"; would lose {c['would_lose_tokens']} tokens past the size cap"
        out.append(head)
        for m in c["members"][1:]:
            out.append(f"  {m['action']:<9} {m['id']} similarity {m['similarity']:.2f}")
    return out
