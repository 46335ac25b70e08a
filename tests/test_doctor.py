"""`doctor` through its real entry points (`zmem doctor` in-process, skills/memory/scripts/doctor.py
in a subprocess): every check's ok and warn/fail paths that can be set up here, the output
formats and exit codes, and that it writes nothing: not the store, not the data dir, not HOME."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

from conftest import add_row
from zmem import MemoryStore
from zmem.db.migrate import load_migrations
from zmem.doctor import base, embedding_checks, store_checks
from zmem.embedding import model_files, profiles, weights

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "src" / "zmem" / "plugin"
SCRIPT = PLUGIN / "skills" / "memory" / "scripts" / "doctor.py"
CHECKS = (
    "settings", "store-path", "store-location", "python", "sqlite", "windows-shell",
    "store-access", "schema", "lineage", "entities", "links", "episode-tables", "mcp-token",
    "embeddings", "native-memory", "data-dir", "namespace", "host-surfaces", "claude-plugin",
    "host-wiring", "codex-hooks", "hub",
)  # fmt: skip
HOST_VARS = (
    "CLAUDE_CONFIG_DIR", "CODEX_HOME", "CLAUDE_CODE_DISABLE_AUTO_MEMORY", "CLAUDE_PLUGIN_DATA",
    "PLUGIN_DATA", "CLAUDE_CODE_GIT_BASH_PATH", "HERMES_HOME", "ZMEM_ZCODE_SETTINGS",
)  # fmt: skip


@pytest.fixture(autouse=True)
def home(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake HOME: the developer's own ~/.claude, ~/.codex and ~/.zmem never leak in."""
    path = isolated_env / "home"
    path.mkdir()
    monkeypatch.setenv("HOME", str(path))
    for var in HOST_VARS:
        monkeypatch.delenv(var, raising=False)
    return path


def doctor(run_cli, *args: str) -> tuple[int, dict, dict[str, dict]]:
    result = run_cli("doctor", "--format", "json", *args)
    doc = json.loads(result.output)
    return result.exit_code, doc, {c["check"]: c for c in doc["checks"]}


def make_store(path: Path, rows: int = 2) -> list[str]:
    ids = []
    with MemoryStore.open(path) as s:
        for i in range(rows):
            ids.append(add_row(s, f"use ripgrep rg, not grep, in the zmem repo ({i})").id)
    return ids


def raw(path: Path) -> apsw.Connection:
    return apsw.Connection(str(path))


def snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            if p.is_file():
                data = p.read_bytes()
                out[str(p)] = (len(data), p.stat().st_mtime_ns, hashlib.sha256(data).hexdigest())
            else:
                out[str(p)] = (-1, 0, "dir")
    return out


# ---- the report itself ---------------------------------------------------------------------


def test_fresh_install_reports_every_check_and_creates_nothing(run_cli, store_path, home):
    code, doc, checks = doctor(run_cli)
    assert code == 0 and doc["ok"] is True
    assert tuple(checks) == CHECKS
    for c in doc["checks"]:
        assert c["status"] in ("ok", "warn", "fail", "n/a")
        assert isinstance(c["detail"], str) and c["detail"] and "\n" not in c["detail"]
    assert sum(doc["summary"].values()) == len(CHECKS)
    assert checks["schema"]["status"] == "n/a"
    for name in ("lineage", "entities", "links", "episode-tables"):
        assert checks[name]["status"] == "n/a" and checks[name]["detail"] == "no store yet"
    assert checks["store-access"]["status"] == "ok" and checks["store-access"]["creatable"]
    assert checks["native-memory"]["status"] == "n/a"  # no ~/.claude or ~/.codex here
    assert checks["namespace"]["status"] == "n/a"
    assert not store_path.exists() and not (store_path.parent / "data").exists()


def test_formats_and_exit_codes(run_cli, store_path):
    human = run_cli("doctor")
    assert human.exit_code == 0
    lines = human.output.splitlines()
    assert len(lines) == len(CHECKS) + 1
    assert lines[3].startswith("[ok  ] python: ") and lines[-1].startswith("doctor: no check")
    both = run_cli("doctor", "--format", "both")
    head, _, tail = both.output.partition("\n{")
    assert head.splitlines() == lines and json.loads("{" + tail)["ok"] is True
    assert run_cli("doctor", "--format", "xml").exit_code == 2
    assert run_cli("doctor", "--project", str(store_path.parent / "nowhere")).exit_code == 2
    assert run_cli("doctor", "--repo-root", str(store_path.parent / "nowhere")).exit_code == 2
    store_path.write_bytes(b"not a database at all" * 100)
    failed = run_cli("doctor")
    assert failed.exit_code == 1 and failed.output.splitlines()[-1].startswith("doctor: problems")


