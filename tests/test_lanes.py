"""The lanes' shortcuts are exact: the prefetch OR pass returns what the scoped join returns,
whatever share of the matches the namespace holds, and broad entities leave the entity lane."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zmem.db import recall as db
from zmem.db.recall import Scope
from zmem.retrieval import lanes
from zmem.retrieval.lanes import EntityLane, QueryPlan
from zmem.retrieval.query import fts_expression

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()


@pytest.fixture
def corpus(store):
    rng = random.Random(7)
    for i in range(240):
        ns = "project:small" if i % 12 == 0 else f"project:big{i % 2}"
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))) + f" row{i}"
        store.add(text, namespace=ns, type="fact", signal="test")
    return store


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    terms=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4, unique=True),
    namespace=st.sampled_from([None, "project:small", "project:big0", "project:big1"]),
    want=st.integers(min_value=1, max_value=60),
    prefetch=st.integers(min_value=1, max_value=8),
)
def test_prefetch_pass_equals_scoped_join(corpus, monkeypatch, terms, namespace, want, prefetch):
    monkeypatch.setattr(lanes, "PREFETCH", prefetch)
    conn = corpus._conn
    scope = Scope(None if namespace is None else (namespace,), None, 0.25)
    for operator in ("OR", "AND"):
        match = fts_expression(terms, operator)
        plan = QueryPlan(" ".join(terms))  # a fresh recall: nothing shared yet
        assert lanes._scoped_top(conn, match, scope, want, plan) == db.fts_lane(
            conn, match, scope, want
        )


@pytest.fixture
def entity_corpus(store):
    rng = random.Random(11)
    tools = ["`docker`", "`kubectl`", "`terraform`", "`ruff`"]
    for i in range(120):
        ns = "project:small" if i % 12 == 0 else f"project:big{i % 2}"
        named = " and ".join(rng.sample(tools, rng.randint(1, 3)))
        added = store.add(f"{named} step {i} needs care", namespace=ns, type="fact", signal="test")
        if i % 9 == 0:  # history rows too: superseded versions keep their links
            store.update(added.id, f"{named} step {i} needs care, revised", signal="test")
    # Equal and out-of-order valid_from values, so the ranking's rid tie-break and its
    # recency key are both exercised (insertion order alone makes them agree).
    stamps = ["2026-01-01T00:00:00.000000Z", "2026-02-01T00:00:00.000000Z"]
    for (rid,) in list(store._conn.execute("SELECT rid FROM memory")):
        store._conn.execute(
            "UPDATE memory SET valid_from = ? WHERE rid = ?", (rng.choice(stamps), rid)
        )
    return store


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    query=st.sampled_from(["docker", "docker kubectl", "terraform ruff kubectl", "ruff"]),
    tiers=st.lists(
        st.tuples(
            st.lists(
                st.sampled_from(["project:small", "project:big0", "project:big1"]), unique=True
            ),
            st.sampled_from([None, "2026-01-15T00:00:00Z"]),
            st.integers(min_value=1, max_value=40),
        ),
        min_size=2,
        max_size=4,
    ),
    prefetch=st.integers(min_value=1, max_value=8),
)
def test_shared_entity_ranking_equals_the_scoped_query(
    entity_corpus, monkeypatch, query, tiers, prefetch
):
    """Tiers share one entity ranking over every namespace; each tier's rows must be exactly
    what its own scoped query returns, whatever its namespaces, instant and depth, in any
    order on one plan."""
    monkeypatch.setattr(lanes, "PREFETCH", prefetch)
    conn = entity_corpus._conn
    plan = QueryPlan(query)
    narrow = plan.narrow_entities(conn)
    assert narrow
    for spaces, as_of, want in tiers:
        scope = Scope(tuple(spaces) or None, as_of, 0.25)
        assert plan.entity_rows(conn, narrow, scope, want) == db.entity_lane(
            conn, narrow, scope, want
        )


def _entity_lane_in_sql(conn, entity_ids, scope, limit):
    """The entity lane's ranking as one GROUP BY / ORDER BY query: the oracle."""
    where, params = scope.clause()
    sql = (
        "SELECT m.rid, m.namespace, count(*) AS n, group_concat(me.entity_id) "
        "FROM memory_entity AS me CROSS JOIN memory AS m ON m.id = me.memory_id "
        f"WHERE me.entity_id IN ({','.join('?' * len(entity_ids))}) AND {where} "
        "GROUP BY m.rid ORDER BY n DESC, m.valid_from DESC, m.rid DESC LIMIT ?"
    )
    rows = conn.execute(sql, [*entity_ids, *params, limit])
    return [(r[0], r[1], r[2], tuple(sorted(r[3].split(",")))) for r in rows]


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    query=st.sampled_from(
        [
            "docker",
            "docker kubectl",
            "terraform ruff kubectl",
            "ruff docker",
            "docker kubectl terraform ruff",
        ]
    ),
    namespaces=st.sampled_from(
        [None, ("project:small",), ("project:big0",), ("project:small", "project:big1")]
    ),
    as_of=st.sampled_from([None, "2026-01-15T00:00:00Z", "2026-03-01T00:00:00Z"]),
    limit=st.integers(min_value=1, max_value=150),
    order=st.randoms(use_true_random=False),
)
def test_entity_lane_ranks_as_group_by_would(entity_corpus, query, namespaces, as_of, limit, order):
    """The windowed lane (each entity's newest rows, the shared rows, the ties at the cut) is
    exactly the ranking of every link, in any entity order, at any instant and window."""
    conn = entity_corpus._conn
    narrow = QueryPlan(query).narrow_entities(conn)
    order.shuffle(narrow)
    scope = Scope(namespaces, as_of, 0.25)
    assert db.entity_lane(conn, narrow, scope, limit) == _entity_lane_in_sql(
        conn, narrow, scope, limit
    )
    assert db.entity_lane(conn, narrow, scope, None) == _entity_lane_in_sql(
        conn, narrow, scope, 10_000
    )


