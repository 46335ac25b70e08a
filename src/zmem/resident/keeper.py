"""The keeper: the small process that holds the loopback port of Claude Code's http prompt hook
for as long as the user's sessions run, and starts the resident process that answers on it.
The resident process inherits the listening socket, so when it dies (a crash, a kill) or
idles out, requests wait in the socket's queue while the keeper starts the next one, instead
of being refused: the prompt is answered late, never dropped. Standard library only."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from zmem import layout, ports
from zmem.resident import client, code, http_hook

CRASH_WINDOW_S = 60.0
CRASHES_BEFORE_WAITING = 5  # in that window: then start the next only when a request comes
CRASH_PAUSE_S = 10.0  # then, between starts
CONFIG_CHECK_S = 30.0  # how often an idle keeper checks that setup still wants it
EXIT_IDLE, EXIT_HANDOVER = 0, 3  # resident.daemon's exit statuses (not imported: it is heavy)
EXIT_NOT_STARTED = 127  # the resident process could not be started at all (as a shell says)


def _wanted(data_dir: Path, config: http_hook.HttpConfig) -> bool:
    """setup still wires this port and secret (--remove deletes the file; a new setup with
    another port makes this keeper give way to the next)."""
    return http_hook.load_config(data_dir) == config


def _install_gone() -> bool:
    """The interpreter or the package this keeper runs no longer exists (the tool was
    uninstalled, its environment deleted)."""
    return not (os.path.exists(sys.executable) and os.path.exists(__file__))


class Keeper:
    def __init__(self, data_dir: Path, config: http_hook.HttpConfig):
        self.data_dir = data_dir
        self.config = config
        self.sock = http_hook.listen(config.port)
        self.stopping = False
        self.crashes: list[float] = []
        self.proc: subprocess.Popen | None = None

    def run(self, before_close: Callable[[], None] | None = None) -> None:
        """Serve until stopped or no longer wanted; `before_close` runs while the port is still
        held (the pid file goes first, so a free port always means the keeper is gone)."""
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        start_now = True  # the first resident process: warm before the first prompt
        while not self.stopping:
            if not start_now and not self._wait_for_request():
                break
            if _install_gone():
                # Uninstalled without `setup --remove`: no resident process can start again,
                # and restarting one in a loop would only fill the log.
                client.log_line(self.data_dir, "keeper", "resident", "install-gone", {})
                break
            status = self._run_worker()
            if self.stopping or not _wanted(self.data_dir, self.config):
                break
            if status == EXIT_IDLE:
                start_now = False
            elif status == EXIT_HANDOVER:
                start_now = True
            else:
                now = time.monotonic()
                self.crashes = [t for t in self.crashes if now - t < CRASH_WINDOW_S] + [now]
                client.log_line(
                    self.data_dir, "keeper", "resident", "crashed", {"error": f"status {status}"}
                )
                # A process that dies at once again and again (a broken install) is started
                # only when a request comes, and at most once a pause: a request left in the
                # queue would otherwise restart it in a tight loop.
                start_now = len(self.crashes) < CRASHES_BEFORE_WAITING
                if not start_now:
                    self._pause(CRASH_PAUSE_S)
        if before_close is not None:
            before_close()
        self.sock.close()

    def _stop(self, *_: object) -> None:
        self.stopping = True
        if self.proc is not None:
            self.proc.terminate()  # it holds the port too: the keeper's stop is its stop

    def _pause(self, seconds: float) -> None:
        until = time.monotonic() + seconds
        while not self.stopping and time.monotonic() < until:
            time.sleep(0.2)

    def _wait_for_request(self) -> bool:
        """Block until a connection waits on the port (True), or setup no longer wants this
        keeper or it is told to stop (False)."""
        with selectors.DefaultSelector() as ready:
            ready.register(self.sock, selectors.EVENT_READ)
            while not self.stopping:
                if ready.select(timeout=CONFIG_CHECK_S):
                    return True
                if _install_gone():
                    return True  # the loop's own check logs it and stops
                if not _wanted(self.data_dir, self.config):
                    return False
        return False

    def _run_worker(self) -> int:
        try:
            self.proc = subprocess.Popen(
                [
                    sys.executable, "-m", "zmem.resident.daemon", str(self.data_dir),
                    "--http-fd", str(self.sock.fileno()),
                ],
                pass_fds=(self.sock.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=code.env_for_this_install(),
            )  # fmt: skip
        except OSError:
            # The interpreter went between the loop's check and this start (an uninstall
            # mid-way): a failed start, counted as a crash; the loop's next check finds the
            # install gone and stops, instead of the keeper dying unlogged.
            return EXIT_NOT_STARTED
        if self.stopping:
            # A stop that came while the process was starting found none to end: end it now,
            # or the keeper would wait on it until it idled out.
            self.proc.terminate()
        try:
            return self.proc.wait()
        finally:
            self.proc = None


def stop(data_dir: Path) -> bool:
    """Stop the keeper of this data dir at once (setup --remove; without this it leaves by
    itself within CONFIG_CHECK_S of its config going). True when one was told to. Only a
    process that is a keeper of this data dir is signalled: the one its pid file names (a
    file left by a killed keeper may name another process by now), else the one listening on
    the configured port (a keeper that has bound it but not yet written its file)."""
    candidates: list[int] = []
    try:
        candidates.append(int((data_dir / layout.KEEPER_PID).read_text().strip()))
    except (OSError, ValueError):
        pass
    config = http_hook.load_config(data_dir)
    if config is not None:
        candidates.extend(ports.listener_pids(config.port) or ())
    for pid in candidates:
        argv = ports.cmdline(pid)
        if "zmem.resident.keeper" in argv and str(data_dir) in argv:
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                continue
            return True
    return False  # no keeper, or no /proc to check it by (it leaves by itself)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    layout.keep_private()
    data_dir = Path(args[0]) if args else client.data_dir()
    config = http_hook.load_config(data_dir)
    if config is None:
        sys.exit(2)  # setup did not wire the http hook here
    try:
        keeper = Keeper(data_dir, config)
    except OSError:
        sys.exit(0)  # the port is held: another keeper already serves it
    pid_file = data_dir / layout.KEEPER_PID
    # Whole or absent, never empty: a reader (stop, doctor) may look the moment it appears.
    partial = pid_file.with_name(f".{pid_file.name}.{os.getpid()}")
    partial.write_text(f"{os.getpid()}\n")
    os.replace(partial, pid_file)

    def remove_pid() -> None:
        try:
            if pid_file.read_text().strip() == str(os.getpid()):
                pid_file.unlink()
        except OSError:
            pass

    try:
        keeper.run(before_close=remove_pid)
    finally:
        remove_pid()  # an exception on the way out: the file still goes


if __name__ == "__main__":
    main()
