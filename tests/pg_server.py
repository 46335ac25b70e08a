"""A real PostgreSQL server for the team hub's tests (issue 32), started by the tests themselves:
initdb into a temporary directory, the server on a free loopback port with password (scram)
authentication, stopped at the end. PostgreSQL 15's binaries are in /usr/lib/postgresql/15/bin
on these machines (or on PATH); initdb and the server refuse to run as root, so as root they run
as the unprivileged `postgres` user. A machine that cannot start one fails the tests that need
it: they never skip silently."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ADMIN = "hubadmin"
ADMIN_PASSWORD = "admin-secret-7f3e"
DB = "zmemhub"


def _bindir() -> Path:
    for candidate in (os.environ.get("ZMEM_TEST_PG_BIN"), "/usr/lib/postgresql/15/bin"):
        if candidate and (Path(candidate) / "initdb").is_file():
            return Path(candidate)
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    raise RuntimeError(
        "no PostgreSQL server binaries (initdb): install PostgreSQL 15 (Debian: postgresql-15) "
        "or set ZMEM_TEST_PG_BIN"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    port: int
    base: Path

    def url(self, user: str = ADMIN, password: str | None = ADMIN_PASSWORD, db: str = DB) -> str:
        auth = f"{user}:{password}" if password else user
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{db}"

    def sql(self, statements: str, db: str = DB) -> None:
        """Run SQL as the admin (psycopg, autocommit)."""
        import psycopg

        with psycopg.connect(self.url(db=db), autocommit=True) as conn:
            conn.execute(statements)

    def create_role(self, name: str, password: str) -> None:
        self.sql(f"CREATE ROLE {name} LOGIN PASSWORD '{password}'")


def _as_server_user(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    return ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--", *cmd]


@contextlib.contextmanager
def postgres() -> Iterator[Server]:
    bindir = _bindir()
    base = Path(tempfile.mkdtemp(prefix="zmem-pg-"))
    data, sock = base / "data", base / "sock"
    sock.mkdir()
    pwfile = base / "pw"
    pwfile.write_text(ADMIN_PASSWORD + "\n")
    if os.geteuid() == 0:
        import pwd

        user = pwd.getpwnam("postgres")
        for path in (base, sock, pwfile):
            os.chown(path, user.pw_uid, user.pw_gid)
    port = _free_port()
    run = dict(capture_output=True, text=True, timeout=120)
    done = subprocess.run(_as_server_user([
        str(bindir / "initdb"), "-D", str(data), "-U", ADMIN, "--pwfile", str(pwfile),
        "-A", "scram-sha-256", "-E", "UTF8", "--locale", "C.UTF-8",
    ]), **run)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"initdb failed: {done.stderr[-2000:]}")
    options = f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off"
    done = subprocess.run(_as_server_user([
        str(bindir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(base / "log"),
        "-w", "-t", "60", "start",
    ]), **run)  # fmt: skip
    if done.returncode != 0:
        log = (base / "log").read_text() if (base / "log").exists() else ""
        raise RuntimeError(f"postgres did not start: {done.stderr[-1000:]} {log[-2000:]}")
    server = Server(port, base)
    try:
        server.sql(f"CREATE DATABASE {DB}", db="postgres")
        yield server
    finally:
        subprocess.run(_as_server_user([
            str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop",
        ]), **run)  # fmt: skip
        shutil.rmtree(base, ignore_errors=True)
