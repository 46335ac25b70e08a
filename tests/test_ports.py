"""zmem.ports on a /proc laid out in a temporary directory: who holds the http hook's port,
this data dir's keeper, nobody, another program, or another user's program (whose socket
this user sees in net/tcp but whose file descriptors it cannot read)."""

from __future__ import annotations

import os
from pathlib import Path

from zmem import ports

PORT = 48123
HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid\n"


def fake_proc(
    tmp_path: Path, *, listening: bool, owner: list[str] | None, uid: int | None = None
) -> Path:
    """net/tcp with (or without) a listening socket on PORT, owned by `uid` (default this
    user); `owner` is the argv of a process whose fd points at it, None for a socket no
    visible process holds."""
    proc = tmp_path / "proc"
    (proc / "net").mkdir(parents=True)
    line = (
        f"   0: 0100007F:{PORT:04X} 00000000:0000 0A 00000000:00000000 00:00000000 00000000"
        f"  {os.getuid() if uid is None else uid:4d}        0 777 1\n"
    )
    (proc / "net" / "tcp").write_text(HEADER + (line if listening else ""))
    busy = proc / "4242"
    (busy / "fd").mkdir(parents=True)
    os.symlink("socket:[555]", busy / "fd" / "3")  # another socket: never the port's
    (busy / "cmdline").write_bytes(b"python\0-m\0http.server\0")
    if owner is not None:
        pid = proc / "4343"
        (pid / "fd").mkdir(parents=True)
        os.symlink("socket:[777]", pid / "fd" / "5")
        (pid / "cmdline").write_bytes("\0".join(owner).encode() + b"\0")
    return proc


def test_this_data_dirs_keeper(tmp_path):
    data = tmp_path / "data"
    proc = fake_proc(
        tmp_path, listening=True, owner=["python", "-m", "zmem.resident.keeper", str(data)]
    )
    assert ports.holder(PORT, data, proc) == ports.OWN
    assert ports.listener_pids(PORT, proc) == {4343}


def test_nobody(tmp_path):
    proc = fake_proc(tmp_path, listening=False, owner=None)
    assert ports.holder(PORT, tmp_path / "data", proc) == ports.NOBODY
    assert ports.listener_pids(PORT, proc) == set()


def test_another_program_and_another_data_dirs_keeper(tmp_path):
    proc = fake_proc(tmp_path, listening=True, owner=["nc", "-l", str(PORT)])
    assert ports.holder(PORT, tmp_path / "data", proc) == ports.ANOTHER
    other = fake_proc(
        tmp_path / "b", listening=True, owner=["python", "-m", "zmem.resident.keeper", "/x"]
    )
    assert ports.holder(PORT, tmp_path / "data", other) == ports.ANOTHER


def test_another_users_program_whose_owner_cannot_be_seen(tmp_path):
    # The socket listens, but no process this user can read holds it: not ours, and it would
    # receive the prompts and the secret.
    proc = fake_proc(tmp_path, listening=True, owner=None)
    assert ports.holder(PORT, tmp_path / "data", proc) == ports.ANOTHER
    assert ports.listener_pids(PORT, proc) == set()


def test_no_proc_to_tell(tmp_path):
    assert ports.holder(PORT, tmp_path / "data", tmp_path / "absent") is None


def test_another_users_socket_is_another_program_whatever_its_argv(tmp_path):
    """Issue 48: an attacker's fake server imitating the keeper's argv, on the port: the
    kernel's table says whose socket it is, and that is not this user's."""
    data = tmp_path / "data"
    proc = fake_proc(
        tmp_path, listening=True, owner=["python", "-m", "zmem.resident.keeper", str(data)],
        uid=os.getuid() + 4242,
    )  # fmt: skip
    assert ports.holder(PORT, data, proc) == ports.ANOTHER
    assert ports.foreign_owner(PORT, proc) == os.getuid() + 4242
