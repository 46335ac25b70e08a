"""The first five minutes (issue 20): inside a git checkout a command without --namespace
means the checkout's namespace, the one the hooks derive, so a memory added by hand reaches
the prompt hook; `zmem where` says which namespace and store a directory means; an add that
will not surface in default recall says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import table_counts

REMOTE = "git@github.com:acme/webapp.git"
NS = "project:github.com/acme/webapp"


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch) -> Path:
    repo = tmp_path / "webapp"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text(f'[remote "origin"]\n\turl = {REMOTE}\n')
    (repo / "src").mkdir()
    monkeypatch.chdir(repo / "src")  # anywhere below the root
    return repo


def test_an_add_without_namespace_reaches_the_prompt_hook(run_cli, checkout, monkeypatch):
    monkeypatch.setenv("ZMEM_HOOK_DAEMON", "0")
    text = "Run the alembic migrations before the integration tests"
    added = run_cli("add", "--type", "lesson", "--signal", "test", "--content", text)
    assert added.exit_code == 0 and f"namespace {NS}" in added.stderr
    listed = json.loads(run_cli("list", "--json").stdout)
    assert [m["namespace"] for m in listed] == [NS]
    prompt = {"session_id": "s1", "cwd": str(checkout), "hook_event_name": "UserPromptSubmit",
              "prompt": "how do I run the integration tests?"}  # fmt: skip
    out = run_cli("hook", "UserPromptSubmit", "--host", "claude", input=json.dumps(prompt))
    context = json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "alembic migrations" in context


def test_reads_default_to_the_checkout_and_global(run_cli, checkout, store):
    store.add("Deploys go through the staging cluster first", namespace=NS, type="fact",
              signal="user")  # fmt: skip
    store.add("Deploys of the billing service need a ticket", namespace="project:billing",
              type="fact", signal="user")  # fmt: skip
    store.add("Prefer short commit subjects; deploys are tagged", namespace="user:global",
              type="preference", signal="user")  # fmt: skip
    got = json.loads(run_cli("recall", "--query", "deploys", "--json").stdout)
    spaces = {h["namespace"] for h in got["results"]}
    assert spaces == {NS, "user:global"}
    every = json.loads(run_cli("recall", "--query", "deploys", "--all-namespaces",
                               "--json").stdout)  # fmt: skip
    assert "project:billing" in {h["namespace"] for h in every["results"]}
    both = run_cli("recall", "--query", "x", "--all-namespaces", "--namespace", NS)
    assert both.exit_code == 2
    assert {m["namespace"] for m in json.loads(run_cli("list", "--json").stdout)} == {NS}


def test_outside_a_checkout_an_add_must_name_its_namespace(run_cli, store_path):
    result = run_cli("add", "--type", "fact", "--content", "somewhere")
    assert result.exit_code == 2 and "--namespace" in result.stderr
    assert not store_path.exists()  # nothing written, not even an empty store


def test_where(run_cli, checkout, store_path):
    doc = json.loads(run_cli("where", "--json").stdout)
    assert doc["namespace"] == NS and doc["checkout"] == str(checkout)
    assert doc["store"] == str(store_path) and doc["store_exists"] is False
    assert not store_path.exists()  # where never creates the store
    run_cli("add", "--type", "fact", "--content", "The API listens on 8080", "--signal", "user")
    text = run_cli("where").stdout
    assert NS in text and "1 in this namespace" in text


def test_where_outside_a_checkout(run_cli):
    doc = json.loads(run_cli("where", "--json").stdout)
    assert doc["namespace"] is None and doc["checkout"] is None


def test_an_add_below_the_recall_floor_says_so(run_cli, store, store_path):
    before = table_counts(store_path)
    result = run_cli("add", "--namespace", "project:t", "--type", "lesson",
                     "--content", "Maybe the cache is flaky", "--json")  # fmt: skip
    warnings = json.loads(result.stdout)["warnings"]
    assert [w["type"] for w in warnings] == ["below_recall_floor"]
    assert warnings[0]["confidence"] == 0.2 and warnings[0]["floor"] == 0.25
    assert table_counts(store_path)["memory"] == before["memory"] + 1  # stored all the same
    text = run_cli("add", "--namespace", "project:t", "--type", "lesson",
                   "--content", "Another unsure thought about retries")  # fmt: skip
    assert "under the recall floor" in text.stderr and "--signal" in text.stderr
    grounded = run_cli("add", "--namespace", "project:t", "--type", "lesson", "--signal", "test",
                       "--content", "Retries need a jittered backoff", "--json")  # fmt: skip
    assert json.loads(grounded.stdout)["warnings"] == []


def test_help_explains_every_command_and_option(run_cli):
    import click

    from zmem.cli import cli
    from zmem.hosts.events import HOST_EVENTS

    commands = run_cli("--help").stdout.split("Commands:")[1]
    assert "..." not in commands  # every one-liner whole
    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        cmd = cli.get_command(ctx, name)
        assert cmd.help, name
        missing = [p.opts for p in cmd.params if isinstance(p, click.Option) and not p.help]
        assert missing == [], name
        assert run_cli(name, "--help").exit_code == 0
    hook_help = run_cli("hook", "--help").stdout
    for host, names in HOST_EVENTS.items():
        assert all(e in hook_help for e in names), host


SCRIPTS = Path(__file__).resolve().parents[1] / "src/zmem/plugin/skills/memory/scripts"


def _base_python() -> str:
    import sys

    base = Path(sys.base_prefix) / "bin" / "python3"
    return str(base if base.exists() else sys.executable)


@pytest.mark.parametrize("how", ["base-python", "executed"])
def test_the_store_shim_runs_from_any_python(how, tmp_path, store_path):
    import subprocess

    script = SCRIPTS / "store.py"
    cmd = [_base_python(), str(script)] if how == "base-python" else [str(script)]
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([*cmd, "where", "--json"], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["store"] == str(store_path)
    # The re-run's guard variable never reaches ZMem as a setting.
    doctor = subprocess.run([_base_python(), str(SCRIPTS / "doctor.py"), "--format", "json"],
                            capture_output=True, text=True, env=env, timeout=60,
                            check=False)  # fmt: skip
    settings = json.loads(doctor.stdout)["checks"][0]
    assert "ZMEM_SHIM_REEXEC" not in settings.get("set", [])


def test_the_store_shim_says_what_is_missing(tmp_path):
    import subprocess

    env = dict(__import__("os").environ, ZMEM_SHIM_REEXEC="1")  # as after a failed re-run
    env.pop("PYTHONPATH", None)
    done = subprocess.run(["/usr/bin/env", "-i", f"PATH={env['PATH']}", "ZMEM_SHIM_REEXEC=1",
                           _base_python(), str(SCRIPTS / "store.py"), "where"],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    if done.returncode == 0:
        pytest.skip("the base interpreter can run ZMem itself")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "ZMEM_PYTHON" in done.stderr


def test_one_model_copy_for_every_data_dir(tmp_path, monkeypatch):
    from zmem.embedding import model_files

    monkeypatch.delenv("ZMEM_MODEL_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    a, b = tmp_path / "a", tmp_path / "b"
    shared = tmp_path / "xdg" / "zmem" / "models"
    assert model_files.models_dir(a) == model_files.models_dir(b) == shared
    monkeypatch.setenv("ZMEM_MODEL_DIR", str(tmp_path / "mine"))
    assert model_files.models_dir(a) == tmp_path / "mine"
    (b / "models").mkdir(parents=True)  # built by a release before the shared cache
    assert model_files.models_dir(b) == b / "models"


def test_the_first_model_build_is_announced_once(tmp_path, monkeypatch):
    """In fresh processes (this one may hold a loaded model already): the first command that
    needs the model says it is building it; a command of another data dir reuses it."""
    import os
    import subprocess
    import sys

    from zmem.embedding import profiles, weights

    if not profiles.runtime_available() or weights.source_files() is None:
        pytest.skip("no MiniLM runtime or weights here")
    env = dict(os.environ, ZMEM_MODEL_DIR=str(tmp_path / "fresh-models"),
               ZMEM_EMBED_PROFILE="minilm")  # fmt: skip

    def add(data: str, text: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "zmem", "add", "--namespace", "project:t", "--type", "fact",
             "--signal", "user", "--content", text],
            env=dict(env, ZMEM_DATA=str(tmp_path / data), ZMEM_STORE=str(tmp_path / f"{data}.db")),
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    first = add("one", "The build cache lives in /var/cache/ci")
    assert first.returncode == 0 and first.stderr.count("building the MiniLM model") == 1
    assert any((tmp_path / "fresh-models").glob("minilm-*.onnx"))
    again = add("two", "The deploy key rotates monthly")
    assert again.returncode == 0 and "building the MiniLM model" not in again.stderr


def test_doctor_names_the_checkout_namespace_by_default(run_cli, checkout):
    report = json.loads(run_cli("doctor", "--format", "json").stdout)
    (ns,) = [c for c in report["checks"] if c["check"] == "namespace"]
    assert ns["status"] == "ok" and ns["namespace"] == NS


def test_zmem_model_reports_builds_and_downloads(run_cli, tmp_path, monkeypatch):
    import hashlib

    from zmem.embedding import model_files, profiles, weights

    if not profiles.runtime_available() or weights.source_files() is None:
        pytest.skip("no MiniLM runtime or weights here")
    monkeypatch.setenv("ZMEM_MODEL_DIR", str(tmp_path / "m1"))
    absent = run_cli("model", "--json")
    assert absent.exit_code == 1 and json.loads(absent.stdout)["verified"] is False
    built = run_cli("model", "--build")
    assert built.exit_code == 0 and "built-from-weights, verified" in built.stdout
    # An install without the weights downloads the pinned export instead; here the "remote"
    # is a file:// copy of the build, pinned to its own hash.
    blob = next((tmp_path / "m1").glob("minilm-*.onnx")).read_bytes()
    remote = tmp_path / "remote.onnx"
    remote.write_bytes(blob)
    monkeypatch.setattr(model_files, "OFFICIAL_MODEL_URL", remote.as_uri())
    monkeypatch.setattr(model_files, "OFFICIAL_MODEL_SHA256", hashlib.sha256(blob).hexdigest())
    monkeypatch.setattr(model_files, "OFFICIAL_MODEL_SIZE", len(blob))
    monkeypatch.setattr(model_files, "OFFICIAL_TOKENIZER_URL",
                        weights.source_files().tokenizer.as_uri())  # fmt: skip
    monkeypatch.setenv("ZMEM_MODEL_DIR", str(tmp_path / "m2"))
    got = run_cli("model", "--download", "--json")
    assert got.exit_code == 0 and json.loads(got.stdout)["source"] == "official-export"
    monkeypatch.setattr(model_files, "OFFICIAL_MODEL_SHA256", "0" * 64)
    monkeypatch.setenv("ZMEM_MODEL_DIR", str(tmp_path / "m3"))
    refused = run_cli("model", "--download")
    assert refused.exit_code == 2 and "refused" in refused.stderr
    assert not any((tmp_path / "m3").glob("*.onnx"))
    assert run_cli("model", "--build", "--download").exit_code == 2
