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
        assert lanes._scoped_top(conn, match, scope, want) == db.fts_lane(conn, match, scope, want)


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
