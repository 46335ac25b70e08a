"""Shared by the team hub's tests (issue 32): the namespaces and roles the fixtures in conftest.py
set up (a real PostgreSQL server, a fresh hub per test), and Machine: one data dir and store
standing for one machine of the team, driven through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from zmem import MemoryStore
from zmem.cli import cli

NS = "project:github.com/acme/widget"
OTHER = "project:github.com/acme/gadget"
ROLES = {"alice": "alice-pw-91", "bob": "bob-pw-27", "carol": "carol-pw-55"}


class Machine:
    """One data dir and store, as one machine of the team, driven through the real CLI."""

    _made: dict[Path, int] = {}

    def __init__(self, base: Path, server, role: str) -> None:
        # Numbered per base, not by what the folder holds: a machine's data dir appears only
        # when it first writes, and two machines made before that must not share one.
        n = Machine._made[base] = Machine._made.get(base, len(list(base.iterdir()))) + 1
        self.data = base / f"data-{role}-{n}"
        self.store = self.data / "store.sqlite"
        self.url = server.url(user=role, password=None)
        self.role = role

    def cli(self, *args: str, input: str | None = None):
        env = {"ZMEM_DATA": str(self.data), "ZMEM_STORE": str(self.store)}
        return CliRunner().invoke(cli, list(args), env=env, input=input)

    def ok(self, *args: str):
        done = self.cli(*args)
        assert done.exit_code == 0, f"{args}: {done.output}"
        return done

    def add(self, content: str, namespace: str = NS, **kw: str) -> str:
        args = ["add", "--namespace", namespace, "--type", kw.get("type", "lesson"),
                "--signal", "user", "--content", content, "--json"]  # fmt: skip
        return json.loads(self.ok(*args).stdout)["id"]

    def sync(self) -> dict:
        return json.loads(self.ok("sync", "--json").stdout)

    def rows(self, namespace: str = NS) -> dict[str, tuple]:
        """id -> (content, live, update_of) of every row of `namespace`."""
        if not self.store.exists():
            return {}
        with MemoryStore.open(self.store) as s:
            rows = s.list(namespace=namespace, include_superseded=True, limit=1000)
            return {m.id: (m.content, m.live, m.update_of) for m in rows}