def test_script_shim_runs_and_inspects_its_own_root(store_path, home):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--format", "json"],
        capture_output=True,
        timeout=120,
        env={**os.environ, "HOME": str(home)},
    )
    assert done.returncode == 0, done.stderr
    checks = {c["check"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["host-surfaces"]["root"] == str(PLUGIN)
    assert checks["host-surfaces"]["status"] == "ok"


# ---- settings, path, location, access --------------------------------------------------------


def test_settings_refusal_fails_but_every_other_check_still_runs(run_cli, monkeypatch):
    monkeypatch.setenv("ZMEM_EMBED_PROFILE", "bogus")
    code, doc, checks = doctor(run_cli)
    assert code == 1 and checks["settings"]["status"] == "fail"
    assert "ZMEM_EMBED_PROFILE" in checks["settings"]["detail"] and tuple(checks) == CHECKS
    monkeypatch.setenv("ZMEM_EMBED_PROFILE", "fake")
    monkeypatch.setenv("ZMEM_LINK_THRESHOLD", "abc")
    code, _, checks = doctor(run_cli)
    assert code == 0 and checks["settings"]["status"] == "warn"
    assert "ZMEM_LINK_THRESHOLD" in checks["settings"]["set"]


def test_store_path_source_and_split_brain(run_cli, store_path, isolated_env, home, monkeypatch):
    _, _, checks = doctor(run_cli)
    c = checks["store-path"]
    assert c["status"] == "ok" and c["source"] == "ZMEM_STORE" and c["path"] == str(store_path)
    # A second store where a process without ZMEM_STORE would look.
    make_store(isolated_env / "data" / "store.sqlite", rows=1)
    _, _, checks = doctor(run_cli)
    c = checks["store-path"]
    assert c["status"] == "warn" and "split-brain" in c["detail"]
    assert c["others"] == [str(isolated_env / "data" / "store.sqlite")]
    # The default ~/.zmem store counts too, and --store is reported as the source.
    (isolated_env / "data" / "store.sqlite").unlink()
    make_store(home / ".zmem" / "store.sqlite", rows=1)
    result = run_cli("--store", str(store_path), "doctor", "--format", "json")
    c = {x["check"]: x for x in json.loads(result.output)["checks"]}["store-path"]
    assert c["source"] == "--store" and c["others"] == [str(home / ".zmem" / "store.sqlite")]


def test_store_path_warns_when_claude_hook_env_points_elsewhere(
    run_cli, home, tmp_path, monkeypatch
):
    (home / ".claude").mkdir()
    settings = {"env": {"ZMEM_DATA": str(tmp_path / "elsewhere")}}
    (home / ".claude" / "settings.json").write_text(json.dumps(settings))
    # ZMEM_STORE (inherited by the hooks too) still names the same store: only the data dir
    # (core.md, the correction queue, the log) splits.
    _, _, checks = doctor(run_cli)
    c = checks["store-path"]
    assert c["status"] == "warn" and "keep core.md/queue in" in c["detail"]
    monkeypatch.delenv("ZMEM_STORE")
    _, _, checks = doctor(run_cli)
    c = checks["store-path"]
    assert c["status"] == "warn" and "its hooks use" in c["detail"]
    assert c["host_settings"] == {
        str(home / ".claude" / "settings.json"): str(tmp_path / "elsewhere" / "store.sqlite")
    }
    (home / ".claude" / "settings.json").write_text(json.dumps({"env": {"OTHER": "1"}}))
    _, _, checks = doctor(run_cli)
    assert checks["store-path"]["status"] == "ok"


def test_store_location_synced_and_network_paths(run_cli, tmp_path, monkeypatch):
    _, _, checks = doctor(run_cli)
    assert checks["store-location"]["status"] == "ok"
    monkeypatch.setenv("ZMEM_STORE", str(tmp_path / "OneDrive - Acme" / "zmem" / "store.sqlite"))
    _, _, checks = doctor(run_cli)
    c = checks["store-location"]
    assert c["status"] == "warn" and c["synced"] and "OneDrive" in c["detail"]
    mounts = tmp_path / "mounts"
    share = tmp_path / "net share"
    share.mkdir()
    escaped = str(share).replace(" ", "\\040")
    mounts.write_text(f"/dev/sda1 / ext4 rw 0 0\nfiler:/vol {escaped} nfs4 rw 0 0\n")
    monkeypatch.setattr(store_checks, "MOUNTS", str(mounts))
    monkeypatch.setenv("ZMEM_STORE", str(share / "store.sqlite"))
    _, _, checks = doctor(run_cli)
    c = checks["store-location"]
    assert c["status"] == "warn" and c["fstype"] == "nfs4" and "network" in c["detail"]
    monkeypatch.setenv("ZMEM_STORE", str(tmp_path / "local" / "store.sqlite"))
    _, _, checks = doctor(run_cli)
    assert checks["store-location"] | {"detail": ""} == {
        "check": "store-location", "status": "ok", "detail": "", "synced": False, "fstype": "ext4",
    }  # fmt: skip


def test_store_access_paths(run_cli, store_path, tmp_path, monkeypatch):
    make_store(store_path)
    _, _, checks = doctor(run_cli)
    assert checks["store-access"]["status"] == "ok" and checks["store-access"]["writable"]
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("ZMEM_STORE", str(blocker / "sub" / "store.sqlite"))
    code, _, checks = doctor(run_cli)
    assert code == 1 and checks["store-access"]["status"] == "fail"
    assert not checks["store-access"]["creatable"]
    monkeypatch.setenv("ZMEM_STORE", str(tmp_path))
    code, _, checks = doctor(run_cli)
    assert code == 1 and "is a directory" in checks["store-access"]["detail"]


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads everything")
def test_read_only_store_warns(run_cli, store_path):
    make_store(store_path)
    store_path.chmod(0o444)
    try:
        _, _, checks = doctor(run_cli)
    finally:
        store_path.chmod(0o644)
    assert checks["store-access"]["status"] == "warn"


# ---- runtime -------------------------------------------------------------------------------


def test_python_and_sqlite_floors(run_cli, monkeypatch):
    import zmem.doctor as doctor_pkg

    _, _, checks = doctor(run_cli)
    assert checks["python"]["status"] == "ok" and "floor 3.11" in checks["python"]["detail"]
    assert checks["sqlite"]["status"] == "ok" and checks["sqlite"]["fts5"] is True
    monkeypatch.setattr(doctor_pkg, "PYTHON_FLOOR", (99, 0))
    monkeypatch.setattr(apsw, "compile_options", ())
    code, _, checks = doctor(run_cli)
    assert code == 1 and checks["python"]["status"] == "fail"
    assert checks["sqlite"]["status"] == "fail" and checks["sqlite"]["fts5"] is False


def test_windows_shell(run_cli, tmp_path, monkeypatch):
    _, _, checks = doctor(run_cli)
    assert checks["windows-shell"]["status"] == "n/a"
    monkeypatch.setattr(base, "windows", lambda: True)
    monkeypatch.setattr(store_checks, "_windows_remote", lambda path: False)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    for var in ("ProgramFiles", "ProgramFiles(x86)", "LOCALAPPDATA"):
        monkeypatch.delenv(var, raising=False)
    code, _, checks = doctor(run_cli)
    assert code == 1 and checks["windows-shell"]["status"] == "fail"
    for name in ("node", "bash"):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    code, _, checks = doctor(run_cli)
    c = checks["windows-shell"]
    assert code == 0 and c["status"] == "ok" and c["bash"] == str(bin_dir / "bash")
    (bin_dir / "node").unlink()
    _, _, checks = doctor(run_cli)
    assert checks["windows-shell"]["status"] == "warn" and checks["windows-shell"]["node"] is None
    monkeypatch.setenv("CLAUDE_CODE_GIT_BASH_PATH", str(tmp_path / "missing" / "bash.exe"))
    _, _, checks = doctor(run_cli)
    assert checks["windows-shell"]["status"] == "fail"


# ---- the schema surfaces -------------------------------------------------------------------


def test_healthy_v14_store(run_cli, store_path):
    a, b, _ = make_store(store_path, rows=3)
    with MemoryStore.open(store_path) as s:
        s.contradict(a, b, reason="they disagree")
    conn = raw(store_path)
    conn.execute(
        "INSERT INTO episode (id, namespace, started_at) VALUES ('e1', 'project:t', '2026-01-01')"
    )
    conn.execute(
        "INSERT INTO episode_memory (episode_id, memory_id, added_at) VALUES ('e1', ?, '2026')",
        (a,),
    )
    conn.close()
    code, _, checks = doctor(run_cli)
    assert code == 0
    assert checks["schema"]["status"] == "ok" and checks["schema"]["version"] == 15
    assert checks["schema"]["open_mode"] == "immutable"
    assert checks["lineage"]["status"] == "ok" and checks["lineage"]["missing"] == []
    ent = checks["entities"]
    assert ent["status"] == "ok" and ent["counts"]["entity"] >= 1
    assert ent["counts"]["memory_entity"] >= 3
    links = checks["links"]
    assert links["status"] == "ok" and links["by_relation"]["contradicts"] == 2
    assert links["trust"]["min"] == pytest.approx(0.9) and links["trust"]["max"] == 1.0
    assert "trust_score in [0.9, 1]" in links["detail"]
    eps = checks["episode-tables"]
    assert eps["status"] == "ok" and eps["counts"] == {"episodes": 1, "open": 1, "memberships": 1}


def test_store_held_open_is_read_as_a_wal_reader(run_cli, store_path, store):
    add_row(store, "a row the open connection wrote")
    _, _, checks = doctor(run_cli)
    assert checks["schema"]["open_mode"] == "wal-reader"
    assert checks["lineage"]["superseded"] == 0


def test_corrupt_store_fails_and_is_left_untouched(run_cli, store_path):
    store_path.write_bytes(b"garbage " * 512)
    before = store_path.read_bytes()
    code, doc, checks = doctor(run_cli)
    assert code == 1 and doc["ok"] is False
    assert checks["schema"]["status"] == "fail" and "cannot read" in checks["schema"]["detail"]
    for name in ("lineage", "entities", "links", "episode-tables"):
        assert checks[name]["status"] == "n/a" and "could not be read" in checks[name]["detail"]
    assert store_path.read_bytes() == before
    assert sorted(p.name for p in store_path.parent.iterdir() if "store" in p.name) == [
        "store.sqlite"
    ]


def test_newer_schema_fails_unless_allowed(run_cli, store_path, monkeypatch):
    make_store(store_path)
    conn = raw(store_path)
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.close()
    code, _, checks = doctor(run_cli)
    assert code == 1 and checks["schema"]["status"] == "fail"
    assert "newer than this client" in checks["schema"]["detail"]
    monkeypatch.setenv("ZMEM_ALLOW_NEWER_SCHEMA", "1")
    code, _, checks = doctor(run_cli)
    assert code == 0 and checks["schema"]["status"] == "warn"


def test_older_store_warns_and_is_not_migrated(run_cli, store_path):
    conn = raw(store_path)
    for m in load_migrations()[:8]:
        conn.execute(m.sql)
        if m.step:
            m.step(conn)
    conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '8')")
    conn.close()
    code, _, checks = doctor(run_cli)
    assert code == 0 and checks["schema"]["status"] == "warn" and checks["schema"]["version"] == 8
    assert checks["lineage"]["status"] == "n/a" and "migration 9" in checks["lineage"]["detail"]
    assert checks["entities"]["status"] == "n/a" and checks["links"]["status"] == "n/a"
    assert checks["episode-tables"]["status"] == "n/a"
    conn = raw(store_path)
    version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert version == ("8",) and conn.execute("PRAGMA user_version").fetchone() == (0,)
    conn.close()


def test_missing_surfaces_fail(run_cli, store_path):
    make_store(store_path)
    conn = raw(store_path)
    conn.execute("ALTER TABLE memory DROP COLUMN taint")
    conn.execute("DROP TABLE episode_memory")
    conn.execute("DROP TABLE memory_entity")
    conn.close()
    code, _, checks = doctor(run_cli)
    assert code == 1
    assert checks["lineage"]["status"] == "fail" and checks["lineage"]["missing"] == ["taint"]
    assert checks["entities"]["status"] == "fail"
    assert checks["entities"]["missing"] == ["memory_entity"]
    assert checks["episode-tables"]["status"] == "fail"
    conn = raw(store_path)
    conn.execute("DROP TABLE memory_link")
    conn.close()
    _, _, checks = doctor(run_cli)
    assert checks["links"]["status"] == "fail" and checks["links"]["missing"] == ["memory_link"]


def test_trust_score_outside_range_fails(run_cli, store_path):
    make_store(store_path)
    conn = raw(store_path)
    conn.execute("PRAGMA ignore_check_constraints = ON")
    conn.execute("UPDATE memory SET trust_score = 1.5 WHERE rid = 1")
    conn.close()
    code, _, checks = doctor(run_cli)
    links = checks["links"]
    assert code == 1 and links["status"] == "fail" and links["trust"]["out_of_range"] == 1
    assert "outside [0,1]" in links["detail"]


def test_vacuous_entities_and_pending_backfill_warn(run_cli, store_path):
    make_store(store_path, rows=store_checks.ENTITY_MIN_LIVE)
    conn = raw(store_path)
    conn.execute("DELETE FROM memory_entity")
    conn.close()
    code, _, checks = doctor(run_cli)
    assert code == 0 and checks["entities"]["status"] == "warn"
    assert (
        "vacuous" in checks["entities"]["detail"] and "entity-list" in checks["entities"]["detail"]
    )
    conn = raw(store_path)
    conn.execute("INSERT INTO meta (key, value) VALUES ('backfill:entities', '1')")
    conn.close()
    _, _, checks = doctor(run_cli)
    assert checks["entities"]["status"] == "warn" and checks["entities"]["backfill_pending"]


# ---- MCP token -----------------------------------------------------------------------------


def test_mcp_token_is_not_applicable_without_a_server(run_cli, monkeypatch):
    # An install without the zmem[mcp] extra.
    monkeypatch.setattr(embedding_checks, "_mcp_server_present", lambda: False)
    _, _, checks = doctor(run_cli)
    c = checks["mcp-token"]
    assert c["status"] == "n/a" and c["mcp_server"] is False
    monkeypatch.setenv("ZMEM_MCP_TOKEN", "s3cret-operator-token")
    result = run_cli("doctor", "--format", "both")
    assert "s3cret" not in result.output and "nothing reads it" in result.output


@pytest.mark.parametrize(
    ("file_text", "status", "unscoped"),
    [
        (None, "ok", False),
        ("bare-token-value", "warn", True),
        ('{"token": "tok-value"}', "warn", True),
        ('{"token": "tok-value", "namespaces": null}', "warn", True),
        ('{"token": "tok-value", "namespaces": ["project:zmem", "user:global"]}', "ok", False),
        ('{"token": "tok-value", "namespaces": []}', "fail", None),
        ('{"token": "tok-value", "namespaces": ["global"]}', "fail", None),
        ('{"token": "tok-value", ', "fail", None),
    ],
)
def test_mcp_token_scope(run_cli, tmp_path, monkeypatch, file_text, status, unscoped):
    monkeypatch.setattr(embedding_checks, "_mcp_server_present", lambda: True)
    if file_text is not None:
        (tmp_path / "token.json").write_text(file_text)
        monkeypatch.setenv("ZMEM_MCP_TOKEN_FILE", str(tmp_path / "token.json"))
    result = run_cli("doctor", "--format", "both")
    assert "tok-value" not in result.output and "bare-token-value" not in result.output
    _, _, checks = doctor(run_cli)
    c = checks["mcp-token"]
    assert c["status"] == status and c.get("unscoped_token") is unscoped
    if status == "ok" and file_text:
        assert c["namespaces"] == ["project:zmem", "user:global"]


def test_mcp_server_is_present_in_this_install(run_cli):
    assert embedding_checks._mcp_server_present()
    _, _, checks = doctor(run_cli)
    assert checks["mcp-token"]["status"] == "ok" and checks["mcp-token"]["unscoped_token"] is False


def test_env_token_is_always_unscoped(run_cli, tmp_path, monkeypatch):
    monkeypatch.setattr(embedding_checks, "_mcp_server_present", lambda: True)
    monkeypatch.setenv("ZMEM_MCP_TOKEN", "s3cret-operator-token")
    scoped = {"token": "t", "namespaces": ["project:zmem"]}
    (tmp_path / "token.json").write_text(json.dumps(scoped))
    monkeypatch.setenv("ZMEM_MCP_TOKEN_FILE", str(tmp_path / "token.json"))
    result = run_cli("doctor", "--format", "both")
    assert "s3cret" not in result.output
    _, _, checks = doctor(run_cli)
    assert checks["mcp-token"]["status"] == "warn" and checks["mcp-token"]["unscoped_token"]
    assert "ZMEM_MCP_TOKEN is an unscoped operator token" in checks["mcp-token"]["detail"]


# ---- embeddings ----------------------------------------------------------------------------


def health(checks: dict[str, dict]) -> dict:
    return checks["embeddings"]["embeddings_health"]


def test_fake_profile_on_a_temporary_store_is_fine(run_cli, store_path):
    make_store(store_path)
    _, _, checks = doctor(run_cli)
    h = health(checks)
    assert checks["embeddings"]["status"] == "ok", checks["embeddings"]["detail"]
    assert h["profile"] == "fake" and h["dim"] == 16 and h["temporary_store"]
    assert h["fake_profile_warning"] is False and h["checksum_ok"] is None
    assert h["store"] == {"committed_profile": "fake", "committed_dim": 16}
    assert h["vectors_by_model"] == {"fake-16": 2} and h["hash_cache"] == "memory"


def test_fake_profile_on_a_non_temporary_store_warns(run_cli, store_path, tmp_path, monkeypatch):
    import tempfile

    make_store(store_path)
    elsewhere = tmp_path / "system-tmp"
    elsewhere.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(elsewhere))
    code, _, checks = doctor(run_cli)
    assert code == 0 and checks["embeddings"]["status"] == "warn"
    assert health(checks)["fake_profile_warning"] is True
    assert "fake profile on a non-temporary store" in checks["embeddings"]["detail"]