def _lane_statements(conn, entity_ids, scope, limit):
    """The statements db.entity_lane runs on memory_entity, with their bindings, and the plan
    SQLite chose for each."""
    seen = []

    def trace(cursor, sql, bindings):
        if "memory_entity" in sql and "EXPLAIN" not in sql:
            seen.append((sql, bindings))
        return True

    conn.exec_trace = trace
    try:
        db.entity_lane(conn, entity_ids, scope, limit)
    finally:
        conn.exec_trace = None
    return [
        (sql, " ".join(r[3] for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}", bindings or ())))
        for sql, bindings in seen
    ]


@pytest.mark.parametrize("as_of", [None, "2026-01-15T00:00:00Z"])
def test_the_entity_lane_reads_links_in_index_order_never_sorting_them_all(entity_corpus, as_of):
    """The bound is in the plans of the statements the lane runs when an entity links more
    rows than the window: one entity's rows come from (entity_id, valid_from) in order (never
    every link sorted in a temp B-tree); several entities' links come from that index alone,
    with no memory row read until they are ordered."""
    conn = entity_corpus._conn
    narrow = QueryPlan("docker kubectl").narrow_entities(conn)
    scope = Scope(None, as_of, 0.25)
    one = _lane_statements(conn, narrow[:1], scope, 5)
    ordered = [plan for sql, plan in one if "ORDER BY me.valid_from DESC" in sql]
    assert ordered and "memory_entity_recent" in ordered[0] and "TEMP B-TREE" not in ordered[0]
    # Several: besides the counts, every statement on the links reads the index alone.
    several = _lane_statements(conn, narrow, scope, 5)
    assert several and not any(" JOIN " in sql for sql, _ in several)
    assert all("COVERING INDEX memory_entity_recent" in plan for _, plan in several)
    # Within the window every link is joined to its row, as before the bound.
    wide = _lane_statements(conn, narrow, scope, 10_000)
    assert any("CROSS JOIN memory AS m" in sql for sql, _ in wide)


def test_entity_links_follow_their_row_valid_from(entity_corpus):
    conn = entity_corpus._conn
    stale = conn.execute(
        "SELECT count(*) FROM memory_entity AS me JOIN memory AS m ON m.id = me.memory_id "
        "WHERE me.valid_from IS NOT m.valid_from"
    ).fetchone()
    assert stale == (0,)
    assert conn.execute("SELECT count(*) FROM memory_entity").fetchone()[0] > 100


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    terms=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4, unique=True),
    calls=st.lists(
        st.tuples(
            st.sampled_from([None, "project:small", "project:big0", "project:big1"]),
            st.integers(min_value=1, max_value=60),
        ),
        min_size=2,
        max_size=4,
    ),
    prefetch=st.integers(min_value=1, max_value=8),
)
def test_tiers_sharing_one_plan_get_what_their_own_scoped_join_gets(
    corpus, monkeypatch, terms, calls, prefetch
):
    """One recall's tiers share the unscoped FTS ranking (QueryPlan.fts_top) with different
    scopes and depths, in any order: each must still get exactly its own scoped top."""
    monkeypatch.setattr(lanes, "PREFETCH", prefetch)
    conn = corpus._conn
    plan = QueryPlan(" ".join(terms))
    for operator in ("OR", "AND"):
        match = fts_expression(terms, operator)
        for namespace, want in calls:
            scope = Scope(None if namespace is None else (namespace,), None, 0.25)
            shared = lanes._scoped_top(conn, match, scope, want, plan)
            assert shared == db.fts_lane(conn, match, scope, want)


