"""Hostile input through the real CLI, table-driven: every bad argument list is refused with one
stderr line and its documented exit code (docs/cli.md), and the store's bytes are unchanged;
no traceback ever reaches the user. Hypothesis then throws arbitrary argument lists and query
text at the read commands."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
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
        (("add", "--namespace", NS, "--content", "no type"), 2),
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