def test_profile_dimension_mismatch(run_cli, store_path, monkeypatch):
    make_store(store_path)  # committed to fake, 16-d
    monkeypatch.setenv("ZMEM_EMBED_PROFILE", "minilm")
    code, _, checks = doctor(run_cli)
    embeds = profiles.runtime_available() and weights.source_files() is not None
    assert checks["embeddings"]["status"] == ("fail" if embeds else "warn")
    assert code == (1 if embeds else 0)
    assert "store vectors are 16-d (fake) but minilm is 384-d" in checks["embeddings"]["detail"]


def test_model_checksum_is_deep_verified_and_cached_by_mtime(run_cli, isolated_env, monkeypatch):
    data = isolated_env / "data"
    (data / "models").mkdir(parents=True)  # a data dir's own models/ (older releases)
    built = model_files.built_model_path(data)
    built.write_bytes(b"a model built here")
    built.with_name(built.name + ".sha256").write_text(
        hashlib.sha256(b"a model built here").hexdigest() + "\n"
    )
    _, _, checks = doctor(run_cli)
    h = health(checks)
    assert h["checksum_ok"] is True and "checksum_note" not in h
    assert h["model"]["files"] == [
        {"kind": "built-from-weights", "path": str(built), "checksum_ok": True}
    ]
    # Wrong bytes in the official slot: a different build of the same checkpoint.
    official = model_files.official_model_path(data)
    official.write_bytes(b"some other build")
    code, _, checks = doctor(run_cli)
    h = health(checks)
    assert code == 0 and checks["embeddings"]["status"] == "warn" and h["checksum_ok"] is False
    assert h["checksum_note"] == embedding_checks.CHECKSUM_NOTE
    assert "checksum_mismatch" in checks["embeddings"]["detail"]
    human = run_cli("doctor").output
    assert f"note: {embedding_checks.CHECKSUM_NOTE}" in human
    assert model_files.OFFICIAL_MODEL_SHA256 in human
    # Same mtime and size: the cached verdict, no re-hash; a changed file is hashed again.
    calls = []

    def counting(path, expected=None):
        calls.append(Path(path).name)
        return None

    monkeypatch.setattr(model_files, "read_if_valid", counting)
    _, _, checks = doctor(run_cli)
    assert calls == [] and health(checks)["checksum_ok"] is False
    built.write_bytes(b"a model built here, changed")
    _, _, checks = doctor(run_cli)
    assert calls == [built.name]


