"""MemoryStore: the one front door to a store file. Every front end (CLI, hooks, MCP, Hermes)
calls these methods; they validate, open the write transaction, and delegate the write path to
capture and all SQL to db. The store owns its connection, its embedding state (StoreVectors)
and its read path (Reader); it never prints: what a person should hear comes back as warnings."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import apsw

from zmem import config
from zmem.capture import policy, writer
from zmem.capture.source import source_state
from zmem.config import Settings
from zmem.db import graph, memories, origin
from zmem.db.connect import connect, read_snapshot, transaction
from zmem.db.migrate import SCHEMA_VERSION, migrate
from zmem.errors import NotFound, Refusal, StoreUnavailable, UsageError
from zmem.models import (
    FEEDBACK_VERDICTS,
    INJECTION_TAG,
    LINK_RELATIONS,
    MAX_LIMIT,
    SYMMETRIC_RELATIONS,
    SYSTEM_TAGS,
    TRUST_CORROBORATION_DELTA,
    TRUST_VIOLATION_FLOOR_DROP,
    Entity,
    Hit,
    Link,
    Memory,
    MergePlan,
    Origin,
    TombstoneResult,
    WriteResult,
    worst_taint,
)
from zmem.retrieval.explain import Verdict
from zmem.retrieval.request import RecallReport, RecallRequest
from zmem.retrieval.scoring import row_injection_risk
from zmem.store import failures, files
from zmem.store.bulk import BulkJobs
from zmem.store.episodes import Episodes
from zmem.store.handoff import Handoff
from zmem.store.learning import Learning
from zmem.store.overview import Overview
from zmem.store.reads import Reader
from zmem.store.reviews import Reviews
from zmem.store.team import Team
from zmem.store.vectors import StoreVectors
from zmem.store.warm import Warm

MIN_ID_PREFIX = 4
AMBIGUITY_SHOWN = 5  # candidates an ambiguous id prefix lists


def _require_reason(reason: str | None, what: str) -> str:
    if reason is None or not reason.strip():
        raise UsageError(f"{what} requires a non-empty --reason")
    return reason.strip()


class MemoryStore(BulkJobs, Episodes, Handoff, Learning, Overview, Reviews, Team, Warm):
    """A connection to one store file, migrated to the current schema on open."""

    def __init__(self, conn: apsw.Connection, settings: Settings, schema_version: int):
        self._conn = conn
        self.settings = settings
        self.path = settings.store_path
        self.schema_version = schema_version
        self.vectors = StoreVectors(conn, settings)
        self.reader = Reader(conn, settings, self.vectors)
        # What opening said that a person should hear (a newer schema); front ends print it.
        self.warnings: list[str] = []

    # ---- lifecycle -------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | Path | None = None,
        *,
        settings: Settings | None = None,
        check_vectors: bool = True,
        create: bool = True,
    ) -> MemoryStore:
        """Open (migrating as needed) the store at `path`, else ZMEM_STORE, else
        <ZMEM_DATA>/store.sqlite; create=False (every read) refuses to create a missing one. A
        profile whose dimension differs from the store's committed vectors is refused
        (check_vectors=False is for reembed, which converts them). A file that exists but is
        not a store (empty, another format, damaged) is refused, never replaced."""
        if settings is None:
            settings = config.load_settings(store_path=path)
        elif path is not None:
            settings = dataclasses.replace(settings, store_path=Path(path).expanduser())
        if not files.check(settings.store_path, create):
            files.create(settings.store_path)
        try:
            conn = connect(settings.store_path)
        except apsw.Error as exc:
            raise failures.explain(exc, settings.store_path) from exc
        except OSError as exc:
            raise StoreUnavailable(f"cannot open store {settings.store_path}: {exc}") from exc
        try:
            notices: list[str] = []
            version = migrate(
                conn,
                settings.allow_newer_schema,
                lambda v: notices.extend(_notice_newer_schema(settings, v)),
            )
            store = cls(conn, settings, version)
            store.warnings += notices
            store._run_pending_backfills()
            store._apply_migration_map()
            store.vectors.prepare(check_vectors)
        except apsw.Error as exc:
            conn.close()
            raise failures.explain(exc, settings.store_path) from exc
        except BaseException:
            conn.close()
            raise
        return store

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run_pending_backfills(self) -> None:
        # Rows written before v10 have no entity links; derive them once, on the first open.
        if graph.get_meta(self._conn, "backfill:entities") is None:
            return
        with transaction(self._conn):
            if graph.get_meta(self._conn, "backfill:entities") is None:
                return
            at = config.now_iso()
            for m in memories.list_memories(self._conn):
                if not graph.entities_of(self._conn, m.id):
                    writer.link_entities(self._conn, m.id, m.content, m.tags, at)
            graph.delete_meta(self._conn, "backfill:entities")

    def _apply_migration_map(self) -> None:
        """ZMEM_NS_MIGRATION_MAP, wherever a store is opened (the CLI, MCP, Hermes, the
        inspector, the hooks): each legacy key reads as the namespace its checkout derives to,
        recorded once (a read of the aliases first: this runs on every open)."""
        if not self.settings.ns_migration_map:
            return
        from zmem.capture import project_namespace

        for old, namespace in project_namespace.migration_map(self.settings.ns_migration_map):
            if old not in self.namespace_set(namespace):
                self.alias_namespace(old, namespace)

    # ---- writes ----------------------------------------------------------------------------

    def add(
        self,
        content: str,
        *,
        namespace: str,
        type: str,
        tags: str | Iterable[str] | None = None,
        signal: str = "none",
        taint: str | None = None,
        source_ref: str | None = None,
        confidence: float | None = None,
        capture_mode: str | None = None,
    ) -> WriteResult:
        row = policy.prepare(
            content,
            namespace=namespace,
            type=type,
            tags=tags,
            signal=signal,
            taint=taint,
            source_ref=source_ref,
            confidence=confidence,
            capture_mode=capture_mode or self.settings.capture_mode,
        )
        vector = self.vectors.embed(row.content)
        with transaction(self._conn):
            vector = self.vectors.for_write(vector)
            result = writer.write(
                self._conn,
                row,
                at=config.now_iso(),
                link_threshold=self.settings.link_threshold,
                vector=vector,
                semantic=self.vectors.semantic(),
            )
            return self._floor_warning(result, row.confidence)

    def _floor_warning(self, result: WriteResult, confidence: float) -> WriteResult:
        """Say so when the row written (or refreshed) will not surface in default recall: an
        ungrounded add is otherwise silently invisible. A refreshed twin keeps the higher of
        the two confidences, so only a row under the floor is read back (not every add)."""
        floor = self.settings.inject_floor_prompt
        if confidence >= floor:
            return result
        stored = memories.get(self._conn, result.id)
        if stored is None or stored.confidence >= floor:
            return result
        warning = {
            "type": "below_recall_floor",
            "confidence": stored.confidence,
            "floor": floor,
            "signal": stored.signal,
        }
        return dataclasses.replace(result, warnings=(*result.warnings, warning))

    def update(
        self,
        memory_id: str,
        content: str,
        *,
        namespace: str | None = None,
        type: str | None = None,
        tags: str | Iterable[str] | None = None,
        source_ref: str | None = None,
        confidence: float | None = None,
        signal: str | None = None,
        taint: str | None = None,
        capture_mode: str | None = None,
    ) -> WriteResult:
        """Append-only revision: a new live row linked by update_of; the target is tombstoned
        (reason 'updated'), never mutated. Unknown or tombstoned targets are refused."""

        def revision(target: Memory) -> policy.Prepared:
            new_signal = signal or target.signal
            keep = target.confidence if confidence is None and signal is None else confidence
            row = policy.prepare(
                content,
                namespace=target.namespace if namespace is None else namespace,
                type=target.type if type is None else type,
                # System tags are re-derived from the new text, never inherited.
                tags=[t for t in target.tags if t not in SYSTEM_TAGS] if tags is None else tags,
                signal=new_signal,
                taint=target.taint if taint is None else taint,
                source_ref=target.source_ref if source_ref is None else source_ref,
                confidence=keep,
                capture_mode=capture_mode or self.settings.capture_mode,
            )
            # Validated by prepare first; an update never downgrades the row's taint.
            return dataclasses.replace(row, taint=worst_taint(target.taint, row.taint))

        full = self._lookup_id(memory_id)
        target = memories.get(self._conn, full) if full else None
        if target is None:
            raise Refusal(f"cannot update {memory_id}: no such memory")
        if not target.live:
            raise Refusal(f"cannot update {memory_id}: it was superseded at {target.superseded_at}")
        # Validates (nothing written on bad input) and gives the text to embed, outside the lock.
        vector = self.vectors.embed(revision(target).content)
        with transaction(self._conn):
            at = config.now_iso()
            # Re-read under the write lock: another session may have tombstoned the target, or
            # refreshed it (a dedup re-add can worsen its taint), since the first read.
            target = memories.get(self._conn, target.id)
            if target is None or not memories.tombstone(self._conn, target.id, at, "updated"):
                raise Refusal(f"cannot update {memory_id}: it was superseded concurrently")
            row = revision(target)
            vector = self.vectors.for_write(vector)
            return writer.write(
                self._conn,
                row,
                at=at,
                link_threshold=self.settings.link_threshold,
                vector=vector,
                semantic=self.vectors.semantic(),
                update_of=target.id,
                exclude=(target.id,),
            )

    def feedback(self, memory_id: str, verdict: str) -> dict[str, Any]:
        """Explicit usage feedback, the promote ladder's only input: one more `applied` or
        `violated` on a live row (the second violation also costs trust, once). Nothing else
        in ZMem advances these counters, so nothing passive can promote a lesson."""
        if verdict not in FEEDBACK_VERDICTS:
            raise UsageError(f"verdict {verdict!r} is not one of: {', '.join(FEEDBACK_VERDICTS)}")
        full = self._lookup_id(memory_id)
        with transaction(self._conn):
            done = full and memories.record_feedback(
                self._conn, full, verdict, TRUST_VIOLATION_FLOOR_DROP
            )
        if not done:
            # Exit 1 for both, as the spec says: there is no live row to give feedback on.
            why = "it is tombstoned" if full else "no such memory"
            raise NotFound(f"cannot record feedback on {memory_id}: {why}")
        applied, violated, trust, dropped = done
        return {
            "id": full,
            "verdict": verdict,
            "applied_count": applied,
            "violated_count": violated,
            "trust_score": trust,
            "trust_dropped": dropped,
        }

    def invalidate(self, memory_id: str, reason: str | None) -> TombstoneResult:
        """Record that a fact is no longer true. The reason is required so it is auditable."""
        return self._tombstone(memory_id, _require_reason(reason, "invalidate"))

    def supersede(self, memory_id: str, reason: str | None = None) -> TombstoneResult:
        text = reason.strip() if reason and reason.strip() else "superseded"
        return self._tombstone(memory_id, text)

    def _tombstone(self, memory_id: str, reason: str) -> TombstoneResult:
        memory_id = self.resolve_id(memory_id)
        with transaction(self._conn):
            at = config.now_iso()
            if memories.tombstone(self._conn, memory_id, at, reason):
                return TombstoneResult(memory_id, at, reason)
            existing = memories.get(self._conn, memory_id)
        if existing is None:
            raise NotFound(f"no memory with id {memory_id}")
        # Write-once: moving valid_until forward would falsify point-in-time history.
        raise Refusal(f"memory {memory_id} is already tombstoned (at {existing.superseded_at})")

    # ---- reads by relevance (the Reader; options: RecallRequest's fields) --------------------

    def read(self, req: RecallRequest) -> RecallReport:
        """One recall, search or recent read, its telemetry written as the request says."""
        return self.reader.read(req)

    def explain(
        self, req: RecallRequest, *, target: str | None = None
    ) -> tuple[RecallReport, list[Verdict], dict[str, Any]]:
        """recall --explain: the same pipeline, zero writes, one verdict per row."""
        return self.reader.explain(req, target)

    def recall(self, query: str, **options: Any) -> list[Hit]:
        """Rows relevant to the query, best first."""
        return self.reader.read(RecallRequest(query=query, **options)).hits

    def recall_report(self, query: str, **options: Any) -> RecallReport:
        """The full recall: hits plus what the read envelope reports (omitted rows, tokens)."""
        return self.reader.read(RecallRequest(query=query, **options))

    def search(self, text: str, **options: Any) -> RecallReport:
        """The recall ranking without link expansion, lineage unfold or a confidence floor."""
        return self.reader.read(RecallRequest(query=text, kind="search", **options))

    def recent(self, **options: Any) -> RecallReport:
        """Newest rows at or above the recent floor (ZMEM_INJECT_FLOOR_RECENT, 0.5)."""
        return self.reader.read(RecallRequest(kind="recent", **options))

    def surface(self, ids: list[str]) -> bool:
        """Record a passive surface event for rows a hook actually showed (False: store busy)."""
        return self.reader.surface(ids)

    # ---- reads -----------------------------------------------------------------------------

    def resolve_id(self, id_or_prefix: str) -> str:
        """A full id, or an unambiguous prefix of one (recall prints 8 characters): every
        command that takes an id takes either. An ambiguous prefix is refused with its
        candidates; an unknown one is NotFound."""
        found = self._lookup_id(id_or_prefix)
        if found is None:
            raise NotFound(f"no memory with id {id_or_prefix}")
        return found

    def _lookup_id(self, id_or_prefix: str) -> str | None:
        key = id_or_prefix.strip().lower()
        if memories.get(self._conn, key) is not None:
            return key
        if len(key) < MIN_ID_PREFIX:
            return None
        found = memories.ids_with_prefix(self._conn, key, limit=AMBIGUITY_SHOWN + 1)
        if len(found) > 1:
            shown = ", ".join(found[:AMBIGUITY_SHOWN]) + (
                ", ..." if len(found) > AMBIGUITY_SHOWN else ""
            )
            raise UsageError(f"id prefix {key!r} is ambiguous ({shown}); give more characters")
        return found[0] if found else None

    def get(self, memory_id: str) -> Memory:
        found = memories.get(self._conn, self.resolve_id(memory_id))
        assert found is not None
        return found

    def describe(self, memory_id: str) -> dict[str, Any]:
        """Everything `get` shows: the row, its links, entities, episodes and derived flags,
        and `warnings` for the front end to print (a source file that cannot be opened)."""
        with read_snapshot(self._conn):
            m = self.get(memory_id)
            links = graph.links_of(self._conn, m.id)
            entities = graph.entities_of(self._conn, m.id)
            episodes = graph.episodes_of(self._conn, m.id)
            successor = None if m.live else memories.successor_of(self._conn, m.id)
            came_from = origin.of(self._conn, [m.id]).get(m.id)
        state = source_state(m.source_ref, m.source_hash)
        warnings = [f"source {m.source_ref} cannot be opened"] if state == "unreadable" else []
        out = m.to_dict()
        out.update(
            injection_risk=self.injection_risk(m),
            source_state=state,
            stale_source=state == "stale",
            effective_confidence=self.effective_confidence(m, state),
            successor_id=successor,
            links=[link.to_dict(viewpoint=m.id) for link in links],
            entities=[e.card() for e in entities],
            episodes=[e.to_dict() for e in episodes],
            origin=came_from.to_dict() if came_from is not None else None,
            warnings=warnings,
        )
        return out

    def origins(self, ids: Sequence[str]) -> dict[str, Origin]:
        """Who wrote each of these rows, for the ones pulled from the team hub."""
        return origin.of(self._conn, list(ids))

    @staticmethod
    def injection_risk(m: Memory) -> bool:
        return row_injection_risk(m)

    @staticmethod
    def effective_confidence(m: Memory, state: str | None = None) -> float:
        """Confidence after the [STALE SOURCE] halving for a file: source that changed."""
        if state is None:
            state = source_state(m.source_ref, m.source_hash)
        return m.confidence / 2 if state == "stale" else m.confidence

    def alias_namespace(self, alias: str, namespace: str) -> bool:
        """Make `alias` (a legacy key, e.g. from ZMEM_NS_MIGRATION_MAP) read as `namespace`:
        recall, recent and search of `namespace` then include rows stored under `alias`."""
        alias, namespace = alias.strip(), namespace.strip()
        if not alias or not namespace or alias == namespace:
            raise UsageError("an alias needs two different, non-empty namespaces")
        with transaction(self._conn):
            return memories.insert_namespace_alias(self._conn, alias, namespace, config.now_iso())

    def namespace_set(self, namespace: str) -> list[str]:
        return memories.namespace_aliases(self._conn, namespace)

    def list(
        self,
        *,
        namespace: str | None = None,
        type: str | None = None,
        include_superseded: bool = False,
        as_of: str | None = None,
        limit: int | None = None,
    ) -> list[Memory]:
        """Newest first. as_of is a point-in-time read (rows valid at that instant)."""
        instant = config.normalize_instant(as_of) if as_of else None
        if limit is not None and not 1 <= limit <= MAX_LIMIT:
            raise UsageError(f"limit must be between 1 and {MAX_LIMIT}")
        spaces = self.namespace_set(namespace) if namespace else None
        return memories.list_memories(self._conn, spaces, type, instant, include_superseded, limit)

    def stats(self) -> dict[str, Any]:
        with read_snapshot(self._conn):
            out = memories.stats(self._conn, self.settings.inject_floor_prompt, INJECTION_TAG)
        out["schema_version"] = self.schema_version
        out["store_path"] = str(self.path)
        try:
            out["size_bytes"] = self.path.stat().st_size
        except OSError:
            out["size_bytes"] = None
        out["capture_mode"] = self.settings.capture_mode
        out["embed_profile"] = self.settings.embed_profile
        out["embedder_available"] = self.vectors.embedder is not None
        return out

    # ---- links -----------------------------------------------------------------------------

    def links(self, memory_id: str) -> list[Link]:
        return graph.links_of(self._conn, self.resolve_id(memory_id))

    def _link_pair(self, a: str, b: str) -> tuple[Memory, Memory]:
        first, second = (memories.get(self._conn, self._lookup_id(k) or k) for k in (a, b))
        for key, found in ((a, first), (b, second)):
            if found is None:
                raise NotFound(f"no memory with id {key}")
        assert first is not None and second is not None
        if first.id == second.id:
            raise Refusal("a memory cannot be linked to itself")
        if first.namespace != second.namespace:
            raise Refusal(
                f"cannot link across namespaces ({first.namespace} vs {second.namespace})"
            )
        return first, second

    def add_link(
        self,
        a: str,
        b: str,
        relation: str,
        *,
        score: float | None = None,
        reason: str | None = None,
    ) -> dict[str, Any]:
        """Operator-curated edge. Symmetric relations go both ways; contradicts/supports move
        trust, so they need a reason (validated and echoed, not persisted)."""
        if relation not in LINK_RELATIONS:
            raise UsageError(f"relation {relation!r} is not one of: {', '.join(LINK_RELATIONS)}")
        if relation in ("contradicts", "supports"):
            reason = _require_reason(reason, f"a {relation} link")
        if score is not None:
            score = policy.validate_confidence(score, "--score")
        with transaction(self._conn):
            first, second = self._link_pair(a, b)
            at = config.now_iso()
            if relation == "contradicts":
                created = writer.contradict(self._conn, first.id, second.id, at, score)
            else:
                created = graph.insert_link(self._conn, first.id, second.id, relation, score, at)
                if relation in SYMMETRIC_RELATIONS:
                    created = (
                        graph.insert_link(self._conn, second.id, first.id, relation, score, at)
                        or created
                    )
                if relation == "supports" and created:
                    memories.add_trust(self._conn, first.id, TRUST_CORROBORATION_DELTA)
                    memories.add_trust(self._conn, second.id, TRUST_CORROBORATION_DELTA)
            return self._link_report(first.id, second.id, relation, created, reason)

    def contradict(self, a: str, b: str, reason: str | None) -> dict[str, Any]:
        """Record a contradiction: both rows stay live, each loses 0.10 trust (once)."""
        return self.add_link(a, b, "contradicts", reason=_require_reason(reason, "contradict"))

    def _link_report(
        self, a: str, b: str, relation: str, created: bool, reason: str | None
    ) -> dict[str, Any]:
        trust = {m.id: m.trust_score for m in memories.get_many(self._conn, [a, b])}
        return {
            "src": a,
            "dst": b,
            "relation": relation,
            "created": created,
            "reason": reason,
            "trust_score": trust,
        }

    # ---- entities --------------------------------------------------------------------------

    def entities_of(self, memory_id: str) -> list[Entity]:
        """The entities a memory names."""
        return graph.entities_of(self._conn, self.resolve_id(memory_id))

    def entities(self, kind: str | None = None) -> list[Entity]:
        return graph.list_entities(self._conn, kind)

    def merge_entities(self, source_id: str, target_id: str, *, confirm: bool = False) -> MergePlan:
        """Plan (and with confirm, apply) moving one entity's aliases and links onto another.
        Nothing ever merges entities automatically."""
        if source_id == target_id:
            raise Refusal("--from and --to are the same entity")
        with transaction(self._conn):
            source = graph.get_entity(self._conn, source_id)
            target = graph.get_entity(self._conn, target_id)
            for key, found in ((source_id, source), (target_id, target)):
                if found is None:
                    raise Refusal(f"no entity with id {key}")
            assert source is not None and target is not None
            if source.kind != target.kind:
                raise Refusal(
                    f"entity kinds differ ({source.kind} vs {target.kind}); merging would "
                    "re-classify history"
                )
            source_links = graph.entity_memory_ids(self._conn, source.id)
            target_links = graph.entity_memory_ids(self._conn, target.id)
            collisions = len(source_links & target_links)
            if confirm:
                graph.merge_entity(self._conn, source.id, target.id)
            return MergePlan(
                source=source,
                target=target,
                aliases_moved=source.aliases,
                alias_collisions=(),
                links_moved=len(source_links) - collisions,
                link_collisions=collisions,
                applied=confirm,
            )


def _notice_newer_schema(settings: Settings, version: int) -> list[str]:
    """One NOTICE per newer schema version per data dir, not one per command."""
    marker = settings.data_dir / f".notice-schema-v{version}"
    if marker.exists():
        return []
    try:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:
        pass
    return [
        f"NOTICE: store schema v{version} is newer than this client (v{SCHEMA_VERSION}); "
        "it stays usable, but update zmem soon"
    ]