def test_broad_entities_leave_the_entity_lane(store, monkeypatch):
    for i in range(5):
        store.add(
            f"`docker` image {i} is rebuilt nightly",
            namespace="project:a",
            type="fact",
            signal="test",
        )
    store.add(
        "`kubectl` and `docker` both need the vpn",
        namespace="project:a",
        type="fact",
        signal="test",
    )
    scope = Scope(("project:a",), None, 0.25)
    conn = store._conn
    plan = QueryPlan("docker kubectl")
    assert len(EntityLane().run(conn, plan, scope, 50).ranked) == 6
    monkeypatch.setattr(lanes, "ENTITY_BROAD_LINKS", 3)
    narrow = EntityLane().run(conn, QueryPlan("docker kubectl"), scope, 50)  # a new recall
    assert len(narrow.ranked) == 1  # only the kubectl row: docker links 6 rows > 3
    assert EntityLane().run(conn, QueryPlan("docker"), scope, 50).ranked == []


@pytest.fixture
def common_word_store(store):
    """Every row says 'build'; three also say 'docker'. Distinct other words keep the rows
    from deduplicating."""
    for i in range(20):
        extra = "docker image" if i % 7 == 0 else "pipeline"
        store.add(
            f"the build step {i} uses {extra} cache{i} marker{i}",
            namespace="project:a",
            type="fact",
            signal="test",
        )
    return store


def _recorded_fts(monkeypatch) -> list[str]:
    seen: list[str] = []
    real = db.fts_top

    def recording(conn, match, limit):
        seen.append(match)
        return real(conn, match, limit)

    monkeypatch.setattr(db, "fts_top", recording)
    return seen


def test_a_term_half_the_store_holds_is_not_informative(common_word_store):
    conn = common_word_store._conn
    assert QueryPlan("docker build").informative_terms(conn) == ["docker"]
    assert QueryPlan("build").informative_terms(conn) == []
    assert QueryPlan("docker image").informative_terms(conn) == ["docker", "image"]


def test_rows_matching_only_a_common_term_still_fill_a_short_pool(common_word_store):
    conn = common_word_store._conn
    scope = Scope(("project:a",), None, 0.25)
    out = lanes.FtsLane().run(conn, QueryPlan("docker build"), scope, 50)
    docker = {r[0] for r in conn.execute("SELECT rid FROM memory WHERE content LIKE '%docker%'")}
    assert len(out.ranked) == 20  # every row holds 'build'
    assert set(out.ranked[:3]) == docker  # the informative matches first, as bm25 ranks them
    full = db.fts_lane(conn, fts_expression(["docker", "build"], "OR"), scope, 3)
    assert out.ranked[:3] == [rid for rid, _ in full]


def test_the_common_term_is_not_ranked_when_the_informative_pass_fills_the_pool(
    common_word_store, monkeypatch
):
    conn = common_word_store._conn
    seen = _recorded_fts(monkeypatch)
    scope = Scope(("project:a",), None, 0.25)
    out = lanes.FtsLane().run(conn, QueryPlan("docker cache0 build"), scope, 3)
    assert len(out.ranked) == 3  # 1 row holds all three terms, 3 hold docker
    assert '"docker" OR "cache0"' in seen
    assert '"docker" OR "cache0" OR "build"' not in seen  # 20 rows of bm25 for nothing


def test_tiers_share_one_unscoped_fts_ranking(store, monkeypatch):
    for i in range(12):
        ns = "user:global" if i % 3 == 0 else "project:a"
        store.add(f"rotate the signing key {i} weekly", namespace=ns, type="fact", signal="test")
    seen = _recorded_fts(monkeypatch)
    report = store.recall_report(
        "signing key rotation", namespace="project:a", include_global=True, telemetry=False
    )
    assert {h.tier for h in report.hits} == {"namespace", "global"}
    assert len(seen) == len(set(seen))  # each expression ranked once for both tiers


