"""capture.stance: what two similar notes say about each other, and the write path deciding by
it (issue 35). Negation inside a code span, a quote or a flag is not a stance; one preference
stated three ways is one stance; swapping its two sides reverses it; a one-word antonym
reverses it; any other one-word change moves the note to another scope, number or unit."""

from __future__ import annotations

import pytest

from zmem import MemoryStore
from zmem.capture import stance

SAME, OPPOSITE, APART = stance.SAME, stance.OPPOSITE, stance.APART


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        # One preference, worded with and without negation words.
        ("Use rg not grep -r for searching the monorepo",
         "Always use rg instead of grep -r in the monorepo", SAME),
        ("Never use grep -r in the monorepo, use rg", "Prefer rg over grep -r in the monorepo",
         SAME),
        ("Do not use moment.js in new frontend code",
         "New frontend code should use date-fns instead of moment.js", SAME),
        # Swapped sides reverse it, however each side is worded.
        ("Use pnpm instead of npm", "Use npm instead of pnpm", OPPOSITE),
        ("Never use poetry, use uv", "Never use uv; use poetry", OPPOSITE),
        ("Don't use dataclasses for API schemas, use pydantic models",
         "Never use pydantic models for API schemas; use dataclasses", OPPOSITE),
        ("Never use poetry, use uv", "Use uv instead of poetry", SAME),
        # Refusing the same thing for different choices, or for another scope, is not one
        # note: never SAME (a write would fold the second into the first).
        ("Never use npm, use pnpm", "Never use npm, use yarn", APART),
        ("Never push directly; use a PR for main. Reviews need two approvals",
         "Never push directly; use a PR for release. Reviews need two approvals", APART),
        ("Don't forget to use the staging database for load tests",
         "Don't forget to use the production database for load tests", APART),
        # A contraction whose head is no negation still negates.
        ("Database migrations can run during business hours",
         "Database migrations can't run during business hours", OPPOSITE),
        ("Use spaces for indentation in Go files",
         "Use spaces instead of tabs for indentation in Go files", SAME),
        ("Prefer Helm over Kustomize for k8s manifests",
         "Use Kustomize instead of Helm for k8s manifests", OPPOSITE),
        ("Use Alpine instead of Debian slim as the base image",
         "Use Debian slim instead of Alpine as the base image", OPPOSITE),
        ("Favor integration tests over unit tests for the API layer",
         "Favor unit tests over integration tests for the API layer", OPPOSITE),
        # Always and never on the same action; a one-word antonym.
        ("Always squash commits before merging", "Never squash commits before merging", OPPOSITE),
        ("Keep trailing commas in multi-line Python literals",
         "Remove trailing commas from multi-line Python literals", OPPOSITE),
        ("Feature branches should be deleted after merge",
         "Keep feature branches around after they are merged", OPPOSITE),
        # A contraction is its head word: "they've" is a stop word, not a changed word.
        ("Delete stale preview deployments after merge",
         "Keep preview deployments around after they've been merged", OPPOSITE),
        ("Analytics queries should go to the read replica",
         "Analytics queries must not go to the read replica", OPPOSITE),
        # Swapped multi-word commands in spans (a span is one token however many words).
        ("Use `git fetch` instead of `git pull` in CI",
         "Use `git pull` instead of `git fetch` in CI", OPPOSITE),
        ('Run "npm ci" instead of "npm install" in the pipeline',
         'Run "npm install" instead of "npm ci" in the pipeline', OPPOSITE),
        # An antonym and a negation more cancel out; an antonym among stop words still counts.
        ("Always keep trailing commas in multi-line literals",
         "Never remove trailing commas in multi-line literals", SAME),
        ("Run the database migrations before the deploy step",
         "Run the database migrations after the deploy step", OPPOSITE),
        # Negation in a flag, a code span or a quote is not the note's stance.
        ("Use `git fetch --no-tags` in the mirror job", "The mirror job fetches without tags",
         SAME),
        ("Always run pytest -x before pushing to the main branch.",
         "Before pushing to the main branch, always run pytest -x.", SAME),
        # A condition is no excuse: these still disagree.
        ("You can merge without a review", "Do not merge without a review", OPPOSITE),
        ("Do not push to main without a review",
         "Push to main directly, a review is optional", OPPOSITE),
        # A negation more is an opposition only on what the other note says. An absence the
        # other brings about with a verb agrees; an action forbidden is not a removal. On
        # something the other never mentions, the two are kept apart (neither flagged nor
        # folded).
        ("No print statements in library code", "Remove every print statement from library code",
         SAME),
        ("Never edit old migrations", "Remove old migrations", OPPOSITE),
        ("Never rename old migrations", "Delete old migrations", OPPOSITE),
        ("The worker loads its config once at boot and does not watch the file",
         "Config is read a single time when the worker starts, so restart it after edits", APART),
        ("Run the migrations before the deploy", "Don't run the migrations before the deploy",
         OPPOSITE),
        ("Expose the admin API on the internal network",
         "The admin API must not be exposed on the internal network", OPPOSITE),
        # A negated permission or need negates the whole statement; an object we cannot read
        # (it comes before "off") is read as the whole statement too.
        ("It's fine to log request bodies in staging",
         "Logging request bodies is not allowed in staging", OPPOSITE),
        ("Sign every release tag with GPG", "Release tags do not need to be GPG-signed", OPPOSITE),
        ("Caching is enabled in staging", "Staging has caching turned off", OPPOSITE),
        # A negation more on what the other negates flips that negation.
        ("Do disable or delete security checks to get a pipeline green",
         "Don't disable or delete security checks to get a pipeline green", OPPOSITE),
        # A negation of the negating verb right after it affirms: "never skip" is "always".
        ("Never skip the changelog entry for user-facing changes",
         "User-facing changes always need a changelog entry", SAME),
        ("Don't disable the query cache in staging",
         "Keep the query cache enabled in staging", SAME),
        ("Don't disable the query cache in staging", "Disable the query cache in staging",
         OPPOSITE),
        ("Never skip the changelog entry for user-facing changes",
         "Skip the changelog entry for user-facing changes", OPPOSITE),
        # ... whatever else the note negates ("not even for hotfixes"),
        ("Never skip the integration tests on release branches, not even for hotfixes",
         "Skip the integration tests on release branches, even for hotfixes", OPPOSITE),
        ("Don't disable the query cache in staging, not even for load tests",
         "Disable the query cache in staging, even for load tests", OPPOSITE),
        # ... but not across punctuation: "no, disable it" is two clauses,
        ("Verbose logging in production: no, disable it",
         "Verbose logging in production: enable it", OPPOSITE),
        ("Source maps in the production bundle: no. Disable them",
         "Source maps in the production bundle: enable them", OPPOSITE),
        # ... and every contraction's head is a particle.
        ("The query cache is not disabled in staging",
         "The query cache isn't disabled in staging", SAME),
        ("Tests shouldn't skip the lint step", "Tests wouldn't skip the lint step", SAME),
        # Another scope, number or unit: neither the same note nor its opposite.
        ("Keep log retention at 14 days", "Keep log retention at 14 weeks", APART),
        ("In the iOS app, feature flags come from Firebase Remote Config",
         "In the Android app, feature flags come from Firebase Remote Config", APART),
        ("The staging database listens on port 5432",
         "The staging database listens on port 5433", APART),
    ],
)  # fmt: skip
def test_relation(a, b, expected):
    assert stance.relation(a, b) == expected
    assert stance.relation(b, a) == expected  # the order the notes arrive in does not matter


