"""Shared fixtures: every test gets its own store and data dir through ZMEM_STORE/ZMEM_DATA,
and no ZMEM_* setting from the developer's shell leaks in."""

from __future__ import annotations

import importlib.util
import json
import os
import uuid
from pathlib import Path
from types import ModuleType

import apsw
import pytest
from click.testing import CliRunner

from hub_fixtures import NS, OTHER, ROLES, Machine
from pg_server import ADMIN, ADMIN_PASSWORD, postgres
from zmem import MemoryStore
from zmem.cli import cli

COUNTED_TABLES = (
    "memory",
    "memory_link",
    "entity",
    "entity_alias",
    "memory_entity",
    "episode",
    "episode_memory",
    "review",
    "meta",
)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in list(os.environ):
        if key.startswith("ZMEM_"):
            monkeypatch.delenv(key)
    # The test's own model cache, never the developer's ~/.cache (tests that load MiniLM in
    # process share the one build the process holds).
    monkeypatch.setenv("ZMEM_MODEL_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("ZMEM_DATA", str(tmp_path / "data"))
    # The fake profile unless a test asks for the real model: loading MiniLM per test store
    # (and building it per subprocess data dir) would cost a minute for nothing.
    monkeypatch.setenv("ZMEM_EMBED_PROFILE", "fake")
    monkeypatch.setenv("ZMEM_STORE", str(tmp_path / "store.sqlite"))
    # No detached upkeep child outliving a test and writing into its data dir; the tests of the
    # upkeep turn it on (tests/test_upkeep.py).
    monkeypatch.setenv("ZMEM_SESSION_UPKEEP", "0")
    # No resident process started by a CLI read in a subprocess, outliving the test; the tests
    # of the resident process turn it on.
    monkeypatch.setenv("ZMEM_HOOK_DAEMON", "0")
    # Outside any git checkout: a command without --namespace means what it means there (the
    # checkout default has its own tests, in checkouts they make).
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def store_path(isolated_env: Path) -> Path:
    return isolated_env / "store.sqlite"


@pytest.fixture
def store(store_path: Path):
    with MemoryStore.open(store_path) as s:
        yield s


def load_script(name: str) -> ModuleType:
    """scripts/<name>.py as a module (the scripts are not a package), for their functions."""
    path = Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def table_counts(path: Path) -> dict[str, int]:
    """Row counts of every table, plus the stored content, for 'nothing was written' checks."""
    conn = apsw.Connection(str(path))
    try:
        out = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in COUNTED_TABLES}
        out["state"] = hash(
            tuple(
                conn.execute(
                    "SELECT id, content, tags, superseded_at, valid_until, trust_score, "
                    "refreshed_at FROM memory ORDER BY rid"
                )
            )
        )
        return out
    finally:
        conn.close()


class Cli:
    """Runs the real click entry point in-process, the way a user would type it."""

    def __init__(self) -> None:
        self.runner = CliRunner()

    def __call__(self, *args: str, input: str | None = None):
        return self.runner.invoke(cli, list(args), input=input, catch_exceptions=False)


@pytest.fixture
def run_cli() -> Cli:
    return Cli()


def ingest_file(tmp_path: Path, *rows, namespace: str = "project:t") -> tuple[Path, list[str]]:
    """A sync file of rows (a text, or a text and its fields) for ingest-jsonl, and their ids
    in order. Rows of one ingested file never fold into each other, which is how the
    consolidate and organize tests bring in the duplicates an add would fold as it writes."""
    lines = []
    for row in rows:
        content, fields = (row, {}) if isinstance(row, str) else row
        lines.append({
            "id": str(uuid.uuid4()), "namespace": namespace, "content": content,
            "type": "lesson", "signal": "test", "confidence": 0.9, **fields,
        })  # fmt: skip
    path = tmp_path / f"in-{lines[0]['id']}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path, [line["id"] for line in lines]


def add_row(store: MemoryStore, content: str, **kw):
    kw.setdefault("namespace", "project:t")
    kw.setdefault("type", "lesson")
    kw.setdefault("signal", "test")
    return store.add(content, **kw)


# ---- the team hub (issue 32): a real PostgreSQL server per module, a fresh hub per test ------


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with postgres() as pg:
        for role, password in ROLES.items():
            pg.create_role(role, password)
        pgpass = tmp_path_factory.mktemp("pgpass") / "pgpass"
        lines = [f"127.0.0.1:{pg.port}:*:{ADMIN}:{ADMIN_PASSWORD}"]
        lines += [f"127.0.0.1:{pg.port}:*:{r}:{p}" for r, p in ROLES.items()]
        pgpass.write_text("\n".join(lines) + "\n")
        pgpass.chmod(0o600)
        pg.pgpass = pgpass  # type: ignore[attr-defined]
        yield pg


@pytest.fixture
def hub(server, monkeypatch):
    """A fresh hub: the schema dropped and made again through `hub init`; alice and bob may
    read and write NS, carol only OTHER."""
    monkeypatch.setenv("PGPASSFILE", str(server.pgpass))
    for v in ("PGPASSWORD", "PGSERVICE", "PGHOST", "PGUSER"):
        monkeypatch.delenv(v, raising=False)
    server.sql("DROP SCHEMA IF EXISTS zmem_hub CASCADE")
    admin = server.url(password=None)
    assert CliRunner().invoke(cli, ["hub", "init", "--url", admin]).exit_code == 0
    for role, ns in (("alice", NS), ("bob", NS), ("carol", OTHER)):
        done = CliRunner().invoke(
            cli, ["hub", "grant", "--url", admin, "--role", role, "--namespace", ns]
        )
        assert done.exit_code == 0, done.output
    return server


@pytest.fixture
def hub_factory(server, monkeypatch):
    """A fresh hub for each hypothesis example (the `hub` fixture runs once per test)."""
    monkeypatch.setenv("PGPASSFILE", str(server.pgpass))

    def make():
        server.sql("DROP SCHEMA IF EXISTS zmem_hub CASCADE")
        admin = server.url(password=None)
        assert CliRunner().invoke(cli, ["hub", "init", "--url", admin]).exit_code == 0
        for role, ns in (("alice", NS), ("bob", NS), ("carol", OTHER)):
            args = ["hub", "grant", "--url", admin, "--role", role, "--namespace", ns]
            assert CliRunner().invoke(cli, args).exit_code == 0
        return server

    return make


@pytest.fixture
def machines(hub, tmp_path):
    def make(role: str = "alice") -> Machine:
        return Machine(tmp_path, hub, role)

    return make
