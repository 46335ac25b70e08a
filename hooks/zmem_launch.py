"""The hook launcher's work, for every host (hooks/zmem_hook.py runs it as
`<venv python> -S zmem_hook.py <Event> --host claude|codex|zcode`).

A warm prompt must cost little more than the interpreter's start, so this module first tries
the resident process through zmem.resident.wire, which imports only modules built into the
interpreter (-S skips site-packages: ~4 ms). Only when no resident process answers does it load
site and the full client, with a bare package object standing in for `zmem` so
zmem/__init__.py (the whole store, ~125 ms) does not load until the hook knows it has work."""

import os
import sys


def _with_site() -> None:
    # The launchers pass -S; the full client needs the venv's site-packages.
    if sys.flags.no_site:
        import site

        site.main()


def _package_dir() -> str:
    # The plugin is a checkout: its own src/zmem is the package. An install elsewhere is looked
    # up the slow way (importlib.util costs ~4 ms of imports).
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "src")
    if os.path.isfile(os.path.join(src, "zmem", "resident", "wire.py")):
        sys.path.insert(0, src)
        return os.path.join(src, "zmem")
    _with_site()
    import importlib.util

    spec = importlib.util.find_spec("zmem")  # finds the installed package without importing it
    if spec is not None and spec.submodule_search_locations:
        return next(iter(spec.submodule_search_locations))
    sys.path.insert(0, src)
    return os.path.join(src, "zmem")


def _bare_package(pkg_dir: str) -> None:
    if "zmem" not in sys.modules:
        stub = type(sys)("zmem")
        stub.__path__ = [pkg_dir]
        stub.__file__ = os.path.join(pkg_dir, "__init__.py")
        sys.modules["zmem"] = stub


def main() -> None:
    try:
        raw = sys.stdin.buffer.read()
    except (OSError, ValueError):
        raw = b""
    pkg_dir = _package_dir()
    _bare_package(pkg_dir)
    from zmem.resident import wire

    event, host = wire.parse_argv(sys.argv[1:])
    state, body = wire.fast_path(host, event, raw, os.path.realpath(pkg_dir))
    if state == wire.ANSWERED:
        while body:
            body = body[os.write(1, body) :]
        os._exit(0)
    _with_site()
    from zmem.resident import client

    if state == wire.TIMED_OUT:  # fail open: the deadline is spent
        client.log_line(client.data_dir(), host, event, "timeout", {"via": "daemon"})
        os._exit(0)
    client.main(raw=raw, ask_daemon=False)
