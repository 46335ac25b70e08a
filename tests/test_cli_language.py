"""One CLI language (issue 33): every command's --help walked (each option explained, data
printed with --json, ZMem's own words glossed where a page first uses them, every --namespace
saying what it means when left out, every --id saying a prefix works), the old spellings kept
working out of sight (search --text, doctor --format), the namespace derived from the
checkout by the commands that work on one, and a closed pipe ending quietly with exit 0."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from conftest import table_counts
from test_hooks import started_resident
from zmem import MemoryStore
from zmem.cli import cli
from zmem.cli.words import GLOSSARY
from zmem.hosts import sidecars

NS = "project:github.com/acme/widget"
# Commands that print no data of their own: a host's hook protocol, and two servers.
NO_DATA = {"hook": "speaks the host's protocol", "mcp": "a server", "ui": "a server",
           "completion": "a shell script"}  # fmt: skip


def _commands(group: click.Group = cli, path: tuple[str, ...] = ()):
    group.list_commands(click.Context(group))  # the root group imports its commands lazily
    for name, cmd in sorted(group.commands.items()):
        if cmd.hidden:
            continue
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, (*path, name))
        else:
            yield (*path, name), cmd


COMMANDS = list(_commands())


def _page(path: tuple[str, ...]) -> str:
    out = CliRunner().invoke(cli, [*path, "--help"], terminal_width=100)
    assert out.exit_code == 0, out.output
    return " ".join(out.output.split())


def _first_use(term: str, page: str) -> re.Match | None:
    """The first prose use of a glossary word (not inside an option or variable name)."""
    stem = re.escape(term).replace(r"\ ", r"[\s-]+")
    return re.search(rf"(?<![-\w$]){stem}(s|ed|es|ing|d)?\b", page, re.IGNORECASE)


def test_the_lazy_map_names_every_command_where_it_is_defined():
    """The root group imports a command's module when the command is asked for: the map must
    name every command the modules define, and the module that defines it."""
    from zmem.cli import ZMemGroup

    defined = {name: cmd.callback.__module__.rsplit(".", 1)[1]
               for name, cmd in cli.commands.items()}  # fmt: skip
    assert defined == ZMemGroup.lazy


def test_a_command_imports_only_its_own_module():
    code = (
        "import sys; from zmem.cli import main\n"
        "try:\n    main(['sync', '--help'])\nexcept SystemExit:\n    pass\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('zmem.cli.'))\n"
        "print(' '.join(loaded)); print('psycopg' in sys.modules, 'zmem.store.memory_store' in "
        "sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    modules, heavy = done.stdout.strip().splitlines()[-2:]
    assert "zmem.cli.hub" in modules.split() and "zmem.cli.reads" not in modules.split()
    assert heavy == "False False"


def test_the_walk_sees_every_command():
    names = {" ".join(p) for p, _ in COMMANDS}
    assert {"add", "recall", "search", "doctor", "export-pack", "queue-list", "hub join"} <= names
    assert len(names) >= 45  # 49 in December 2026: a walk that lost a group would show here


@pytest.mark.parametrize(
    "path", [p for p, _ in COMMANDS] + [()], ids=lambda p: " ".join(p) or "zmem"
)
def test_each_help_page_glosses_zmems_words_where_it_first_uses_them(path):
    page = _page(path).split(" Words: ")[0]  # the root page's list is the definitions
    for term in GLOSSARY:
        found = _first_use(term, page)
        if found is None:
            continue
        after = page[found.end() : found.end() + 2]
        # Glossed in parentheses or after a colon, right where the word first appears.
        assert re.match(r"\s?[(:]", after), (
            f"`{' '.join(path) or 'zmem'} --help` uses {term!r} before saying what it means: "
            f"...{page[max(0, found.start() - 60) : found.end() + 40]}..."
        )


def test_the_root_page_lists_the_words():
    page = _page(())
    assert "Words:" in page
    for term, meaning in GLOSSARY.items():
        assert f"{term} {' '.join(meaning.split())}" in page


@pytest.mark.parametrize(
    "path,cmd", COMMANDS, ids=lambda x: " ".join(x) if isinstance(x, tuple) else ""
)
def test_each_option_is_explained_and_spelled_one_way(path, cmd):
    visible = [p for p in cmd.params if isinstance(p, click.Option) and not p.hidden]
    for option in visible:
        assert option.help and len(option.help) > 8, f"{' '.join(path)} {option.opts} has no help"
    flags = {flag for p in visible for flag in p.opts + p.secondary_opts}
    # One spelling across the CLI: --json for JSON output, --query for what a read looks for.
    assert "--format" not in flags and "--text" not in flags, path
    assert not {f for f in flags if "json" in f and f != "--json"}, path
    name = path[-1]
    if name not in NO_DATA:
        assert "--json" in flags, f"{' '.join(path)} prints data but takes no --json"
    for option in visible:
        if option.name == "namespace" or "--namespace" in option.opts:
            text = option.help.lower()
            assert "default" in text or "required" in text or "repeat" in text, (path, text)
        if "--id" in option.opts:
            assert "prefix" in option.help or "processed" in option.help, (path, option.help)


def test_recall_help_says_how_global_rows_are_placed():
    page = _page(("recall",))
    assert "listed after" not in page  # no longer true: a clearly better global row goes first
    assert "clearly more relevant" in page and "own --global-limit slots" in page


# ---- old spellings, kept out of sight --------------------------------------------------------


@pytest.fixture
def seeded(store_path):
    with MemoryStore.open(store_path) as s:
        s.add("Run pytest -x before git push: CI takes 20 minutes.", namespace=NS,
              type="lesson", signal="test")  # fmt: skip
    return store_path


def test_search_and_recall_take_query_and_the_old_text(run_cli, seeded, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    new = run_cli("search", "--query", "pytest push", "--json")
    old = run_cli("search", "--text", "pytest push", "--json")
    assert new.exit_code == old.exit_code == 0
    assert [r["id"] for r in json.loads(new.output)["results"]] == [
        r["id"] for r in json.loads(old.output)["results"]
    ]
    assert json.loads(new.output)["count"] == 1
    recalled = run_cli("recall", "--text", "pytest before git push", "--json")
    assert recalled.exit_code == 0 and json.loads(recalled.output)["count"] >= 1
    before = table_counts(seeded)
    both = run_cli("search", "--query", "a", "--text", "b")
    assert both.exit_code == 2 and "old spelling of --query" in both.output
    missing = run_cli("recall", "--json")
    assert missing.exit_code == 2 and "Missing the query: zmem recall QUERY" in missing.output
    assert table_counts(seeded) == before


def test_doctor_json_and_its_old_format_option(run_cli, seeded, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    new = run_cli("doctor", "--json")
    old = run_cli("doctor", "--format", "json")
    assert new.exit_code == old.exit_code
    assert json.loads(new.output).keys() == json.loads(old.output).keys()
    both = run_cli("doctor", "--format", "both")
    assert "{" in both.output and both.output.lstrip()[0] != "{"  # text, then JSON
    clash = run_cli("doctor", "--json", "--format", "human")
    assert clash.exit_code == 2 and "disagree" in clash.output


# ---- --json where it was missing -------------------------------------------------------------


def test_the_commands_that_gained_json(run_cli, seeded, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pack = json.loads(run_cli("export-pack", "--namespace", NS, "--json").output)
    assert pack["namespace"] == NS and pack["shown"] == 1 and "pytest -x" in pack["text"]
    assert pack["out"] is None
    out = tmp_path / "pack.md"
    written = json.loads(
        run_cli("export-pack", "--namespace", NS, "--out", str(out), "--json").output
    )
    assert written["out"] == str(out) and written["text"] is None and "pytest -x" in out.read_text()
    dump = tmp_path / "all.jsonl"
    counts = json.loads(run_cli("export-jsonl", "--out", str(dump), "--json").output)
    assert counts["memories"] == 1 and counts["out"] == str(dump)
    lines = run_cli("export-jsonl", "--json").output.splitlines()
    assert lines and all(json.loads(x) for x in lines)  # without --out: the JSON lines
    mid = json.loads(run_cli("list", "--all-namespaces", "--json").output)[0]["id"]
    assert json.loads(run_cli("get", "--id", mid[:8], "--json").output)["id"] == mid
    fed = json.loads(run_cli("feedback", "--id", mid[:8], "--applied", "--json").output)
    assert fed["applied_count"] == 1
    home = tmp_path / "hermes"
    installed = json.loads(run_cli("hermes-install", "--hermes-home", str(home), "--json").output)
    assert installed["plugins"] == ["zmem", "zmem_hooks"] and installed["activated"] is False


# ---- the namespace a command means inside a checkout -----------------------------------------


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    repo = tmp_path / "widget"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text(
        '[core]\n\tbare = false\n[remote "origin"]\n\turl = git@github.com:acme/widget.git\n'
    )
    (repo / "src").mkdir()
    monkeypatch.chdir(repo / "src")
    return repo


def test_commands_on_one_namespace_derive_it_from_the_checkout(run_cli, seeded, isolated_env,
                                                                checkout):  # fmt: skip
    data = isolated_env / "data"
    sidecars.enqueue(data, NS, {"message": "No, use uv instead of pip.", "type": "correction"})
    listed = run_cli("queue-list", "--json")
    assert listed.exit_code == 0, listed.output
    doc = json.loads(listed.stdout)
    assert doc["namespace"] == NS and doc["count"] == 1
    pack = run_cli("export-pack")
    assert pack.exit_code == 0 and "pytest -x" in pack.stdout and NS in pack.stdout
    opened = json.loads(run_cli("episode-open", "--json").stdout)
    assert opened["namespace"] == NS
    episodes = json.loads(run_cli("episode-list", "--json").stdout)
    assert [e["id"] for e in episodes] == [opened["id"]]
    cleared = run_cli("queue-clear", "--all", "--json")
    assert json.loads(cleared.stdout) == {"namespace": NS, "removed": 1}
    assert sidecars.queue_items(data, NS) == []


def test_outside_a_checkout_they_ask_for_one_and_write_nothing(run_cli, seeded, isolated_env,
                                                              tmp_path, monkeypatch):  # fmt: skip
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    data = isolated_env / "data"
    sidecars.enqueue(data, NS, {"message": "No, use uv instead of pip.", "type": "correction"})
    before = table_counts(seeded)
    for args in (["queue-list"], ["queue-clear", "--all"], ["export-pack"], ["episode-open"]):
        done = run_cli(*args)
        assert done.exit_code == 2, (args, done.output)
        assert "not in a git checkout: pass --namespace" in done.output
        assert len(done.output.strip().splitlines()) == 1
    assert table_counts(seeded) == before
    assert len(sidecars.queue_items(data, NS)) == 1
    # A listing spans every namespace there.
    assert json.loads(run_cli("episode-list", "--json").stdout) == []


# ---- a reader that goes away -----------------------------------------------------------------


def _closed_pipe_run(
    args: list[str], env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess:
    """Run zmem with stdout a pipe nobody reads: every write to it fails with EPIPE."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "zmem", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=cwd,
            timeout=120,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize(
    "args",
    [
        ["entity-list"],
        ["list", "--all-namespaces"],
        ["recall", "--query", "billing retries", "--all-namespaces"],
        ["export-jsonl"],
        ["--help"],
        ["recall", "--help"],
    ],
    ids=lambda a: " ".join(a),
)
def test_a_closed_pipe_ends_quietly_with_exit_0(args, store_path, isolated_env, tmp_path):
    with MemoryStore.open(store_path) as s:
        for i in range(40):
            s.add(f"Service Billing{i} retries failed charges from module charge{i}.py nightly.",
                  namespace=NS, type="fact", signal="test")  # fmt: skip
    done = _closed_pipe_run(args, dict(os.environ), tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_a_closed_pipe_on_a_read_the_resident_process_answers(store_path, isolated_env, tmp_path):
    with MemoryStore.open(store_path) as s:
        for i in range(40):
            s.add(f"Deploy step {i}: run the billing migration {i} before the release.",
                  namespace=NS, type="lesson", signal="test")  # fmt: skip
    data = isolated_env / "data"
    args = ["recall", "--query", "billing migration release", "--all-namespaces", "--limit", "30"]
    with started_resident(data, ZMEM_HOOKD_IDLE_S="30"):
        done = _closed_pipe_run(args, dict(os.environ, ZMEM_HOOK_DAEMON="1"), tmp_path)
        assert done.returncode == 0 and done.stderr == "", done.stderr
        log = (data / "zmem-bg.log").read_text()
        assert "host=cli" in log and "reason=answered" in log  # the resident one answered
