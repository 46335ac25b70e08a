"""The resident process's serving loop: only a request it answered is followed by the
between-requests work (catching the vector copy up, rebuilding it); a refused or unreadable
connection touched no store and costs nothing after it."""

from __future__ import annotations

import json
import threading
import time

from zmem import MemoryStore
from zmem.resident import daemon, wire


def _wait(predicate, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_only_answered_requests_run_the_between_requests_work(
    isolated_env, store_path, monkeypatch
):
    with MemoryStore.open(store_path) as s:
        s.add("Run pytest -x before git push.", namespace="project:t", type="lesson", signal="test")
    monkeypatch.setenv("ZMEM_HOOKD_IDLE_S", "3")
    resident = daemon.Resident(isolated_env / "data")
    after: list[float] = []
    monkeypatch.setattr(resident, "_between_requests", lambda: after.append(time.monotonic()))
    loop = threading.Thread(target=resident.serve, daemon=True)
    loop.start()
    sock = str(resident.path)
    assert _wait(resident.path.exists)

    assert wire.ask(sock, b"garbage", 5.0) == (wire.REFUSED, b"protocol")
    other = wire.encode_request("claude", "Stop", "/another/release", b"{}")
    assert wire.ask(sock, other, 5.0) == (wire.REFUSED, b"pkg")
    time.sleep(0.3)  # the loop has gone round since both replies
    assert after == []

    stop = json.dumps({"session_id": "s"}).encode()
    status, _ = wire.ask(sock, wire.encode_request("claude", "Stop", resident.pkg, stop), 5.0)
    assert status == wire.ANSWERED
    assert _wait(lambda: len(after) == 1)
    loop.join(timeout=15)
    assert not loop.is_alive()  # idled out: refused clients did not keep it up either
    assert len(after) == 1