def _add(store, text):
    return store.add(text, namespace="project:stance", type="lesson", signal="user")


def test_a_swapped_preference_is_a_contradiction_not_a_duplicate(store_path):
    """Before: the two texts have the same words, so they folded into one row and one of the
    two opposite preferences was lost."""
    with MemoryStore.open(store_path) as s:
        first = _add(s, "Use pnpm instead of npm for the web workspace")
        second = _add(s, "Use npm instead of pnpm for the web workspace")
        assert second.result == "stored" and second.contradicts == (first.id,)


def test_swapped_commands_in_backticks_are_not_folded(store_path):
    """Before: the connector was found on a re-split string whose positions were no longer the
    tokens', so both sides were misread and the second note folded into the first."""
    with MemoryStore.open(store_path) as s:
        first = _add(s, "Use `git fetch` instead of `git pull` in CI")
        second = _add(s, "Use `git pull` instead of `git fetch` in CI")
        assert second.result == "stored" and second.contradicts == (first.id,)


def test_a_flag_is_not_a_negation(store_path):
    """A flag's negation belongs to the flag: the same note again, its command in backticks or
    not, folds into the first (a reading that kept the backticked command as one opaque word
    saw another subject there and kept the two apart)."""
    with MemoryStore.open(store_path) as s:
        first = _add(s, "For WIP commits on your own branch, skip the hooks with "
                        "`git commit --no-verify`")  # fmt: skip
        again = _add(s, "For WIP commits on your own branch, skip the hooks with "
                        "git commit --no-verify")  # fmt: skip
        assert again.result == "deduped" and again.id == first.id


def test_another_scope_is_kept_apart_and_not_contested(store_path):
    with MemoryStore.open(store_path) as s:
        _add(s, "Never run load tests against the production cluster in business hours")
        other = _add(s, "Run load tests against the staging cluster in business hours")
        assert other.result == "stored" and other.contradicts == ()


def test_a_paraphrase_with_a_negation_more_is_not_contested(store_path):
    """Before: any note with one negation more than a similar one was stored as contradicting
    it, and both lost trust. Here the extra negation governs what the first note turns down
    with a verb, so the two agree. A note that really allows what a rule forbids is still a
    contradiction."""
    with MemoryStore.open(store_path) as s:
        first = _add(s, "Remove debug print calls from the payments library code before "
                        "each tagged release")  # fmt: skip
        second = _add(s, "No print calls in the payments library code before each tagged "
                         "release")  # fmt: skip
        assert second.contradicts == ()
        assert second.id == first.id or first.id in second.related
        rule = _add(s, "Do not merge a release branch without a review from the platform team")
        loose = _add(s, "You can merge a release branch without a review from the platform team")
        assert loose.result == "stored" and rule.id in loose.contradicts
        assert first.id not in loose.contradicts


@pytest.mark.parametrize(
    ("a", "b", "opposed"),
    [
        # Kept apart with a negation more: maintenance must not merge them either.
        ("The worker loads its config once at boot and does not watch the file",
         "Config is read a single time when the worker starts, so restart it after edits", True),
        ("Never run load tests against the production cluster in business hours",
         "Run load tests against the staging cluster in business hours", True),
        ("Always squash commits before merging", "Never squash commits before merging", True),
        ("Never store passwords without hashing", "Store passwords in plain text", True),
        # Another scope with the same negations, or the same note: they may merge.
        ("In the iOS app, feature flags come from Firebase Remote Config",
         "In the Android app, feature flags come from Firebase Remote Config", False),
        ("Use rg not grep -r for searching the monorepo",
         "Always use rg instead of grep -r in the monorepo", False),
    ],
)  # fmt: skip
def test_opposed_for_merging(a, b, opposed):
    assert stance.opposed_for_merging(a, b) is opposed
    assert stance.opposed_for_merging(b, a) is opposed