def test_cross_encoder_block(run_cli, tmp_path, monkeypatch):
    _, _, checks = doctor(run_cli)
    ce = health(checks)["cross_encoder"]
    assert ce == {
        "enabled": False, "model_path": None, "pinned": False, "model_file": "unset",
        "tokenizer_file": "unset", "loads": None, "problem": None,
    }  # fmt: skip
    monkeypatch.setenv("ZMEM_CROSS_ENCODER", "1")
    monkeypatch.setenv("ZMEM_CROSS_ENCODER_MODEL", str(tmp_path / "ce" / "model.onnx"))
    code, _, checks = doctor(run_cli)
    ce = health(checks)["cross_encoder"]
    assert code == 0 and checks["embeddings"]["status"] == "warn"
    assert ce["enabled"] and ce["model_file"] == "missing" and "no model file" in ce["problem"]
    (tmp_path / "ce").mkdir()
    (tmp_path / "ce" / "model.onnx").write_bytes(b"not onnx")
    (tmp_path / "ce" / "tokenizer.json").write_text("{}")
    _, _, checks = doctor(run_cli)
    ce = health(checks)["cross_encoder"]
    assert ce["model_file"] == ce["tokenizer_file"] == "present"
    assert ce["loads"] is False and ce["problem"]
    assert "cross-encoder enabled but unusable" in checks["embeddings"]["detail"]