def test_own_vector_evidence_needs_the_query_model():
    """Under --as-of a superseded row's meaning evidence comes from its stored vector; one made
    by another model is not comparable, whatever its length."""
    import struct

    from zmem.retrieval.lanes import VectorLane

    query = struct.pack("<4f", 1.0, 0.0, 0.0, 0.0)
    stored = struct.pack("<4f", 0.9, 0.1, 0.0, 0.0)
    plan = QueryPlan("q", query, (0.2, 0.55), vector_model="model-a")
    assert VectorLane.evidence(plan, stored, "model-a") == 1.0
    assert VectorLane.evidence(plan, stored, "model-b") == 0.0
    assert VectorLane.evidence(plan, stored[:8], "model-a") == 0.0  # another size
    unknown = QueryPlan("q", query, (0.2, 0.55))
    assert VectorLane.evidence(unknown, stored, "model-b") == 1.0


# ---- the bound on rows holding only common terms (issue 51) ---------------------------------


@pytest.fixture
def recurring_phrase_store(store):
    """A team's recurring phrase: every row says 'retry the call', some twice; a few also name
    a service. Rows alternate between two namespaces; distinct markers keep them apart."""
    for i in range(40):
        named = f"service{i // 7 % 3} owner" if i % 7 == 0 else f"queue{i}"
        again = " then retry the call" if i % 4 == 0 else ""
        store.add(
            f"retry the call to {named}{again} cache{i} marker{i}",
            namespace="project:a" if i % 3 else "project:b",
            type="fact",
            signal="test",
        )
    return store


def _fts_lane_oracle(conn, query, scope, depth, newest):
    """The FTS lane as scoped joins over every row: the AND pass, the informative OR, the full
    OR. A pass whose rows can hold only common terms (the full OR after the informative one,
    every pass when no term is informative) sees only its expression's `newest` matches."""
    plan = QueryPlan(query)
    terms, informative = plan.terms, plan.informative_terms(conn)
    passes = [(terms, "AND")] if len(terms) > 1 else []
    if informative and len(informative) < len(terms):
        passes.append((informative, "OR"))
    passes.append((terms, "OR"))
    ranked: list[int] = []
    for pass_terms, operator in passes:
        match = fts_expression(pass_terms, operator)
        rows = db.fts_lane(conn, match, scope, 10**6)
        common_only = not informative or (pass_terms is terms and operator == "OR")
        if common_only and len(informative) < len(terms):
            window = {
                r for (r,) in conn.execute(
                    "SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? "
                    "ORDER BY rowid DESC LIMIT ?",
                    (match, newest),
                )
            }  # fmt: skip
            kept = [(r, s) for r, s in rows if r in window]
            if len(kept) < depth + len(ranked) and len(window) >= newest:
                # The window is other scopes' rows: the newest `newest` this scope admits.
                scoped = set(sorted((r for r, _ in rows), reverse=True)[:newest])
                kept = [(r, s) for r, s in rows if r in scoped]
            rows = kept
        ranked += [r for r, _ in rows if r not in ranked][: depth - len(ranked)]
    return ranked


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    query=st.sampled_from(
        ["retry service0", "service1 owner call", "retry the call", "call", "queue7 retry"]
    ),
    namespace=st.sampled_from([None, "project:a", "project:b"]),
    depth=st.integers(min_value=1, max_value=45),
    newest=st.sampled_from([3, 8, 20, 500]),
)
def test_common_term_rows_are_ranked_among_the_newest(
    recurring_phrase_store, monkeypatch, query, namespace, depth, newest
):
    """Rows holding an informative term rank exactly as before; rows holding only terms half
    the store holds are ranked among their pass's newest COMMON_TERM_ROWS matches, so with
    the bound above the matches (500 here) the lane is the unbounded one."""
    monkeypatch.setattr(lanes, "COMMON_TERM_ROWS", newest)
    conn = recurring_phrase_store._conn
    scope = Scope(None if namespace is None else (namespace,), None, 0.25)
    out = lanes.FtsLane().run(conn, QueryPlan(query), scope, depth)
    assert out.ranked == _fts_lane_oracle(conn, query, scope, depth, newest)


