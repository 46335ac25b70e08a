"""Hostile input through the real CLI, table-driven: every bad argument list is refused with one
stderr line and its documented exit code (docs/cli.md), and the store's bytes are unchanged;
no traceback ever reaches the user. Hypothesis then throws arbitrary argument lists and query
text at the read commands."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zmem import MemoryStore
from zmem.cli import cli

HUGE = "99999999999999999999"
MISSING = "00000000-0000-4000-8000-000000000000"
NS = "project:hostile"


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    """A store with two live rows (fake embeddings, its own data dir for the whole module),
    closed so its bytes are all in the main file."""
    root = tmp_path_factory.mktemp("hostile")
    path = root / "store.sqlite"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ZMEM_EMBED_PROFILE", "fake")
        mp.setenv("ZMEM_DATA", str(root))
        with MemoryStore.open(path) as s:
            a = s.add("Run pytest -x before pushing", namespace=NS, type="lesson", signal="test")
            b = s.add("The deploy target is fly.io", namespace=NS, type="fact", signal="user")
        yield path, a.id, b.id


def _bytes(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# The cases are built before the store exists (pytest names them at collection), so a live row's
# id is written as LIVE and substituted when a case runs.
LIVE = "{live-id}"


def _cases() -> list[tuple[tuple[str, ...], int]]:
    """(argument list, exit code)."""
    a = LIVE
    out: list[tuple[tuple[str, ...], int]] = []
    q = ("--query", "pytest")
    # Integers out of range (the 20-digit ones used to overflow SQLite with a traceback).
    for cmd, base in (
        ("recall", q),
        ("search", ("--text", "pytest")),
        ("recent", ()),
        ("list", ()),
    ):
        for value in (HUGE, "0", "-1", "1e3", "five", "", "100001"):
            out.append(((cmd, *base, "--limit", value), 2))
    for cmd, base in (("recall", q), ("search", ("--text", "x")), ("recent", ())):
        for value in (HUGE, "-1", "x"):
            out.append(((cmd, *base, "--global-limit", value), 2))
    for value in (HUGE, "-1", "2", "x"):
        out.append((("recall", *q, "--link-hops", value), 2))
    for value in (HUGE, "-5", "x"):
        out.append((("recall", *q, "--link-budget", value), 2))
    for value in ("1.5", "-0.1", "nan", "x", "1e999"):
        out.append((("recall", *q, "--min-confidence", value), 2))
        out.append((("recent", "--min-confidence", value), 2))
    # Empty and malformed queries, instants and namespaces.
    for query in ("", "   ", "\t\n"):
        out.append((("recall", "--query", query), 2))
        out.append((("search", "--text", query), 2))
    for instant in (
        "yesterday",
        "2026-13-01",
        "2026-02-30",
        "0999-01-01",
        "9999-12-31T23:00-05:00",
    ):
        out.append((("recall", *q, "--as-of", instant), 2))
        out.append((("list", "--as-of", instant), 2))
    for ns in ("", " ", "\t"):
        out.append((("recall", *q, "--namespace", ns), 2))
        out.append((("search", "--text", "x", "--namespace", ns), 2))
    # Writes with bad values: refused before anything is written.
    add = ("add", "--namespace", NS, "--type", "fact")
    out += [
        ((*add, "--content", ""), 2),
        ((*add, "--content", "   "), 2),
        ((*add, "--content", "x" * 70000), 2),
        ((*add, "--content", "\x07\x1b[2J\x1b]0;pwned\x07"), 2),
        ((*add, "--content", "\x00\x08\x7f"), 2),
        ((*add, "--content", "ok", "--signal", "maybe"), 2),
        ((*add, "--content", "ok", "--taint", "evil"), 2),
        ((*add, "--content", "ok", "--confidence", "2"), 2),
        ((*add, "--content", "ok", "--confidence", "nan"), 2),
        ((*add, "--content", "ok", "--capture-mode", "yolo"), 2),
        ((*add, "--content", "ok", "--source-ref", "no-scheme-here"), 2),
        ((*add, "--content", "ok", "--source-ref", "db:onlytable"), 2),
        ((*add, "--content", "ok", "--source-ref", "http://evil.example"), 2),
        ((*add, "--content", "ok", "--source-ref", "https://evil.example/x"), 2),
        ((*add, "--content", "ok", "--source-ref", "javascript:alert(1)"), 2),
        ((*add, "--content", "ok", "--source-ref", "file:../../../../etc/shadow"), 2),
        ((*add, "--content", "ok", "--source-ref", "file:notes.md"), 2),
        ((*add, "--content", "ok", "--source-ref", "file://host/share/x"), 2),
        ((*add, "--content", "ok", "--source-ref", "session:abc\x07def"), 2),
        ((*add, "--content", "ok", "--source-ref", "x:" + "y" * 5000), 2),
        (("add", "--namespace", "user:glbal", "--type", "fact", "--content", "ok"), 2),
        (("add", "--namespace", "", "--type", "fact", "--content", "ok"), 2),
        (("add", "--namespace", "n" * 300, "--type", "fact", "--content", "ok"), 2),
        (("add", "--namespace", "project:a b", "--type", "fact", "--content", "ok"), 2),
        (("add", "--namespace", "project:", "--type", "fact", "--content", "ok"), 2),
        (("add", "--namespace", "foo", "--type", "fact", "--content", "ok"), 2),
        (
            ("add", "--namespace", "project:../../etc/passwd", "--type", "fact", "--content", "ok"),
            2,
        ),
        (("add", "--namespace", "project:a//b", "--type", "fact", "--content", "ok"), 2),
        (("add", "--namespace", "project:a/./b", "--type", "fact", "--content", "ok"), 2),
        (("add", "--namespace", "project:repo/", "--type", "fact", "--content", "ok"), 2),
        (("add", "--namespace", ":repo", "--type", "fact", "--content", "ok"), 2),
        (("add", "--namespace", "Project:repo", "--type", "fact", "--content", "ok"), 2),
        (("add", "--namespace", "project:a\x85b", "--type", "fact", "--content", "ok"), 2),
        (("add", "--namespace", NS, "--type", "rumour", "--content", "ok"), 2),
        (("add", "--namespace", NS), 2),  # nothing to remember
        (("add", "--namespace", NS, "--content", "twice", "once more"), 2),  # text given twice
        (("update", "--id", MISSING, "--content", "new"), 2),
        (("update", "--id", a, "--content", ""), 2),
        (("update", "--id", a, "--content", "ok", "--confidence", "-1"), 2),
        (("invalidate", "--id", a), 2),
        (("invalidate", "--id", a, "--reason", "   "), 2),
        (("invalidate", "--id", MISSING, "--reason", "gone"), 1),
        (("supersede", "--id", MISSING), 1),
        (("get", "--id", MISSING), 1),
        (("get", "--id", "zz"), 1),
        (("links", "--id", MISSING), 1),
        (("links", "--add", "--id", a, "--id", a, "--relation", "related"), 2),
        (("links", "--add", "--id", a, "--id", MISSING, "--relation", "related"), 1),
        (("links", "--add", "--id", a, "--relation", "related"), 2),
        (("links", "--add", "--id", a, "--id", MISSING, "--relation", "hates"), 2),
        (("links", "--add", "--id", a, "--id", MISSING, "--relation", "supports"), 2),
        (
            ("links", "--add", "--id", a, "--id", MISSING, "--relation", "related", "--score", "5"),
            2,
        ),
        (("contradict", "--id", a, "--id", MISSING, "--reason", "x"), 1),
        (("entity-merge", "--from", "e1", "--to", "e1"), 2),
        (("entity-merge", "--from", "nope", "--to", "nada"), 2),
        (("entity-list", "--kind", "planet"), 2),
        (("recall",), 2),
        (("search",), 2),
        (("nonsense-command",), 2),
        (("recall", *q, "--no-such-flag"), 2),
    ]
    return out


def _ids(case: tuple[tuple[str, ...], int]) -> str:
    args, code = case
    text = " ".join(a if len(a) < 24 else a[:20] + "..." for a in args)
    return f"{code}:{text}"


CASES = _cases()


def test_the_table_is_large_enough():
    assert len(CASES) >= 100


@pytest.mark.parametrize("case", CASES, ids=[_ids(c) for c in CASES])
def test_a_bad_input_is_refused_with_one_line_and_writes_nothing(seeded, case):
    path, live, _ = seeded
    args, code = case
    args = tuple(live if a == LIVE else a for a in args)
    before = _bytes(path)
    result = CliRunner().invoke(cli, ["--store", str(path), *args])
    assert result.exit_code == code, (result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("zmem: error: "), result.stderr
    assert "Traceback" not in result.output
    assert _bytes(path) == before


# ---- stores that are not stores, and stores that are not there ------------------------------


READS = (
    ("stats",),
    ("recall", "--query", "x"),
    ("list",),
    ("recent",),
    ("search", "--text", "x"),
    ("reembed", "--dry-run"),
)


@pytest.mark.parametrize("args", READS, ids=lambda a: a[0])
def test_a_read_of_a_missing_store_creates_nothing(tmp_path, args, monkeypatch):
    monkeypatch.setenv("ZMEM_EMBED_PROFILE", "fake")
    store = tmp_path / "missing" / "dir" / "s.sqlite"
    result = CliRunner().invoke(cli, ["--store", str(store), *args])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        f"zmem: error: no store at {store} yet: nothing has been stored there "
        "(`zmem add` creates it)"
    ]
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize(
    "args", [*READS, ("add", "--namespace", NS, "--type", "fact", "--content", "x")]
)
def test_an_empty_store_file_is_refused_never_replaced(tmp_path, args, monkeypatch):
    monkeypatch.setenv("ZMEM_EMBED_PROFILE", "fake")
    store = tmp_path / "store.sqlite"
    store.write_bytes(b"")
    result = CliRunner().invoke(cli, ["--store", str(store), *args])
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "is an empty file (0 bytes)" in line and "backup" in line
    assert store.read_bytes() == b""
    assert not store.with_name("store.sqlite-wal").exists()


def test_a_damaged_store_is_one_line_not_a_traceback(tmp_path, monkeypatch):
    """Pages overwritten after a checkpoint: reads and writes say the store is damaged and name
    the fix, with the store's bytes as they were."""
    import random

    monkeypatch.setenv("ZMEM_EMBED_PROFILE", "fake")
    monkeypatch.setenv("ZMEM_DATA", str(tmp_path))
    store = tmp_path / "store.sqlite"
    with MemoryStore.open(store) as s:
        for i in range(300):
            s.add(f"lesson {i}: run the linter on module {i}", namespace=NS, type="lesson")
    raw = bytearray(store.read_bytes())
    rnd = random.Random(3)
    for page in rnd.sample(range(2, len(raw) // 4096), 6):
        raw[page * 4096 : (page + 1) * 4096] = rnd.randbytes(4096)
    store.write_bytes(bytes(raw))
    refused = 0
    for args in (*READS, ("add", "--namespace", NS, "--type", "fact", "--content", "new fact")):
        before = _bytes(store)
        result = CliRunner().invoke(cli, ["--store", str(store), *args])
        assert "Traceback" not in result.output
        if result.exit_code == 0:
            continue  # every page this command touched was intact
        refused += 1
        lines = result.stderr.strip().splitlines()
        assert result.exit_code == 2, result.output
        assert len(lines) == 1, result.output
        assert "damaged" in lines[0] or "cannot use store" in lines[0], lines[0]
        assert _bytes(store) == before
    assert refused  # six random pages of a 300-row store: something reads one of them


# ---- arbitrary input -------------------------------------------------------------------------


TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=60)
ARG = st.one_of(
    TEXT,
    st.sampled_from(["--limit", "--as-of", "--namespace", "--global-limit", "--min-confidence"]),
    st.integers(-(10**25), 10**25).map(str),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    cmd=st.sampled_from(["recall", "search", "recent", "list", "get", "links"]),
    rest=st.lists(ARG, max_size=6),
)
def test_arbitrary_arguments_never_raise_a_traceback(seeded, cmd, rest):
    path, _, _ = seeded
    result = CliRunner().invoke(cli, ["--store", str(path), cmd, *rest])
    assert result.exit_code in (0, 1, 2), (result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit)
    if result.exit_code:
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(query=st.text(max_size=200))
def test_any_query_text_is_answered_or_refused_in_one_line(seeded, query):
    path, _, _ = seeded
    result = CliRunner().invoke(cli, ["--store", str(path), "search", "--text", query, "--json"])
    assert result.exit_code in (0, 2), (result.output, result.exception)
    if result.exit_code == 2:
        assert len(result.stderr.strip().splitlines()) == 1


def test_control_characters_and_escapes_are_stripped_before_storing(tmp_path, monkeypatch):
    monkeypatch.setenv("ZMEM_EMBED_PROFILE", "fake")
    monkeypatch.setenv("ZMEM_DATA", str(tmp_path))
    store = tmp_path / "store.sqlite"
    text = "nul\x00 bel\x07 \x1b[31mred\x1b[0m \x1b]0;title\x07tab\tkept\nline two"
    result = CliRunner().invoke(
        cli,
        ["--store", str(store), "add", "--namespace", NS, "--type", "fact", "--content", "-"],
        input=text,
    )
    assert result.exit_code == 0, result.output
    assert "removed 5 control character(s) or escape sequence(s)" in result.stderr
    with MemoryStore.open(store) as s:
        (row,) = s.list()
    assert row.content == "nul bel red tab\tkept\nline two"


# ---- ids: any unambiguous prefix, everywhere --------------------------------------------------


@pytest.fixture
def twins(tmp_path, monkeypatch):
    """A store whose first two rows share an 8-character id prefix (as recall prints it)."""
    import uuid

    monkeypatch.setenv("ZMEM_EMBED_PROFILE", "fake")
    monkeypatch.setenv("ZMEM_DATA", str(tmp_path))
    made = iter(
        [
            uuid.UUID("abcdef12-0000-4000-8000-000000000001"),
            uuid.UUID("abcdef12-0000-4000-8000-000000000002"),
            uuid.UUID("12345678-0000-4000-8000-000000000003"),
        ]
    )
    real = uuid.uuid4
    monkeypatch.setattr(uuid, "uuid4", lambda: next(made, None) or real())
    store = tmp_path / "store.sqlite"
    with MemoryStore.open(store) as s:
        for text in ("the api listens on 8080", "the api is written in go", "ci runs on arm64"):
            s.add(text, namespace=NS, type="fact", signal="user")
    return store


def _run(store: Path, *args: str):
    return CliRunner().invoke(cli, ["--store", str(store), *args])


@pytest.mark.parametrize(
    "args",
    [
        ("get", "--id", "abcdef12"),
        ("links", "--id", "abcdef12"),
        ("update", "--id", "abcdef12", "--content", "x"),
        ("invalidate", "--id", "abcdef12", "--reason", "x"),
        ("supersede", "--id", "abcdef12"),
        ("contradict", "--id", "abcdef12", "--id", "12345678", "--reason", "x"),
        ("links", "--add", "--id", "12345678", "--id", "abcdef12", "--relation", "related"),
    ],
    ids=lambda a: a[0] + ("-add" if "--add" in a else ""),
)
def test_an_ambiguous_prefix_is_refused_listing_the_candidates(twins, args):
    before = _bytes(twins)
    result = _run(twins, *args)
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert "is ambiguous" in line
    assert "abcdef12-0000-4000-8000-000000000001" in line
    assert "abcdef12-0000-4000-8000-000000000002" in line
    assert _bytes(twins) == before


def test_every_id_command_takes_an_unambiguous_prefix(twins):
    one, three = "abcdef12-0000-4000-8000-000000000001", "12345678-0000-4000-8000-000000000003"
    assert json_of(_run(twins, "get", "--id", f"  {one.upper()} "))["id"] == one
    assert json_of(_run(twins, "get", "--id", "1234"))["id"] == three
    linked = _run(twins, "links", "--add", "--id", "1234", "--id", one, "--relation", "related")
    assert linked.exit_code == 0, linked.output
    assert (
        _run(twins, "contradict", "--id", "12345678", "--id", one, "--reason", "r").exit_code == 0
    )
    updated = _run(
        twins, "update", "--id", "ABCDEF12-0000-4000-8000-000000000001", "--content", "8081"
    )
    assert updated.exit_code == 0, updated.output
    assert _run(twins, "invalidate", "--id", "1234567", "--reason", "moved to x86").exit_code == 0
    with MemoryStore.open(twins) as s:
        assert not s.get(three).live and s.get(three).supersede_reason == "moved to x86"
        assert not s.get(one).live
    gone = _run(twins, "supersede", "--id", "ffff")
    assert gone.exit_code == 1 and "no memory with id ffff" in gone.stderr


def json_of(result) -> dict:
    import json

    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# ---- corruption: every shape, through the CLI and through the hooks -------------------------


def _corrupt(store: Path, kind: str) -> None:
    import random

    rnd = random.Random(11)
    if kind == "zero-bytes":
        store.write_bytes(b"")
    elif kind == "truncated":
        store.write_bytes(store.read_bytes()[: 3 * 4096 + 100])
    elif kind == "random-pages":
        raw = bytearray(store.read_bytes())
        for page in rnd.sample(range(1, len(raw) // 4096), 8):
            raw[page * 4096 : (page + 1) * 4096] = rnd.randbytes(4096)
        store.write_bytes(bytes(raw))
    elif kind == "garbage-wal":
        store.with_name(store.name + "-wal").write_bytes(rnd.randbytes(64 * 1024))
    elif kind == "text-file":
        store.write_text("my notes, not a database\n" * 40)
    elif kind == "directory":
        store.unlink()
        store.mkdir()
        (store / "x").write_text("x")


CORRUPTIONS = ("zero-bytes", "truncated", "random-pages", "garbage-wal", "text-file", "directory")


@pytest.fixture
def built(tmp_path, monkeypatch):
    monkeypatch.setenv("ZMEM_EMBED_PROFILE", "fake")
    monkeypatch.setenv("ZMEM_DATA", str(tmp_path / "data"))
    store = tmp_path / "data" / "store.sqlite"
    with MemoryStore.open(store) as s:
        for i in range(200):
            s.add(
                f"lesson {i}: run the linter before pushing module {i}",
                namespace=NS,
                type="lesson",
                signal="test",
            )
    return store


@pytest.mark.parametrize("kind", CORRUPTIONS)
def test_the_cli_answers_any_corruption_in_one_line(built, kind):
    _corrupt(built, kind)
    for args in (*READS, ("add", "--namespace", NS, "--type", "fact", "--content", "fresh fact")):
        result = CliRunner().invoke(cli, ["--store", str(built), *args])
        assert "Traceback" not in result.output
        assert result.exception is None or isinstance(result.exception, SystemExit), result.output
        if result.exit_code:
            assert result.exit_code == 2, (args, result.output)
            assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    if kind == "zero-bytes":
        assert built.read_bytes() == b""  # refused, never started over


# Stores that cannot be read at all: the hook must say reason=error and print nothing. The other
# two may still be readable where it matters (SQLite ignores a WAL whose header is garbage; the
# overwritten pages may not be on the query's path), and then injecting is the right answer.
UNREADABLE = ("zero-bytes", "truncated", "text-file", "directory")


def _launch(event: str, store: Path, cwd: Path) -> tuple[subprocess.CompletedProcess, float]:
    """The launcher as hosts run it, with no resident process, timed."""
    body = {"session_id": "s1", "cwd": str(cwd), "prompt": "run the linter before pushing?"}
    env = dict(os.environ, ZMEM_HOOK_DAEMON="0", ZMEM_STORE=str(store))
    launcher = Path(__file__).resolve().parents[1] / "src/zmem/plugin/hooks/zmem_hook.py"
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-S", str(launcher), event, "--host", "claude"],
        input=json.dumps(body).encode(),
        capture_output=True,
        env=env,
        timeout=30,
    )
    return done, time.monotonic() - t0


@pytest.mark.parametrize("kind", CORRUPTIONS)
@pytest.mark.parametrize("event", ["SessionStart", "UserPromptSubmit"])
def test_every_hook_fails_open_on_a_corrupt_store(built, tmp_path, kind, event):
    """Exit 0, nothing on stderr, within the deadline, one log line with the decision; from a
    store that cannot be read, no output at all. The checkout derives the namespace the
    lessons live in, and the intact store does inject them, so silence means the store."""
    project = tmp_path / "hostile"  # derives project:hostile, the lessons' namespace
    project.mkdir()
    intact, _ = _launch(event, built, project)
    assert b"lesson" in intact.stdout
    _corrupt(built, kind)
    done, elapsed = _launch(event, built, project)
    assert done.returncode == 0 and done.stderr == b""
    assert elapsed < 8.0  # the SessionStart deadline; a prompt's is 3 s of the verb's time
    last = (built.parent / "zmem-bg.log").read_text().splitlines()[-1]
    assert f"event={event}" in last and "reason=" in last
    if kind in UNREADABLE:
        assert done.stdout == b"" and "reason=error" in last, last
    elif done.stdout:
        json.loads(done.stdout)  # whatever it prints is the host's envelope, whole


def test_a_busy_store_exits_3_with_nothing_written(built, monkeypatch):
    """Another session holds the write lock past the busy timeout: one line, exit 3 (run it
    again), distinct from 1 (the target is gone)."""
    import apsw

    from zmem.db import connect as connect_mod

    monkeypatch.setattr(connect_mod, "BUSY_TIMEOUT_MS", 200)
    holder = apsw.Connection(str(built))
    holder.execute("BEGIN IMMEDIATE")
    try:
        add = ("add", "--namespace", NS, "--type", "fact", "--content", "written while locked")
        result = CliRunner().invoke(cli, ["--store", str(built), *add])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert result.exit_code == 3, result.output
    (line,) = result.stderr.strip().splitlines()
    assert "is busy" in line and "run the command again" in line
    with MemoryStore.open(built) as s:
        assert not any("written while locked" in m.content for m in s.list())


def test_an_unexpected_error_is_one_line_and_exit_4(built, monkeypatch):
    from zmem.store.memory_store import MemoryStore as Store

    def broken(self, **kw):
        raise RuntimeError("a bug")

    monkeypatch.setattr(Store, "stats", broken)
    result = CliRunner().invoke(cli, ["--store", str(built), "stats"])
    assert result.exit_code == 4
    assert result.stderr.strip().splitlines() == [
        "zmem: error: internal error (RuntimeError: a bug); this is a bug in zmem: "
        "ZMEM_DEBUG=1 shows the traceback"
    ]
    monkeypatch.setenv("ZMEM_DEBUG", "1")
    result = CliRunner().invoke(cli, ["--store", str(built), "stats"])
    assert isinstance(result.exception, RuntimeError)  # the traceback is let through


def test_a_bad_link_score_names_the_option(seeded):
    path, a, b = seeded
    args = ["links", "--add", "--id", a, "--id", b, "--relation", "related", "--score", "5"]
    result = CliRunner().invoke(cli, ["--store", str(path), *args])
    assert result.exit_code == 2
    assert result.stderr.strip() == "zmem: error: --score 5.0 must be between 0 and 1"


# ---- the second reliability round (issue 34): records past SQLite's ranges, odd fields ------


def _export_row(tmp_path: Path, monkeypatch) -> tuple[Path, dict]:
    """A store with one row, and that row as export-jsonl writes it."""
    monkeypatch.setenv("ZMEM_EMBED_PROFILE", "fake")
    store = tmp_path / "store.sqlite"
    with MemoryStore.open(store) as s:
        s.add("The CI runner uses Python 3.11 for every job", namespace=NS, type="fact",
              signal="test")  # fmt: skip
    out = tmp_path / "e.jsonl"
    assert (
        CliRunner()
        .invoke(cli, ["--store", str(store), "export-jsonl", "--out", str(out)])
        .exit_code
        == 0
    )
    return store, json.loads(out.read_text().splitlines()[0])


def _variant(row: dict, n: int, **fields) -> dict:
    return {**row, "id": f"hostile-{n}", "content": f"Row {n}: widget{n} talks to gadget{n * 13}",
            **fields}  # fmt: skip


BAD_RECORDS = {
    "counter past int64": {"retrieval_count": 2**63},
    "counter at int64 max": {"surfaced_count": 2**63 - 1},
    "counter past a double's integers": {"applied_count": 2**53},
    "negative counter": {"violated_count": -1},
    "zero-width space in the namespace": {"namespace": "project:hostile\u200bx"},
    "bidi mark in the namespace": {"namespace": "project:\u202ehostile"},
    "valid_from in 9999": {"valid_from": "9999-12-31T23:59:59Z"},
    "ingestion_ts in 9999": {"ingestion_ts": "9999-12-31T23:59:59Z"},
    "a time before 1970": {"last_retrieved": "1969-12-31T23:59:59Z"},
    "valid_until before valid_from": {
        "valid_from": "2026-11-02T00:00:00Z",
        "valid_until": "2026-11-01T00:00:00Z",
        "superseded_at": "2026-11-03T00:00:00Z",
        "supersede_reason": "retired",
    },
}


@pytest.mark.parametrize("name", list(BAD_RECORDS))
def test_ingest_refuses_a_record_outside_the_ranges(name, tmp_path, monkeypatch):
    store, row = _export_row(tmp_path, monkeypatch)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(_variant(row, 1, **BAD_RECORDS[name])) + "\n")
    before = _bytes(store)
    result = CliRunner().invoke(cli, ["--store", str(store), "ingest-jsonl", "--in", str(bad)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.stderr.strip().splitlines()[-1].startswith("zmem: error: no line of")
    assert _bytes(store) == before


def test_a_bad_record_does_not_cost_the_good_one_beside_it(tmp_path, monkeypatch):
    store, row = _export_row(tmp_path, monkeypatch)
    mixed = tmp_path / "mixed.jsonl"
    good = _variant(row, 1)
    mixed.write_text(
        json.dumps(good) + "\n" + json.dumps(_variant(row, 2, retrieval_count=2**63)) + "\n"
    )
    result = CliRunner().invoke(
        cli, ["--store", str(store), "ingest-jsonl", "--in", str(mixed), "--json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["inserted"] == 1 and report["malformed"] == 1
    assert report["errors"] == [
        {"line": 2, "error": "retrieval_count must be an integer from 0 to 9007199254740991"}
    ]
    with MemoryStore.open(store) as s:
        assert s.get("hostile-1").content == good["content"]


def test_a_counter_at_the_top_stays_an_integer_through_recall_and_export(tmp_path, monkeypatch):
    """The largest count ingest takes survives a bump as an integer, and another machine's
    ingest takes the export back (issue 34: 2^63 - 1 became a REAL)."""
    store, row = _export_row(tmp_path, monkeypatch)
    top = tmp_path / "top.jsonl"
    top.write_text(json.dumps(_variant(row, 1, retrieval_count=2**53 - 1)) + "\n")
    assert (
        CliRunner().invoke(cli, ["--store", str(store), "ingest-jsonl", "--in", str(top)]).exit_code
        == 0
    )
    args = ["recall", "--query", "widget1 gadget13", "--all-namespaces", "--json"]
    recall = CliRunner().invoke(cli, ["--store", str(store), *args])
    assert recall.exit_code == 0 and "hostile-1" in recall.stdout
    out = tmp_path / "again.jsonl"
    CliRunner().invoke(cli, ["--store", str(store), "export-jsonl", "--out", str(out)])
    again = [json.loads(x) for x in out.read_text().splitlines() if '"hostile-1"' in x][0]
    assert again["retrieval_count"] == 2**53 - 1 and type(again["retrieval_count"]) is int
    other = tmp_path / "other.sqlite"
    done = CliRunner().invoke(
        cli, ["--store", str(other), "ingest-jsonl", "--in", str(out), "--json"]
    )
    assert done.exit_code == 0 and json.loads(done.stdout)["malformed"] == 0


def test_a_blank_ingest_file_is_refused_and_creates_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("ZMEM_EMBED_PROFILE", "fake")
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n  \n\n")
    store = tmp_path / "new" / "store.sqlite"
    result = CliRunner().invoke(cli, ["--store", str(store), "ingest-jsonl", "--in", str(blank)])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"zmem: error: {blank} holds no record (it is empty or blank); nothing was written"
    ]
    assert not store.exists()


# ---- snapshots a restore must refuse ---------------------------------------------------------


@pytest.mark.parametrize("damage", ["schema 99", "no meta table", "empty meta", "claims v12"])
def test_restore_refuses_a_snapshot_this_build_cannot_open(damage, tmp_path, monkeypatch):
    import sqlite3

    monkeypatch.setenv("ZMEM_EMBED_PROFILE", "fake")
    monkeypatch.setenv("ZMEM_DATA", str(tmp_path / "data"))
    store = tmp_path / "store.sqlite"
    with MemoryStore.open(store) as s:
        s.add("The CI runner uses Python 3.11", namespace=NS, type="fact", signal="test")
    snap = tmp_path / "snap.sqlite"
    with MemoryStore.open(store) as s:
        pass
    import shutil

    shutil.copyfile(store, snap)
    conn = sqlite3.connect(snap)
    conn.execute({"schema 99": "UPDATE meta SET value = '99' WHERE key = 'schema_version'",
            "no meta table": "DROP TABLE meta",
            "empty meta": "DELETE FROM meta",
            # a v13 file that says v12: migration 13 fails on it (its tables exist)
            "claims v12": "UPDATE meta SET value = '12' WHERE key = 'schema_version'",
        }[damage])  # fmt: skip
    conn.commit()
    conn.close()
    before = _bytes(store)
    result = CliRunner().invoke(
        cli, ["--store", str(store), "restore", "--from", str(snap), "--force"]
    )
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert "nothing touched" in line
    assert "v99" in line or "no schema version" in line or "cannot be opened by this zmem" in line
    assert _bytes(store) == before
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".partial-")]
    assert not (tmp_path / "backups").exists()  # no prerestore copy: nothing was to be undone
    assert CliRunner().invoke(cli, ["--store", str(store), "stats"]).exit_code == 0


def test_restore_migrates_an_older_snapshot_before_it_swaps(tmp_path, monkeypatch):
    """The staged copy is opened as this build opens a store: a v8 snapshot (migrations 1-8,
    as a store of that release holds them) is brought up to date there, then swapped in, and
    the restored store serves every command."""
    import apsw

    from zmem.db.migrate import SCHEMA_VERSION, load_migrations

    monkeypatch.setenv("ZMEM_EMBED_PROFILE", "fake")
    monkeypatch.setenv("ZMEM_DATA", str(tmp_path / "data"))
    store = tmp_path / "store.sqlite"
    with MemoryStore.open(store) as s:
        s.add("The CI runner uses Python 3.11", namespace=NS, type="fact", signal="test")
    snap = tmp_path / "snap-v8.sqlite"
    conn = apsw.Connection(str(snap))
    for m in load_migrations()[:8]:
        conn.execute(m.sql)
        if m.step:
            m.step(conn)
    conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '8')")
    conn.close()
    result = CliRunner().invoke(
        cli, ["--store", str(store), "restore", "--from", str(snap), "--force", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["prerestore"]  # the store it replaced is kept
    conn = apsw.Connection(str(store))
    version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    conn.close()
    assert version == (str(SCHEMA_VERSION),)
    assert CliRunner().invoke(cli, ["--store", str(store), "stats"]).exit_code == 0
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".partial-")]


# ---- a read-only filesystem and a full disk, made for real -----------------------------------


@contextlib.contextmanager
def _tmpfs(folder: Path, *, size: str, read_only: bool = False) -> Iterator[Path]:
    """A small tmpfs at `folder` (root only); skipped, with the reason, where none can be
    mounted."""
    folder.mkdir(parents=True, exist_ok=True)
    options = f"{'ro,' if read_only else ''}size={size}"
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root; this run is not root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)


