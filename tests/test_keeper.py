"""The keeper's edges that only timing reaches (a review of the suite's races, after a flaky CI
run): an install deleted between the keeper's check and the start of its resident process, a
stop that lands while that process is starting, and doctor asking a keeper that leaves as
the question wakes it. Each is driven deterministically here, on a real bound port, with the
keeper's own loop (`Keeper.run`) in this process and real child processes where one runs."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from test_http_hook import _settle, home  # noqa: F401 (home: a fixture)
from zmem import ports
from zmem.resident import http_hook, keeper


@pytest.fixture
def bound(isolated_env):
    """A keeper bound to a configured port, its loop not yet run; the signal handlers its run
    installs are put back after."""
    data = Path(os.environ["ZMEM_DATA"])
    config = http_hook.new_config(None)
    http_hook.write_config(data, config)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    k = keeper.Keeper(data, config)
    try:
        yield data, config, k
    finally:
        k.sock.close()
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def test_an_install_deleted_as_the_resident_process_starts_is_logged_and_the_keeper_stops(
    bound, monkeypatch
):
    """The loop found the install there; the interpreter went before the start (`uv tool
    uninstall` racing a prompt). The keeper died of the start's FileNotFoundError, unlogged;
    it now counts a failed start, finds the install gone and stops, saying so."""
    data, _, k = bound
    checks = iter([False])  # present at the first check, gone at every later one
    monkeypatch.setattr(keeper, "_install_gone", lambda: next(checks, True))

    def vanished(*args, **kwargs):
        raise FileNotFoundError(2, "No such file or directory", sys.executable)

    monkeypatch.setattr(keeper.subprocess, "Popen", vanished)
    started = time.monotonic()
    k.run()  # returns: the loop left
    assert time.monotonic() - started < 5
    log = (data / "zmem-bg.log").read_text()
    assert f"reason=crashed error=status_{keeper.EXIT_NOT_STARTED}" in log
    assert log.index("reason=crashed") < log.index("reason=install-gone")


def test_a_stop_that_lands_while_the_resident_process_starts_ends_it(bound, monkeypatch):
    """SIGTERM between the loop's check and the start returning: the handler found no process
    to end, and the keeper waited on one that idles out after 15 minutes. Now the process
    started is ended at once and the keeper leaves."""
    _, _, k = bound
    real_popen = subprocess.Popen
    children: list[subprocess.Popen] = []

    def started_as_the_stop_lands(*args, **kwargs):
        # A process that would outlive the test by far, as an idle resident process would.
        child = real_popen([sys.executable, "-c", "import time; time.sleep(60)"])
        children.append(child)
        os.kill(os.getpid(), signal.SIGTERM)  # the stop, before Popen has returned
        return child

    monkeypatch.setattr(keeper.subprocess, "Popen", started_as_the_stop_lands)
    started = time.monotonic()
    try:
        k.run()
        took = time.monotonic() - started
    finally:
        for child in children:
            child.kill()
            child.wait()
    assert len(children) == 1 and took < 10
    assert children[0].returncode == -signal.SIGTERM


def _doctor_wiring(run_cli) -> dict:
    doctor = json.loads(run_cli("doctor", "--format", "json").output)
    return next(c for c in doctor["checks"] if c["check"] == "host-wiring")


@pytest.mark.usefixtures("home")  # a throwaway HOME for setup's settings.json
def test_doctor_reads_a_keeper_that_leaves_as_its_question_wakes_it_as_not_running(
    run_cli, monkeypatch
):
    """The install deleted and the resident process idled out: doctor's identity question
    wakes the keeper, which closes it unanswered and leaves. That is no other program on the
    port; doctor said "held by another program" and failed. A listener that keeps the port
    after failing the question still fails doctor (test_http_hook)."""
    monkeypatch.setenv("ZMEM_HOOK_DAEMON", "1")
    data = Path(os.environ["ZMEM_DATA"])
    try:
        assert run_cli("setup", "claude", "--no-model").exit_code == 0
        config = http_hook.load_config(data)
        assert config is not None
        assert _settle(lambda: http_hook.running(data))  # setup starts the keeper
    finally:
        assert _settle(lambda: not keeper.stop(data) and not ports.in_use(config.port))
    leaving = socket.socket()
    leaving.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    leaving.bind((http_hook.LOOPBACK, config.port))
    leaving.listen()

    def wakes_and_leaves() -> None:
        conn, _ = leaving.accept()
        conn.close()  # unanswered, as the keeper that finds its install gone
        leaving.close()

    t = threading.Thread(target=wakes_and_leaves, daemon=True)
    t.start()
    try:
        wiring = _doctor_wiring(run_cli)
    finally:
        t.join(timeout=10)
        leaving.close()
    assert wiring["status"] != "fail", wiring["detail"]
    assert f"127.0.0.1:{config.port}, keeper not running" in wiring["detail"]
    assert "held by another program" not in wiring["detail"]


def test_released_waits_for_the_listener_and_no_longer(isolated_env):
    with socket.socket() as held:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        held.bind((http_hook.LOOPBACK, 0))
        held.listen()
        port = held.getsockname()[1]
        assert ports.in_use(port)
        started = time.monotonic()
        assert not ports.released(port, within=0.3)
        assert 0.3 <= time.monotonic() - started < 2
        threading.Timer(0.2, held.close).start()
        assert ports.released(port, within=5)
    assert not ports.in_use(port)