def test_a_shared_phrase_no_longer_has_every_row_scored(recurring_phrase_store, monkeypatch):
    monkeypatch.setattr(lanes, "COMMON_TERM_ROWS", 6)
    conn = recurring_phrase_store._conn
    plan = QueryPlan("retry service0")
    assert plan.informative_terms(conn) == ["service0"]
    seen = _recorded_fts(monkeypatch)
    newest: list[int] = []
    real = db.fts_newest_top

    def recording(conn, match, limit):
        rows = real(conn, match, limit)
        newest.append(len(rows))
        return rows

    monkeypatch.setattr(db, "fts_newest_top", recording)
    scope = Scope(None, None, 0.25)
    out = lanes.FtsLane().run(conn, plan, scope, 50)
    service0 = {
        r for (r,) in conn.execute("SELECT rid FROM memory WHERE content LIKE '%service0 %'")
    }
    six = {r for (r,) in conn.execute("SELECT rid FROM memory ORDER BY rid DESC LIMIT 6")}
    assert set(out.ranked[: len(service0)]) == service0  # the best rows, first
    assert set(out.ranked[len(service0) :]) == six - service0  # then the newest others only
    assert newest == [6]  # FTS5 scored 6 of the 40 rows holding "retry"
    assert '"retry" OR "service0"' not in seen  # and never ranked all of them


def test_a_query_of_common_terms_ranks_the_newest_rows(recurring_phrase_store, monkeypatch):
    monkeypatch.setattr(lanes, "COMMON_TERM_ROWS", 5)
    conn = recurring_phrase_store._conn
    out = lanes.FtsLane().run(conn, QueryPlan("retry"), Scope(None, None, 0.25), 50)
    newest = [r for (r,) in conn.execute("SELECT rid FROM memory ORDER BY rid DESC LIMIT 5")]
    assert sorted(out.ranked) == sorted(newest)
    # Ranked by bm25 among them: the rows saying the phrase twice first.
    twice = {r for r in newest if "then retry" in db.fetch(conn, [r])[r].memory.content}
    assert twice and set(out.ranked[: len(twice)]) == twice


def test_recall_naming_a_rare_term_beside_a_shared_phrase(recurring_phrase_store, monkeypatch):
    monkeypatch.setattr(lanes, "COMMON_TERM_ROWS", 4)
    hits = recurring_phrase_store.recall(
        "why do we retry the call to service2", namespace="project:a", limit=3, link_hops=0,
        no_mmr=True, telemetry=False,
    )  # fmt: skip
    # Two rows of project:a name service2: they lead, above rows saying only the phrase.
    assert ["service2" in h.memory.content for h in hits] == [True, True, False]


def test_a_scope_the_newest_matches_miss_still_gets_its_own_newest_rows(store, monkeypatch):
    """Found in review: the newest matches overall can all be another namespace's (or written
    after an --as-of instant); the lane then ranks the newest matches its scope admits
    instead of coming back empty."""
    monkeypatch.setattr(lanes, "COMMON_TERM_ROWS", 8)
    old_b = [
        store.add(f"deploy note {i} for the b team", namespace="project:b", type="fact",
                  signal="test").id
        for i in range(5)
    ]  # fmt: skip
    for i in range(30):
        store.add(f"deploy step {i} of the a pipeline", namespace="project:a", type="fact",
                  signal="test")  # fmt: skip
    conn = store._conn
    assert QueryPlan("deploy").informative_terms(conn) == []  # every row holds it
    hits = store.recall("deploy", namespace="project:b", limit=5, hybrid=False,
                        link_hops=0, no_mmr=True, telemetry=False)  # fmt: skip
    assert sorted(h.id for h in hits) == sorted(old_b)


def test_a_row_without_a_date_ranks_oldest_instead_of_failing(entity_corpus):
    conn = entity_corpus._conn
    narrow = QueryPlan("docker kubectl").narrow_entities(conn)
    conn.execute("DROP TRIGGER memory_entity_valid_from")  # a repair that leaves no date
    (rid,) = conn.execute(
        "SELECT m.rid FROM memory AS m JOIN memory_entity AS me ON me.memory_id = m.id "
        "WHERE me.entity_id = ? AND m.superseded_at IS NULL LIMIT 1",
        (narrow[0],),
    ).fetchone()
    conn.execute("UPDATE memory SET valid_from = NULL WHERE rid = ?", (rid,))
    conn.execute(
        "UPDATE memory_entity SET valid_from = NULL WHERE memory_id = "
        "(SELECT id FROM memory WHERE rid = ?)",
        (rid,),
    )
    scope = Scope(None, None, 0.25)
    for limit in (5, 200, None):
        got = db.entity_lane(conn, narrow, scope, limit)
        assert got == _entity_lane_in_sql(conn, narrow, scope, limit or 10_000)
