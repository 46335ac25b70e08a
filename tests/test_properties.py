"""Property tests (hypothesis) for the store's invariants: any Unicode content round-trips,
dedup never merges polarity-opposite twins, and tombstones are write-once."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from zmem import MemoryStore
from zmem.capture.controls import strip_controls
from zmem.db import memories
from zmem.errors import Refusal
from zmem.models import MAX_CONTENT_CHARS
from zmem.tokens import jaccard, similarity_tokens
from zmem.tokens import words as token_words

# Any Unicode scalar value except lone surrogates, which cannot be encoded and are refused.
unicode_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=2000
).filter(lambda s: s.strip())

words = st.lists(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=9).filter(
        lambda w: (
            w
            not in {
                "not",
                "never",
                "always",
                "avoid",
                "stop",
                "don",
                "nor",
                "none",
                "nothing",
                "without",
                "cannot",
                "must",
                "should",
                "does",
                "enable",
                "allow",
                "disable",
                "forbid",
                "nobody",
            }
        )
    ),
    min_size=3,
    max_size=15,
    unique=True,
)

SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture
def shared_store(tmp_path):
    with MemoryStore.open(tmp_path / "prop.sqlite") as s:
        yield s


@SETTINGS
@given(content=unicode_text)
def test_content_round_trips_through_add_and_get(shared_store, content):
    # A fresh namespace per example: dedup would otherwise (rightly) fold "N" into "Ñ".
    ns = f"project:{uuid.uuid4().hex}"
    stored, stripped = strip_controls(content)
    assume(stored.strip())  # nothing but control characters is refused (test_hostile_input)
    r = shared_store.add(content, namespace=ns, type="fact", signal="test")
    assert r.result == "stored"
    assert shared_store.get(r.id).content == stored  # escapes and controls never stored
    assert bool(stripped) == any(w["type"] == "controls_stripped" for w in r.warnings)


@settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.integers(min_value=MAX_CONTENT_CHARS - 50, max_value=MAX_CONTENT_CHARS),
    st.characters(blacklist_categories=("Cs", "Zs", "Cc", "Zl", "Zp")),
)
def test_content_at_the_cap_round_trips(shared_store, length, ch):
    content = ch * length
    r = shared_store.add(
        content, namespace=f"project:{uuid.uuid4().hex}", type="fact", signal="test"
    )
    assert shared_store.get(r.id).content == content


@SETTINGS
@given(body=words, negation=st.sampled_from(["never", "do not", "don't", "avoid", "not"]))
def test_dedup_never_merges_polarity_opposite_twins(shared_store, body, negation):
    namespace = f"project:{uuid.uuid4().hex}"
    sentence = " ".join(body)
    pos = shared_store.add(f"always {sentence}", namespace=namespace, type="lesson", signal="test")
    neg = shared_store.add(
        f"{negation} {sentence}", namespace=namespace, type="lesson", signal="test"
    )
    assert neg.id != pos.id and neg.result == "stored"
    assert shared_store.get(pos.id).live and shared_store.get(neg.id).live
    assert shared_store.get(neg.id).content == f"{negation} {sentence}"
    # ...while the same polarity re-added does fold in.
    again = shared_store.add(
        f"always {sentence}", namespace=namespace, type="lesson", signal="test"
    )
    assert (again.result, again.id) == ("deduped", pos.id)
    assert neg.contradicts == (pos.id,)


@SETTINGS
@given(
    reason=st.text(min_size=1, max_size=50).filter(lambda s: s.strip()),
    second=st.sampled_from(["invalidate", "supersede", "update"]),
)
def test_tombstones_are_write_once(shared_store, reason, second):
    r = shared_store.add(
        f"fact {reason!r}", namespace=f"project:{uuid.uuid4().hex}", type="fact", signal="test"
    )
    done = shared_store.invalidate(r.id, reason)
    before = shared_store.get(r.id)
    with pytest.raises(Refusal):
        if second == "invalidate":
            shared_store.invalidate(r.id, reason + " again")
        elif second == "supersede":
            shared_store.supersede(r.id, "later")
        else:
            shared_store.update(r.id, "new content")
    after = shared_store.get(r.id)
    assert after == before
    assert (after.superseded_at, after.valid_until) == (done.superseded_at, done.superseded_at)
    assert after.supersede_reason == reason.strip()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    base=st.lists(
        st.sampled_from(["tok" + chr(97 + i // 26) + chr(97 + i % 26) for i in range(40)]),
        min_size=12,
        max_size=24,
        unique=True,
    ),
    noise=st.lists(
        st.lists(
            st.sampled_from(["tok" + chr(97 + i // 26) + chr(97 + i % 26) for i in range(40)]),
            min_size=5,
            max_size=20,
            unique=True,
        ),
        max_size=30,
    ),
    drop=st.integers(min_value=0, max_value=1),
)
def test_prefix_filter_never_misses_a_twin(shared_store, base, noise, drop):
    """Candidates come from the rarest terms only; a near-identical row must still be found
    however the other rows skew the term counts."""
    ns = f"project:{uuid.uuid4().hex}"
    for words_ in noise:
        shared_store.add(" ".join(words_), namespace=ns, type="fact", signal="test")
    first = shared_store.add(" ".join(base), namespace=ns, type="fact", signal="test")
    # If base itself folded into a noise row, its twin is compared with that row's text.
    assume(first.result == "stored")
    # Dropping one token of >= 12 keeps Jaccard >= 11/12 > 0.85.
    twin = shared_store.add(" ".join(base[drop:]), namespace=ns, type="fact", signal="test")
    assert (twin.result, twin.id) == ("deduped", first.id)


VOCAB = ["w" + chr(97 + i // 26) + chr(97 + i % 26) for i in range(30)]


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    a=st.lists(st.sampled_from(VOCAB), min_size=1, max_size=25, unique=True),
    b=st.lists(st.sampled_from(VOCAB), min_size=1, max_size=25, unique=True),
    noise=st.lists(
        st.lists(st.sampled_from(VOCAB), min_size=1, max_size=12, unique=True), max_size=20
    ),
)
def test_dedup_happens_exactly_when_a_twin_exists(shared_store, a, b, noise):
    """Whatever the sizes (one token included) and however other rows skew term counts, a row
    with a twin at Jaccard >= 0.85 folds into some such twin, and never into anything less."""
    ns = f"project:{uuid.uuid4().hex}"
    live = {}
    for words_ in [*noise, a]:
        r = shared_store.add(" ".join(words_), namespace=ns, type="fact", signal="test")
        live[r.id] = shared_store.get(r.id).content
    mine = similarity_tokens(" ".join(b))  # the store's own notion of the text's words

    def twin(text: str) -> bool:
        theirs = similarity_tokens(text)
        if not mine and not theirs:  # stop words only: identical words are the twin
            return token_words(text) == token_words(" ".join(b))
        # One or two words swapped for others, with the rest shared, is another fact (issue
        # 35's judge: "a one-word change ... moves the note elsewhere"), however close.
        only_mine, only_theirs = set(mine) - set(theirs), set(theirs) - set(mine)
        if 1 <= len(only_mine) <= 2 and 1 <= len(only_theirs) <= 2 and len(mine & theirs) >= 2:
            return False
        return jaccard(mine, theirs) >= 0.85

    twins = {i for i, text in live.items() if twin(text)}
    r = shared_store.add(" ".join(b), namespace=ns, type="fact", signal="test")
    if twins:
        assert r.result == "deduped" and r.id in twins
    else:
        assert r.result == "stored"


@pytest.fixture
def capped_store(tmp_path, monkeypatch):
    """Posting lists capped at two rows, so most terms overflow and writes take the
    count-only and text-index fallbacks."""
    monkeypatch.setattr(memories, "POSTINGS_CAP", 2)
    with MemoryStore.open(tmp_path / "capped.sqlite") as s:
        yield s


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    a=st.lists(st.sampled_from(VOCAB[:12]), min_size=1, max_size=12, unique=True),
    b=st.lists(st.sampled_from(VOCAB[:12]), min_size=1, max_size=12, unique=True),
    noise=st.lists(
        st.lists(st.sampled_from(VOCAB[:12]), min_size=1, max_size=8, unique=True), max_size=12
    ),
)
def test_dedup_stays_exact_when_posting_lists_overflow(capped_store, a, b, noise):
    test_dedup_happens_exactly_when_a_twin_exists.hypothesis.inner_test(capped_store, a, b, noise)