@pytest.fixture
def filled(tmp_path, monkeypatch):
    """A store of some hundred KB and a verified snapshot of it."""
    monkeypatch.setenv("ZMEM_EMBED_PROFILE", "fake")
    monkeypatch.setenv("ZMEM_DATA", str(tmp_path / "data"))
    store = tmp_path / "store.sqlite"
    with MemoryStore.open(store) as s:
        for i in range(80):
            s.add(f"Fact {i}: service alpha{i} calls beta{i * 3} over gRPC with retries",
                  namespace=NS, type="fact", signal="test")  # fmt: skip
    snap = tmp_path / "snap"
    done = CliRunner().invoke(cli, ["--store", str(store), "backup", "--out-dir", str(snap)])
    assert done.exit_code == 0, done.output
    return store, next(snap.glob("store-*.sqlite"))


def _refused_cleanly(store: Path, args: list[str], *, where: Path, why: str) -> None:
    before = _bytes(store)
    result = CliRunner().invoke(cli, ["--store", str(store), *args])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("zmem: error: cannot ") and why in line and "Traceback" not in line
    assert "nothing was written" in line
    assert _bytes(store) == before
    for folder in {where, store.parent}:
        left = [p.name for p in folder.iterdir() if p.name.startswith(".")]
        assert left == [], f"partial files left in {folder}: {left}"