# ---- native memory, namespace, surfaces ----------------------------------------------------


def test_native_memory_conflicts(run_cli, home, tmp_path, monkeypatch):
    (home / ".claude").mkdir()
    _, _, checks = doctor(run_cli)
    c = checks["native-memory"]
    assert c["status"] == "warn" and c["claude"]["auto_memory"] is True
    assert c["claude"]["source"] == "default" and c["codex"] == {"installed": False}
    (home / ".claude" / "settings.json").write_text('{"autoMemoryEnabled": false}')
    _, _, checks = doctor(run_cli)
    assert checks["native-memory"]["status"] == "ok"
    # A project's local settings outrank the user's.
    project = tmp_path / "proj"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "settings.local.json").write_text('{"autoMemoryEnabled": true}')
    _, _, checks = doctor(run_cli, "--project", str(project))
    c = checks["native-memory"]
    assert c["status"] == "warn" and c["claude"]["source"].endswith("settings.local.json")
    monkeypatch.setenv("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "1")
    _, _, checks = doctor(run_cli, "--project", str(project))
    assert checks["native-memory"]["status"] == "ok"
    # Codex: memories are opt-in under [features].
    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text("[features]\nmemories = true\n")
    (home / ".codex" / "memories").mkdir()
    (home / ".codex" / "memories" / "MEMORY.md").write_text("# notes\n")
    _, _, checks = doctor(run_cli)
    c = checks["native-memory"]
    assert c["status"] == "warn" and c["codex"]["memories"] and c["codex"]["memory_files"] == 1
    assert "Codex memories are on" in c["detail"]
    (home / ".codex" / "config.toml").write_text("[features\nmemories = ")
    _, _, checks = doctor(run_cli)
    c = checks["native-memory"]
    assert c["status"] == "warn" and c["detail"].startswith("unparsable: ")
    assert c["codex"]["unreadable"] == [str(home / ".codex" / "config.toml")]


def test_namespace_for_a_project(run_cli, tmp_path, monkeypatch):
    repo = tmp_path / "widget"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text('[remote "origin"]\n\turl = git@github.com:acme/w.git\n')
    _, _, checks = doctor(run_cli, "--project", str(repo))
    c = checks["namespace"]
    assert c["status"] == "ok" and c["namespace"] == "project:github.com/acme/w" and c["remote"]
    old = tmp_path / "old"
    old.mkdir()
    monkeypatch.setenv("ZMEM_NS_MIGRATION_MAP", json.dumps({"project:w": str(repo)}))
    _, _, checks = doctor(run_cli, "--project", str(repo))
    assert checks["namespace"]["legacy"] == ["project:w"]
    monkeypatch.setenv("ZMEM_NS_MIGRATION_MAP", "{not json")
    _, _, checks = doctor(run_cli, "--project", str(old))
    c = checks["namespace"]
    assert c["status"] == "warn" and c["namespace"] == "project:old" and not c["remote"]


def test_host_surfaces(run_cli, tmp_path):
    _, _, checks = doctor(run_cli)
    c = checks["host-surfaces"]
    assert c["status"] == "ok" and all(c["surfaces"].values()) and c["root"] == str(PLUGIN)
    plugin = tmp_path / "plugin"
    files = [
        ".claude-plugin/plugin.json", "hooks/hooks.json", "hooks/zcode.json",
        "skills/memory/SKILL.md", "skills/memory/scripts/store.py",
        "skills/memory/scripts/doctor.py", "hooks/zmem_hook.py", "hooks/zmem_launch.py",
    ]  # fmt: skip
    for rel in files:
        (plugin / rel).parent.mkdir(parents=True, exist_ok=True)
        (plugin / rel).write_text("{}" if rel.endswith(".json") else "x")
    _, _, checks = doctor(run_cli, "--repo-root", str(plugin))
    c = checks["host-surfaces"]
    assert c["status"] == "ok" and "optional, absent: codex-plugin, codex-hooks" in c["detail"]
    (plugin / "hooks" / "hooks.json").write_text("{broken")
    _, _, checks = doctor(run_cli, "--repo-root", str(plugin))
    c = checks["host-surfaces"]
    assert c["status"] == "warn" and "missing claude-hooks" in c["detail"]
    (plugin / "hooks" / "hooks.json").write_text("{}")
    (plugin / "hooks" / "zmem_launch.py").unlink()  # a partial update: every hook goes silent
    _, _, checks = doctor(run_cli, "--repo-root", str(plugin))
    c = checks["host-surfaces"]
    assert c["status"] == "warn" and "missing launcher-module" in c["detail"]


def test_data_dir(run_cli, isolated_env):
    _, _, checks = doctor(run_cli)
    assert (
        checks["data-dir"]["status"] == "ok"
        and "does not exist yet" in checks["data-dir"]["detail"]
    )
    data = isolated_env / "data"
    data.mkdir(mode=0o700)
    log = data / "zmem-bg.log"
    log.write_text("line one\n2026 zmem-hook host=claude reason=injected\n")
    log.chmod(0o600)
    _, _, checks = doctor(run_cli)
    c = checks["data-dir"]
    assert c["status"] == "ok" and c["last_hook"].endswith("reason=injected")
    assert c["socket"] is False


def test_data_dir_readable_by_others_is_a_warning(run_cli, isolated_env):
    data = isolated_env / "data"
    data.mkdir(mode=0o700)
    (data / "store.sqlite").write_bytes(b"")
    (data / "store.sqlite").chmod(0o644)
    _, _, checks = doctor(run_cli)
    c = checks["data-dir"]
    assert c["status"] == "warn" and c["exposed"] == [str(data / "store.sqlite")]
    assert f"chmod -R go-rwx {data}" in c["detail"]
    data.chmod(0o755)
    (data / "store.sqlite").chmod(0o600)
    _, _, checks = doctor(run_cli)
    assert checks["data-dir"]["exposed"] == [str(data)]


def test_files_zmem_creates_are_private_whatever_the_umask(tmp_path):
    """The CLI, the hook client and the resident process create everything 0600 / 0700, the
    store's WAL and the hook log included, under a permissive umask."""
    import os
    import subprocess
    import sys

    data = tmp_path / "fresh" / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZMEM_")}
    env.update(ZMEM_DATA=str(data), ZMEM_EMBED_PROFILE="fake", ZMEM_HOOK_DAEMON="0")
    loose = lambda: os.umask(0o002)  # noqa: E731
    add = [sys.executable, "-m", "zmem", "add", "--namespace", "project:t", "--type", "fact"]
    subprocess.run([*add, "--content", "a token lives here"], env=env, check=True, preexec_fn=loose)
    payload = b'{"session_id": "s", "cwd": "/", "prompt": "where does the token live"}'
    hook = [sys.executable, str(PLUGIN / "hooks" / "zmem_hook.py"), "UserPromptSubmit"]
    subprocess.run(
        [*hook, "--host", "claude"], input=payload, env=env, check=True, preexec_fn=loose
    )
    made = sorted(p for p in data.iterdir() if not p.name.startswith("."))
    assert {p.name for p in made} >= {"store.sqlite", "zmem-bg.log"}
    for path in (data, *made):
        assert path.stat().st_mode & 0o077 == 0, (path, oct(path.stat().st_mode))
    # SQLite gives the WAL (which exists while a connection is open) the store's mode, even in a
    # process that keeps a permissive umask (a host embedding the library).
    old = os.umask(0o002)
    try:
        from zmem import MemoryStore

        with MemoryStore.open(data / "store.sqlite", create=False) as store:
            store.add("the wal exists now", namespace="project:t", type="fact")
            wal = data / "store.sqlite-wal"
            assert wal.exists() and wal.stat().st_mode & 0o077 == 0, oct(wal.stat().st_mode)
    finally:
        os.umask(old)


# ---- read-only ------------------------------------------------------------------------------


def run_script(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--format", "both", *args],
        capture_output=True,
        timeout=120,
        env=env,
    )


def test_doctor_writes_nothing(isolated_env, store_path, home, tmp_path):
    """Every file under the test's tree (store, data dir with its models and log, HOME with
    Claude and Codex config, the project) is byte-identical, same mtime, none added."""
    ids = make_store(store_path, rows=3)
    conn = raw(store_path)
    conn.execute("INSERT INTO episode (id, namespace, started_at) VALUES ('e', 'project:t', 'x')")
    conn.execute(
        "INSERT INTO episode_memory (episode_id, memory_id, added_at) VALUES ('e', ?, 'x')",
        (ids[0],),
    )
    conn.close()
    data = isolated_env / "data"
    (data / "models").mkdir(parents=True, exist_ok=True)
    model = model_files.official_model_path(data)
    model.write_bytes(b"wrong build")
    (data / "zmem-bg.log").write_text("2026 zmem-hook host=codex reason=skipped\n")
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text('{"env": {"ZMEM_DATA": "/elsewhere"}}')
    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text("[features]\nmemories = true\n")
    project = tmp_path / "proj"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "settings.local.json").write_text('{"autoMemoryEnabled": true}')
    env = {**os.environ, "HOME": str(home)}
    before = snapshot(tmp_path)
    assert str(store_path) in before and str(model) in before
    done = run_script(env, "--project", str(project))
    assert done.returncode == 0, done.stderr
    assert b"[warn] native-memory" in done.stdout and b"[warn] store-path" in done.stdout
    assert snapshot(tmp_path) == before


