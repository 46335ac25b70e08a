"""Tests for the deterministic entity extractor (zmem.capture.entities)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zmem.capture.entities import (
    BUILTIN_ALIASES,
    ENTITY_KINDS,
    EntityMention,
    extract_entities,
    normalize_alias,
    query_aliases,
)


def keys(text: str, tags: tuple[str, ...] = ()) -> list[str]:
    return [m.key for m in extract_entities(text, tags)]


def by_key(text: str, tags: tuple[str, ...] = ()) -> dict[str, EntityMention]:
    return {m.key: m for m in extract_entities(text, tags)}


# --- normalize_alias -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("  RipGrep  ", "ripgrep"),
        ("GitHub   CLI", "github cli"),
        ("`rg`", "rg"),
        ('"ripgrep".', "ripgrep"),
        ("src/zmem/store.py,", "src/zmem/store.py"),
        ("(see)", "(see)"),
        ("foo)", "foo"),
        ("MemoryStore.add:", "memorystore.add"),
        ("./scripts/run.sh;", "./scripts/run.sh"),
        ("ＦＵＬＬ", "full"),
        ("Straße", "strasse"),
        ("foo()", "foo()"),
        ("pkg:mod_name", "pkg:mod_name"),
        ("", ""),
        ("  ...  ", ""),
    ],
)
def test_normalize_alias(raw: str, expected: str) -> None:
    assert normalize_alias(raw) == expected


# --- backticked spans ------------------------------------------------------------------------


def test_backticked_identifiers_and_paths_are_other() -> None:
    found = by_key("Call `MemoryStore.add` from `src/zmem/store.py`, not `foo_bar`.")
    assert list(found) == ["memorystore.add", "src/zmem/store.py", "foo_bar"]
    assert found["memorystore.add"].name == "MemoryStore.add"
    assert {m.kind for m in found.values()} == {"other"}


def test_backticked_tool_alias_resolves_to_tool() -> None:
    (mention,) = extract_entities("Search with `rg` instead.")
    assert mention == EntityMention("tool", "ripgrep", "ripgrep", ("rg", "ripgrep"))


def test_backticked_command_yields_span_and_tool() -> None:
    found = extract_entities("Prefer `git rebase -i` over merges.")
    assert [(m.kind, m.key) for m in found] == [("other", "git rebase -i"), ("tool", "git")]
    found = extract_entities("Use `docker compose up -d` locally.")
    assert [m.key for m in found] == ["docker compose up -d", "docker compose"]


def test_backticked_ambiguous_words_count_as_tools() -> None:
    assert keys("Run `make` then `go vet`.") == ["make", "go vet", "go"]


@pytest.mark.parametrize(
    "text",
    [
        "empty `` span",
        "one char `x` span",
        "number `42` span",
        "punctuation `...` span",
        "too long `" + "a" * 81 + "` span",
        "multi-line ```\ncode\n``` fence",
        "unterminated `backtick",
    ],
)
def test_backtick_spans_skipped(text: str) -> None:
    assert extract_entities(text) == []


def test_backtick_exactly_80_chars_kept() -> None:
    assert keys("`" + "a" * 80 + "`") == ["a" * 80]


# --- paths -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Edit src/zmem/store.py first.", "src/zmem/store.py"),
        ("Run ./scripts/run.sh, then wait.", "./scripts/run.sh"),
        ("Config lives in ~/.config/zmem.", "~/.config/zmem"),
        ("Check /etc/hosts for the override.", "/etc/hosts"),
        ("Logs go to /tmp when unset.", "/tmp"),
        ("Put fixtures under tests/ please.", "tests/"),
        ("Manifests are in deploy/k8s/; apply them.", "deploy/k8s/"),
        ("Bump the version in pyproject.toml.", "pyproject.toml"),
        ("The Makefile has a lint target.", "makefile"),
        ("Build from the Dockerfile (not compose).", "dockerfile"),
        ("Scripts are declared in package.json", "package.json"),
        ("See README.md for setup.", "readme.md"),
        ("Keep secrets out of .env files.", ".env"),
        ("The bug is at src/zmem/store.py:42.", "src/zmem/store.py"),
        ("Migrations in src/zmem/db are numbered.", "src/zmem/db"),
        ("Pin versions in requirements.txt", "requirements.txt"),
        ("See lib/foo_bar for details", "lib/foo_bar"),
        ("Vendored at third_party/zlib", "third_party/zlib"),
    ],
)
def test_paths_detected(text: str, expected: str) -> None:
    found = extract_entities(text)
    assert expected in [m.key for m in found]
    assert all(m.kind == "other" for m in found if m.key == expected)


def test_path_name_keeps_original_spelling() -> None:
    (mention,) = extract_entities("Edit (src/zmem/Store.py).")
    assert mention.name == "src/zmem/Store.py"
    assert mention.key == "src/zmem/store.py"


@pytest.mark.parametrize(
    "path",
    [
        r"C:\Users\me\repo\file.py",
        r"D:\work\zmem",
        r"\\server\share\notes.md",
        r"..\sibling\setup.cfg",
    ],
)
def test_windows_paths(path: str) -> None:
    found = extract_entities(f"The file {path} is stale.")
    assert [m.name for m in found] == [path]
    assert found[0].key == normalize_alias(path)
    assert "\\" in found[0].key


@pytest.mark.parametrize(
    "text",
    [
        "See https://example.com/docs/setup.md for details.",
        "Mirror at http://localhost:8080/api/v1 only.",
        "Clone git@github.com:org/repo.git over ssh keys.",
        "About 1/2 of runs failed on 2024/01/05.",
        "We read/write the cache and/or the index.",
        "Input/output errors and client/server splits.",
        "The TCP/IP stack and the CI/CD pipeline.",
        "Ship it w/o tests, n/a for now, w/ care, and/ or not.",
        "Type /clear to reset the session.",
        "Use a c/c++ toolchain.",
        "Meet at 10 a.m. e.g. tomorrow, i.e. soon.",
        "Version 3.11.2 shipped on 12/05.",
    ],
)
def test_not_paths(text: str) -> None:
    assert [m for m in extract_entities(text) if m.kind == "other"] == []


# --- tools in prose --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Search the repo with ripgrep.", "ripgrep"),
        ("rg is faster than grep here.", "ripgrep"),
        ("Deploy to k8s via the staging cluster.", "kubernetes"),
        ("Plan with tf before applying.", "terraform"),
        ("Create the PR with gh.", "github cli"),
        ("The GitHub CLI needs a token.", "github cli"),
        ("GitHub Actions caches are per branch.", "github actions"),
        ("Connect with psql as the admin.", "postgresql"),
        ("Our pg cluster needs vacuuming.", "postgresql"),
        ("Postgres rejects the migration.", "postgresql"),
        ("Prefer golang 1.22 features.", "go"),
        ("Bundle with js modules.", "javascript"),
        ("Docker needs buildkit enabled.", "docker"),
        ("Use GNU Make 4 for grouped targets.", "make"),
        ("Run pytest with -x.", "pytest"),
        ("Ruff replaces flake8 and isort.", "ruff"),
        ("The onnxruntime wheel is large.", "onnx runtime"),
        ("Install pre-commit hooks.", "pre-commit"),
        ("Open the db with apsw.", "apsw"),
        ("Node.js 20 is required.", "node.js"),
    ],
)
def test_tools_in_prose(text: str, expected: str) -> None:
    found = by_key(text)
    assert expected in found
    assert found[expected].kind == "tool"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Run go test ./... before pushing.", "go"),
        ("Use go mod tidy after edits.", "go"),
        ("We write services in Go and Python.", "go"),
        ("Use make test to run the suite.", "make"),
        ("Always run make before committing.", "make"),
        ("Then make lint catches it.", "make"),
        ("pip install -e . fails on 3.10.", "pip"),
        ("Prefer uv run over activating venvs.", "uv"),
        ("The Black formatter wraps at 88.", "black"),
        ("Run black before committing.", "black"),
        ("Format with black src/ only.", "black"),
        ("The CLI is built with Click and rich.", "click"),
        ("Prefer React hooks over classes.", "react"),
        ("Start it with node server.js locally.", "node.js"),
        ("Edit it in vim over ssh.", "vim"),
        ("Use Helm charts for deploys.", "helm"),
        ("Property tests use Hypothesis strategies.", "hypothesis"),
        ("Lock deps with poetry lock.", "poetry"),
        ("Lint with cargo clippy.", "cargo"),
        ("Install it with brew install jq.", "homebrew"),
        ("Do it via sudo apt install curl.", "apt"),
        ("from hypothesis import given", "hypothesis"),
        ("Format it with prettier --write.", "prettier"),
    ],
)
def test_ambiguous_tools_with_context(text: str, expected: str) -> None:
    assert expected in by_key(text)


PRECISION_NEGATIVES = [
    "Let's go home after the deploy finishes.",
    "Make sure the migration is idempotent.",
    "Click the button to save your changes.",
    "React to failures quickly instead of retrying blindly.",
    "The black box approach hides too much state.",
    "I need to make a decision about caching.",
    "Go ahead and merge once the checks pass.",
    "We should go test it on staging tomorrow.",
    "Make test data deterministic by seeding the generator.",
    "The node has three children in the tree.",
    "She took the helm of the project last year.",
    "Our hypothesis is that the cache is cold.",
    "The poetry reading moved to Friday.",
    "Keep the yarn away from the cat.",
    "Let's brew some coffee before the review.",
    "That is an apt description of the bug.",
    "The cargo ship was delayed by a storm.",
    "Remove the pip from the fruit first.",
    "UV light degrades the plastic housing.",
    "He argued with vim and vigor.",
    "Black and white images compress better.",
    "Please react quickly when the pager fires.",
    "The output looks prettier but renders slower.",
    "Rust on the bolts means water got in.",
    "Said in jest, but the review took it seriously.",
    "Let's Go Home is the title of the talk.",
    "Then Click Save to persist the form.",
    "See pg 12 of the manual.",
    "Keep going until the numbers make sense.",
]


@pytest.mark.parametrize("text", PRECISION_NEGATIVES)
def test_ordinary_sentences_yield_no_entities(text: str) -> None:
    assert extract_entities(text) == []


def test_tool_not_matched_inside_other_words() -> None:
    text = "GitHub forks, node_modules, the .git dir, gitignore rules, digit, target, goal."
    assert keys(text) == ["github"]


def test_longest_alias_wins() -> None:
    assert keys("The github cli and GitHub Actions both need tokens.") == [
        "github cli",
        "github actions",
    ]


# --- alias resolution ------------------------------------------------------------------------


def test_alias_and_canonical_share_key() -> None:
    a, b, c = (extract_entities(t)[0] for t in ("Use rg.", "Use ripgrep.", "Use `rg`."))
    assert a == b == c
    assert a.key == "ripgrep"
    assert a.aliases == ("rg", "ripgrep")


@pytest.mark.parametrize(
    ("alias", "key", "name"),
    [
        ("k8s", "kubernetes", "Kubernetes"),
        ("tf", "terraform", "Terraform"),
        ("gh", "github cli", "GitHub CLI"),
        ("psql", "postgresql", "PostgreSQL"),
        ("pg", "postgresql", "PostgreSQL"),
        ("postgres", "postgresql", "PostgreSQL"),
        ("golang", "go", "Go"),
        ("js", "javascript", "JavaScript"),
    ],
)
def test_builtin_aliases(alias: str, key: str, name: str) -> None:
    (mention,) = extract_entities(f"We rely on `{alias}` daily.")
    assert (mention.kind, mention.key, mention.name) == ("tool", key, name)
    assert alias in mention.aliases and key in mention.aliases


def test_short_aliases_are_whole_words_only() -> None:
    assert keys("The tfstate, pgbouncer, and rgb values.") == []
    assert keys("pg_dump output and pg-boss queues.") == []


def test_py_and_ts_are_not_aliases() -> None:
    assert extract_entities("Store the ts column in UTC.") == []
    assert [m.kind for m in extract_entities("The `ts` field.")] == ["other"]
    assert "ts" not in by_key("TypeScript strict mode")["typescript"].aliases
    assert "py" not in by_key("Python 3.11")["python"].aliases


def test_builtin_table_is_consistent() -> None:
    assert len(BUILTIN_ALIASES) >= 60
    seen: dict[str, str] = {}
    for key, (kind, display, extra) in BUILTIN_ALIASES.items():
        assert kind in ENTITY_KINDS
        assert key == normalize_alias(display)
        for alias in (key, *map(normalize_alias, extra)):
            assert seen.setdefault(alias, key) == key, f"{alias!r} is claimed twice"


# --- tags ------------------------------------------------------------------------------------


def test_entity_tags() -> None:
    found = extract_entities(
        "",
        (
            "entity:person:Alice",
            "entity:Payments Service",
            "entity:project:zmem",
            "entity:rg",
            "entity:PREFERENCE:tabs over spaces",
            "entity:person:Black",
            "lang:python",
            "entity:",
            "entity:other:",
            "entity:weird:thing",
        ),
    )
    assert [(m.kind, m.name, m.key) for m in found] == [
        ("person", "Alice", "alice"),
        ("other", "Payments Service", "payments service"),
        ("project", "zmem", "zmem"),
        ("tool", "ripgrep", "ripgrep"),
        ("preference", "tabs over spaces", "tabs over spaces"),
        ("person", "Black", "black"),
        ("other", "weird:thing", "weird:thing"),
    ]


def test_tag_tool_kind_resolves_builtin() -> None:
    assert extract_entities("", ["entity:tool:k8s"])[0].key == "kubernetes"


# --- dedupe and order ------------------------------------------------------------------------


def test_dedupe_and_order() -> None:
    text = "Use rg in src/app.py; `ripgrep` beats grep. Then rg again in src/app.py."
    found = extract_entities(text, ["entity:rg", "entity:person:Alice", "entity:person:alice"])
    assert [m.key for m in found] == ["ripgrep", "src/app.py", "grep", "alice"]
    assert found[-1].name == "Alice"
    assert extract_entities(text) == extract_entities(text)


def test_content_precedes_tags_even_when_tag_repeats() -> None:
    assert keys("Deploy with docker.", ("entity:Docker", "entity:x-team")) == ["docker", "x-team"]


# --- query_aliases ---------------------------------------------------------------------------


def test_query_aliases_expand_tool_alias() -> None:
    aliases = query_aliases("how do I search with rg")
    assert "rg" in aliases and "ripgrep" in aliases and "search" in aliases
    assert not {"how", "do", "i", "with"} & set(aliases)


def test_query_aliases_include_phrases() -> None:
    aliases = query_aliases("github cli auth")
    assert "github cli" in aliases and "gh" in aliases
    assert "cli auth" in aliases and "auth" in aliases


def test_query_aliases_unique_and_deterministic() -> None:
    aliases = query_aliases("Rg rg RG ripgrep flags, rg flags")
    assert len(aliases) == len(set(aliases))
    assert aliases == query_aliases("Rg rg RG ripgrep flags, rg flags")
    assert aliases[:2] == ["rg", "ripgrep"]


def test_query_aliases_drop_common_words_without_context() -> None:
    assert "make" not in query_aliases("how to make the build faster")
    assert "make" in query_aliases("run make test")
    assert "uv" in query_aliases("uv lockfile")
    assert query_aliases("") == []


# --- properties ------------------------------------------------------------------------------

FRAGMENTS = [
    "rg", "go", "make", "Go", "`", "``", "/", "\\", ".", ":", "src/zmem/store.py", "C:\\x\\y.py",
    "entity:", "pip install", "k8s", "\n", " ", "the", "Black", "./", "~/", "http://", "1/2",
    "GitHub CLI", "(", ")", "'", "\u00a8", "\x00", "ß", "run", "test", "-x",
]  # fmt: skip
texts = st.one_of(
    st.text(),
    st.lists(st.sampled_from(FRAGMENTS), max_size=30).map("".join),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=5)), max_size=20).map(" ".join),
)
tags = st.lists(st.one_of(st.text(), texts.map(lambda t: "entity:" + t)), max_size=5)


@settings(max_examples=400, deadline=None)
@given(texts, tags)
def test_extract_entities_properties(text: str, tag_list: list[str]) -> None:
    found = extract_entities(text, tag_list)
    assert found == extract_entities(text, tag_list)
    assert len({m.key for m in found}) == len(found)
    for m in found:
        assert m.kind in ENTITY_KINDS
        assert m.key and m.key == normalize_alias(m.name)
        assert m.key in m.aliases
        assert list(m.aliases) == sorted(set(m.aliases))


@settings(max_examples=300, deadline=None)
@given(texts)
def test_normalize_and_query_properties(text: str) -> None:
    norm = normalize_alias(text)
    assert normalize_alias(norm) == norm
    aliases = query_aliases(text)
    assert aliases == query_aliases(text)
    assert len(aliases) == len(set(aliases))
    assert all(a and a == normalize_alias(a) for a in aliases)


@pytest.mark.parametrize("text", ["use gıt here", "run DOCKER and gıt", "KUBECTL ıs"])
def test_unicode_case_lookalikes_never_crash_extraction(text):
    # Python's IGNORECASE matches "ı" (dotless i) to "i"; casefolding keeps it, so "gıt" names
    # no tool (it used to raise KeyError).
    names = {m.name.lower() for m in extract_entities(text)}
    assert "git" not in names
    if "DOCKER" in text:
        assert "docker" in names  # the real tool beside the look-alike is still found


def test_compatibility_characters_fold_to_the_tool_they_spell():
    # NFKC maps the long s "ſ" to "s": "ſqlite3" is sqlite3, not a look-alike.
    assert [m.name for m in extract_entities("ſqlite3 files")] == ["SQLite"]


def test_a_dedup_readd_with_an_entity_tag_links_the_entity(store):
    """Found in review: the twin gained the tag but not the entity link."""
    first = store.add(
        "prefer the fast searcher for large monorepo code lookups",
        namespace="project:e",
        type="preference",
        signal="user",
    )
    again = store.add(
        "prefer the fast searcher for large monorepo code lookups",
        namespace="project:e",
        type="preference",
        signal="user",
        tags="entity:Zoekt",
    )
    assert again.result == "deduped" and again.id == first.id
    names = [e.name for e in store.entities_of(first.id)]
    assert "Zoekt" in names
    hits = store.recall("Zoekt", namespace="project:e")
    assert hits and "entity" in hits[0].lanes