WRITERS = {
    "backup": lambda out, snap: ["backup", "--out-dir", str(out)],
    "restore": lambda out, snap: ["restore", "--from", str(snap), "--force", "--out-dir", str(out)],
    "export-jsonl": lambda out, snap: ["export-jsonl", "--out", str(out / "e.jsonl")],
    "export-pack": lambda out, snap: ["export-pack", "--namespace", NS, "--out", str(out / "p.md")],
}


@pytest.mark.parametrize("command", list(WRITERS))
def test_output_to_a_read_only_filesystem_is_one_line(command, filled, tmp_path):
    store, snap = filled
    with _tmpfs(tmp_path / "ro", size="1m", read_only=True) as ro:
        _refused_cleanly(store, WRITERS[command](ro, snap), where=ro,
                         why="is on a read-only filesystem")  # fmt: skip


@pytest.mark.parametrize("command", list(WRITERS))
def test_output_to_a_full_disk_is_one_line_and_leaves_no_partial_file(command, filled, tmp_path):
    store, snap = filled
    with _tmpfs(tmp_path / "full", size="64k") as full:
        # Filled to the last block, so even the pack (a few KB) cannot be written.
        subprocess.run(["dd", "if=/dev/zero", f"of={full / 'ballast'}", "bs=4k"],
                       capture_output=True)  # fmt: skip
        _refused_cleanly(store, WRITERS[command](full, snap), where=full,
                         why="no space is left on the device")  # fmt: skip
        assert [p.name for p in full.iterdir()] == ["ballast"]