def test_doctor_never_creates_a_missing_store(isolated_env, store_path, home, tmp_path):
    env = {**os.environ, "HOME": str(home)}
    before = snapshot(tmp_path)
    done = run_script(env)
    assert done.returncode == 0, done.stderr
    assert not store_path.exists() and not (isolated_env / "data").exists()
    assert not (home / ".zmem").exists()
    assert snapshot(tmp_path) == before


def test_host_wiring_names_the_install_and_warns_on_a_path_that_is_gone(run_cli, home, tmp_path):
    _, _, checks = doctor(run_cli)
    assert checks["host-wiring"]["status"] == "n/a"
    assert run_cli("setup", "claude", "--no-model").exit_code == 0
    _, _, checks = doctor(run_cli)
    c = checks["host-wiring"]
    assert c["status"] == "ok" and c["detail"].startswith("claude -> this install (a checkout at")
    assert c["hosts"]["claude"]["launcher"].endswith("zmem_hook.py")
    assert c["hosts"]["codex"] == {"wired": False}
    # A tool install that was uninstalled (or a checkout that moved): the hooks point nowhere.
    gone = tmp_path / "old-tool" / "bin"
    codex_home = home / ".codex"
    codex_home.mkdir()
    command = f"{gone}/python -S {gone}/zmem-hook UserPromptSubmit --host codex"
    entry = {"hooks": [{"type": "command", "command": command}]}
    (codex_home / "hooks.json").write_text(json.dumps({"hooks": {"UserPromptSubmit": [entry]}}))
    code, _, checks = doctor(run_cli)
    c = checks["host-wiring"]
    assert code == 0 and c["status"] == "warn"
    assert (
        f"codex points at {gone}/python, which no longer exists: run `zmem setup codex`"
        in c["detail"]
    )
    assert c["hosts"]["codex"]["missing"] == [f"{gone}/python", f"{gone}/zmem-hook"]
