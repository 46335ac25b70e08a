"""The ranked candidate lists recall fuses. A lane takes the query plan and a scope (namespace
set, instant, pre-floor) and returns row ids best first plus a native 0..1 relevance per row.
The vector lane of the semantic issue is one more implementation of the same shape."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import apsw

from zmem.capture.entities import query_aliases
from zmem.db import recall as db
from zmem.db import vectors
from zmem.db.recall import Scope
from zmem.retrieval.query import fts_expression, query_terms
from zmem.tokens import POLARITY_WORDS

if TYPE_CHECKING:  # the cache imports numpy: only processes that build one pay for it
    from zmem.retrieval.vector_cache import VectorCache

Row = TypeVar("Row")

MAX_ALIAS_TEXT = 2000
MAX_QUERY_ALIASES = 64


@dataclass
class QueryPlan:
    """The query text and what each lane derives from it, computed once per recall."""

    text: str
    vector: bytes | None = None  # the query's embedding (float32 LE), when the vector lane runs
    # Cosine below the first value is noise; at the second the match is as strong as it gets.
    similarity_scale: tuple[float, float] = (0.2, 0.55)
    # A long-lived process's in-memory copy of the index; used only while it is fresh.
    vector_cache: VectorCache | None = field(default=None, repr=False)
    # The model the query was embedded with: a stored vector of another model, however long,
    # is not comparable with it (None: not known, any vector of the same size counts).
    vector_model: str | None = None
    _narrow: list[str] | None = field(default=None, repr=False)
    # entity -> its links, counted to ENTITY_BROAD_LINKS + 1 (narrow_entities): the entity lane
    # reads it instead of counting again.
    _breadth: dict[str, int] = field(default_factory=dict, repr=False)
    _informative: list[str] | None = field(default=None, repr=False)
    # (entities, as_of, floor) -> (window asked, rows): the entity lane's ranking over every
    # namespace.
    _entity_rows: dict[
        tuple[tuple[str, ...], str | None, float], tuple[int, list[db.EntityRow]]
    ] = field(default_factory=dict, repr=False)
    # match expression -> (window asked, rows): the unscoped FTS ranking is the same for every
    # tier, so the global tier reuses the namespace tier's (a prefix of a deeper window).
    _fts_tops: dict[str, tuple[int, list[tuple[int, float]]]] = field(
        default_factory=dict, repr=False
    )
    # match expression -> the bm25 ranking of its newest COMMON_TERM_ROWS rows
    _fts_newest: dict[str, list[tuple[int, float]]] = field(default_factory=dict, repr=False)

    @cached_property
    def terms(self) -> list[str]:
        return query_terms(self.text)

    @cached_property
    def similarity_terms(self) -> list[str]:
        # The stored token form (content_norm) drops polarity words; compare like with like.
        return [t for t in self.terms if t not in POLARITY_WORDS] or self.terms

    def narrow_entities(self, conn: apsw.Connection) -> list[str]:
        """The entities the query names, without the broad ones. Scope-free, so computed once
        per recall, not once per tier."""
        if self._narrow is None:
            entity_ids = db.matched_entities(conn, self.aliases)
            self._breadth = db.entity_breadth(conn, entity_ids, ENTITY_BROAD_LINKS)
            self._narrow = [e for e in entity_ids if self._breadth[e] <= ENTITY_BROAD_LINKS]
        return self._narrow

    def entity_rows(
        self, conn: apsw.Connection, narrow: list[str], scope: Scope, want: int
    ) -> list[db.EntityRow]:
        """The scoped top `want` rows of the entity lane, exactly, as _scoped_top does for FTS:
        the tiers differ only in namespace, so the top want * PREFETCH rows over every
        namespace are ranked once per recall and each tier keeps its own; only a tier too
        narrow for that window runs its own query."""
        window = want * PREFETCH
        everywhere = Scope(None, scope.as_of, scope.floor)
        # Counted to ENTITY_BROAD_LINKS + 1, beyond any window a prompt asks for.
        known = self._breadth if all(e in self._breadth for e in narrow) else None
        rows, exhausted = _windowed(
            self._entity_rows,
            (tuple(narrow), scope.as_of, scope.floor),
            window,
            lambda w: db.entity_lane(conn, narrow, everywhere, w, known),
        )
        spaces = scope.namespaces
        kept = [r for r in rows if spaces is None or r[1] in spaces][:want]
        if len(kept) >= want or exhausted:
            return kept
        return db.entity_lane(conn, narrow, scope, want, known)

    def informative_terms(self, conn: apsw.Connection) -> list[str]:
        """The terms bm25 can rank by: FTS5 clamps the IDF of a term held by half the rows or
        more to 1e-6, so a row matching only such terms scores ~0 and ranks below every row
        matching one of these. Empty when every term is that common."""
        if self._informative is None:
            bound = db.indexed_rows_bound(conn)
            rows = db.term_rows(conn, self.terms)
            self._informative = [t for t in self.terms if 2 * rows.get(t, 0) < bound]
        return self._informative

    def fts_newest(self, conn: apsw.Connection, match: str) -> list[tuple[int, float]]:
        """db.fts_newest_top over COMMON_TERM_ROWS rows, once per expression and recall (every
        tier keeps its own from the one ranking)."""
        rows = self._fts_newest.get(match)
        if rows is None:
            rows = self._fts_newest[match] = db.fts_newest_top(conn, match, COMMON_TERM_ROWS)
        return rows

    def fts_top(self, conn: apsw.Connection, match: str, window: int) -> list[tuple[int, float]]:
        """db.fts_top, once per expression and recall: ORDER BY is total (score, then rowid),
        so a shallower window is a prefix of a deeper one."""
        rows, _ = _windowed(self._fts_tops, match, window, lambda w: db.fts_top(conn, match, w))
        return rows

    @cached_property
    def aliases(self) -> list[str]:
        # The subject of a prompt is near its start; a pasted log must not become 5,000 lookups.
        return query_aliases(self.text[:MAX_ALIAS_TEXT])[:MAX_QUERY_ALIASES]


def _windowed(
    memo: dict[Any, tuple[int, list[Row]]],
    key: Any,
    window: int,
    fetch: Callable[[int], list[Row]],
) -> tuple[list[Row], bool]:
    """The top `window` rows of a ranking, fetched once per key and recall: the rankings are
    total orders, so a shallower window is a prefix of a deeper one, and a result shorter than
    the window it was asked for holds every row. (rows, True when the rows are every row)."""
    known = memo.get(key)
    if known is None or (known[0] < window and len(known[1]) == known[0]):
        known = memo[key] = (window, fetch(window))
    asked, rows = known
    # Every row only if the memo is complete and this window does not cut it.
    return rows[:window], len(rows) < asked and len(rows) <= window


@dataclass
class LaneResult:
    name: str
    ranked: list[int] = field(default_factory=list)  # rids, best first
    native: dict[int, float] = field(default_factory=dict)  # rid -> relevance in 0..1
    detail: dict[int, object] = field(default_factory=dict)


class Lane(Protocol):
    name: str

    def run(
        self, conn: apsw.Connection, plan: QueryPlan, scope: Scope, depth: int
    ) -> LaneResult: ...


# Unscoped rows ranked per wanted row before scoping: at 1M rows ranking inside FTS5 alone costs
# about a third of the scoped join, and a namespace holding >= 1/8 of the matches is served.
PREFETCH = 8
# Rows matching only terms half the store holds are ranked among the newest this many rows
# that match (whatever their namespace; each tier keeps its own): ten times a prompt's pool of
# 50, and a bound on the rows FTS5 scores (~1 us each) where every row holding such a term
# would otherwise be scored. A store with fewer matching rows ranks them all, as before.
COMMON_TERM_ROWS = 500
# An entity linked to more rows than this discriminates like a stop word and is left out of
# the entity lane (its rows still match lexically); counting stops at the cap.
ENTITY_BROAD_LINKS = 2000


class FtsLane:
    """BM25 over content and tags. Rows holding every term rank first (an AND pass), then the
    OR pool by score, so a long query still ranks complete matches on top. The OR pool is
    ranked over the informative terms first: a term held by half the store adds nothing to
    bm25 but would make FTS5 score every row it holds (all 100k of them, ~15 ms per 10k); rows
    matching only such terms come after, from the full OR, when the pool is still short.

    A pass whose rows can hold nothing but such terms (the full OR after the informative one,
    or any pass when no term is informative) ranks only the newest COMMON_TERM_ROWS rows that
    match it (the newest the scope admits, when the newest overall are another scope's): FTS5
    clamps such a term's IDF to 1e-6, so these rows are ordered by length alone, and ranking
    all of them took 7.5-11 of a prompt's 23-31 ms when a team's recurring phrasing filled 60%
    of a 10k-row store (issue 51, docs/benchmarks.md)."""

    name = "fts"

    def run(self, conn: apsw.Connection, plan: QueryPlan, scope: Scope, depth: int) -> LaneResult:
        out = LaneResult(self.name)
        terms = plan.terms
        if not terms or depth <= 0:
            return out
        informative = plan.informative_terms(conn)
        scores: dict[int, float] = {}
        passes: list[tuple[list[str], str]] = []
        if len(terms) > 1:
            passes.append((terms, "AND"))
        if informative and len(informative) < len(terms):
            passes.append((informative, "OR"))
        passes.append((terms, "OR"))  # one term: the same as an AND
        for pass_terms, operator in passes:
            if len(out.ranked) >= depth:
                break
            # Over-fetch by what earlier passes found: those rows come back and are skipped.
            want = depth + len(out.ranked)
            match = fts_expression(pass_terms, operator)
            if len(informative) < len(terms) and (
                # The full OR comes after an exhausted informative pass (it left the pool
                # short), so every row it adds holds common terms only; with no informative
                # term at all, so does every row of every pass.
                not informative or (pass_terms is terms and operator == "OR")
            ):
                window = plan.fts_newest(conn, match)
                found, enough = _admitted(conn, window, scope, want)
                if not enough and len(window) >= COMMON_TERM_ROWS:
                    # The newest matches overall are another namespace's, or rows written
                    # after an --as-of instant, or retired: rank the newest this scope admits.
                    found = db.fts_newest_scoped(conn, match, scope, COMMON_TERM_ROWS)[:want]
            else:
                found = _scoped_top(conn, match, scope, want, plan)
            for rid, s in found:
                if rid not in scores:
                    out.ranked.append(rid)
                    scores[rid] = s
                    if len(out.ranked) == depth:
                        break
        best = min(scores.values(), default=0.0)
        for rid, s in scores.items():
            # bm25() is negative, lower is better; normalise against this query's best row.
            out.native[rid] = s / best if best < 0 else 1.0
        return out


def _scoped_top(
    conn: apsw.Connection,
    match: str,
    scope: Scope,
    want: int,
    plan: QueryPlan,
) -> list[tuple[int, float]]:
    """The scoped top `want` rows of an FTS query, exactly. First rank the unscoped top
    want * PREFETCH rows inside FTS5 alone and keep those the scope admits: any in-scope row
    outside that window scores below every row inside it, so if `want` survive they are the
    true top. Only when the scope is too narrow for that does the scoped join run. The unscoped
    ranking is the plan's, shared by the recall's tiers."""
    window = want * PREFETCH
    top = plan.fts_top(conn, match, window)
    survivors, enough = _admitted(conn, top, scope, want)
    if enough or len(top) < window:
        return survivors
    return db.fts_lane(conn, match, scope, want)


def _admitted(
    conn: apsw.Connection, ranked: list[tuple[int, float]], scope: Scope, want: int
) -> tuple[list[tuple[int, float]], bool]:
    """The first `want` rows of a ranking that the scope admits, and whether there were that
    many. The scope is checked a slice at a time, best rows first: a namespace holding most of
    the matches is served by the first slice instead of probing the whole ranking."""
    survivors: list[tuple[int, float]] = []
    step = 2 * want
    for start in range(0, len(ranked), step):
        part = ranked[start : start + step]
        admitted = db.in_scope(conn, [rid for rid, _ in part], scope)
        survivors += [(rid, s) for rid, s in part if rid in admitted]
        if len(survivors) >= want:
            return survivors[:want], True
    return survivors, False


class EntityLane:
    """Memories linked to an entity the query names (extractor mentions plus plain tokens and
    word pairs looked up as aliases), ranked by matched entities, then recency."""

    name = "entity"

    def run(self, conn: apsw.Connection, plan: QueryPlan, scope: Scope, depth: int) -> LaneResult:
        out = LaneResult(self.name)
        aliases = plan.aliases
        if not aliases or depth <= 0:
            return out
        narrow = plan.narrow_entities(conn)
        matched = len(narrow)
        for rid, _, n, entity_ids in plan.entity_rows(conn, narrow, scope, depth):
            out.ranked.append(rid)
            out.native[rid] = min(1.0, n / matched) if matched else 0.0
            out.detail[rid] = entity_ids
        return out


class VectorLane:
    """KNN over the live rows' vectors (memory_vec), per namespace partition, then the scope's
    validity and floor checked on the rows. The index holds live rows only, so under --as-of
    a row superseded since then cannot come back through this lane (the spec's caveat)."""

    name = "vector"

    def run(self, conn: apsw.Connection, plan: QueryPlan, scope: Scope, depth: int) -> LaneResult:
        out = LaneResult(self.name)
        if plan.vector is None or depth <= 0:
            return out
        # Over-fetch: floor and validity are checked after the KNN, on the rows themselves.
        floor = plan.similarity_scale[0]
        # KNN always returns k rows, however unrelated; rows under the profile's noise floor
        # are evidence of nothing and stay out of the fusion.
        cache = plan.vector_cache
        try:
            if cache is not None and cache.current(conn):
                knn = cache.knn(plan.vector, scope.namespaces, depth * 2)
            else:
                knn = vectors.knn(conn, plan.vector, scope.namespaces, depth * 2)
        except apsw.Error:
            # No index yet, or another process converted it to another size since this handle
            # opened: the lane is empty and recall goes on lexically (fail-open).
            return out
        near = [(r, d) for r, d in knn if 1.0 - d > floor]
        admitted = db.in_scope(conn, [rid for rid, _ in near], scope)
        for rid, distance in near:
            if rid in admitted:
                out.ranked.append(rid)
                out.native[rid] = _calibrated(1.0 - distance, plan.similarity_scale)
                if len(out.ranked) == depth:
                    break
        return out

    @staticmethod
    def evidence(plan: QueryPlan, stored: bytes | None, model: str | None = None) -> float:
        """What this lane would have said of a row it cannot see (a row superseded since, under
        --as-of: the index holds live rows only), from the row's own stored vector (`model`
        made it): the same calibrated cosine, 0.0 under the noise floor or when the vectors
        are not comparable."""
        query = plan.vector
        if query is None or not stored or len(stored) != len(query):
            return 0.0
        if plan.vector_model is not None and model != plan.vector_model:
            return 0.0
        import numpy as np  # loaded already wherever a query was embedded; not on lexical paths

        a = np.frombuffer(query, dtype="<f4")
        b = np.frombuffer(stored, dtype="<f4")
        norms = float(np.linalg.norm(a) * np.linalg.norm(b))
        if not norms:
            return 0.0
        return _calibrated(float(a @ b) / norms, plan.similarity_scale)


def _calibrated(similarity: float, scale: tuple[float, float]) -> float:
    """A cosine on the lane's 0..1 evidence scale: 0 at the profile's noise floor or under it,
    1 at its strong-match level."""
    floor, strong = scale
    return min(1.0, (similarity - floor) / (strong - floor)) if similarity > floor else 0.0


LEXICAL_LANES: tuple[Lane, ...] = (FtsLane(), EntityLane())
HYBRID_LANES: tuple[Lane, ...] = (FtsLane(), VectorLane(), EntityLane())
DENSE_LANES: tuple[Lane, ...] = (VectorLane(),)