def test_restore_onto_a_full_disk_leaves_the_store_and_no_partial(filled, tmp_path, monkeypatch):
    """The store's own folder is full: the staged copy cannot be made; the store is untouched
    and nothing is left beside it."""
    store, snap = filled
    with _tmpfs(tmp_path / "home", size="2m") as home:
        here = home / "store.sqlite"
        here.write_bytes(store.read_bytes())
        subprocess.run(["dd", "if=/dev/zero", f"of={home / 'ballast'}", "bs=4k"],
                       capture_output=True)  # fmt: skip
        before = _bytes(here)
        args = ["restore", "--from", str(snap), "--force", "--out-dir", str(tmp_path / "keep")]
        result = CliRunner().invoke(cli, ["--store", str(here), *args])
        assert result.exit_code == 2, result.output
        (line,) = result.stderr.strip().splitlines()
        assert "no space is left on the device" in line
        assert _bytes(here) == before
        assert sorted(p.name for p in home.iterdir()) == ["ballast", "store.sqlite"]


# ---- secrets: the unlabeled AWS key, and what manual ingest keeps -----------------------------

# Assembled at run time: no realistic credential literal lives in the repository.
AWS_ID = "AKIA" + "Z7Q2X9W4E1R8T5Y3"
AWS_SECRET = "Qw8" + ("aB3dE5gH7jK9mN1pQ2rS4tU6vW8xY0zC" * 2)[:35] + "+Z"


def test_an_unlabeled_aws_secret_key_is_redacted_in_auto_mode_and_never_exported(
    tmp_path, monkeypatch
):
    store, row = _export_row(tmp_path, monkeypatch)
    text = f"AWS creds for the deploy user: {AWS_ID} / {AWS_SECRET}"
    added = CliRunner().invoke(cli, ["--store", str(store), "add", "--namespace", NS, "--type",
                                     "fact", "--capture-mode", "auto", "--content", text,
                                     "--json"])  # fmt: skip
    assert added.exit_code == 0, added.output
    assert json.loads(added.stdout)["warnings"][0] == {"type": "redacted", "count": 2}
    # The same text arriving through ingest in auto mode: redacted there too.
    file = tmp_path / "in.jsonl"
    file.write_text(json.dumps(_variant(row, 1, content=text.replace("deploy", "ci"))) + "\n")
    done = CliRunner().invoke(cli, ["--store", str(store), "ingest-jsonl", "--in", str(file),
                                    "--capture-mode", "auto", "--json"])  # fmt: skip
    assert done.exit_code == 0 and json.loads(done.stdout)["redacted"] == 1
    dump = tmp_path / "out.jsonl"
    CliRunner().invoke(cli, ["--store", str(store), "export-jsonl", "--out", str(dump)])
    pack = CliRunner().invoke(cli, ["--store", str(store), "export-pack", "--namespace", NS])
    for out in (dump.read_text(), pack.stdout):
        assert AWS_SECRET not in out and AWS_ID not in out
        assert "[REDACTED:aws_secret_key_unlabeled]" in out


def test_manual_ingest_reports_the_secrets_it_keeps_as_add_does(tmp_path, monkeypatch):
    store, row = _export_row(tmp_path, monkeypatch)
    rows = [_variant(row, n, content=f"Row {n} deploy creds {AWS_ID} / {AWS_SECRET} host{n}")
            for n in range(1, 4)]  # fmt: skip
    rows.append(_variant(row, 9))  # no secret
    file = tmp_path / "in.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = CliRunner().invoke(cli, ["--store", str(store), "ingest-jsonl", "--in", str(file),
                                    "--json"])  # fmt: skip
    assert done.exit_code == 0, done.output
    report = json.loads(done.stdout)
    assert report["inserted"] == 4 and report["secret_warnings"] == 3 and report["redacted"] == 0
    text = CliRunner().invoke(cli, ["--store", str(store), "ingest-jsonl", "--in", str(file)])
    assert "look like they hold a secret" in text.stdout
