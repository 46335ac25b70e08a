"""The hook launcher's work for every host: `<venv python> -S zmem_hook.py <Event> --host H`
(or an install's `<prefix>/bin/zmem-hook`, which imports zmem_hook). A warm prompt must cost
little more than the interpreter's start, so it first tries the resident process through
zmem.resident.wire (built-in modules only; -S skips site-packages: ~4 ms). Only when no
resident process answers does it load site and the full client, a bare package object standing
in for `zmem` until the hook knows it has work."""

import os
import sys


def _with_site() -> None:  # the launchers pass -S; the full client needs site-packages
    if sys.flags.no_site:
        __import__("site").main()


def _env_prefix() -> str:  # with -S, sys.prefix is the base interpreter's; the path ran is ours
    return os.path.dirname(os.path.dirname(os.path.abspath(sys.executable)))


def _package_dir() -> str:
    """The zmem package, found without site: the one around this file (<package>/plugin/hooks
    in a checkout's src/ or in site-packages), else the one installed in the venv that runs
    this copy of the plugin tree (a marketplace install)."""
    here = os.path.dirname(os.path.realpath(__file__))
    lib = "Lib" if os.name == "nt" else f"lib/python{sys.version_info[0]}.{sys.version_info[1]}"
    venv_pkg = os.path.join(_env_prefix(), lib, "site-packages", "zmem")
    for pkg in (os.path.dirname(os.path.dirname(here)), venv_pkg):
        if os.path.isfile(os.path.join(pkg, "resident", "wire.py")):
            sys.path.insert(0, os.path.dirname(pkg))
            return pkg
    _with_site()
    import importlib.util

    spec = importlib.util.find_spec("zmem")  # finds an installed package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("no zmem package for this hook")
    return next(iter(spec.submodule_search_locations))


def _bare_package(pkg_dir: str) -> None:
    if "zmem" not in sys.modules:
        stub = type(sys)("zmem")
        stub.__path__ = [pkg_dir]
        stub.__file__ = os.path.join(pkg_dir, "__init__.py")
        sys.modules["zmem"] = stub


def main() -> None:
    pkg_dir = _package_dir()
    _bare_package(pkg_dir)
    from zmem.resident import wire

    if not sys.argv[1:] or sys.argv[1] in ("-h", "--help"):  # a person, not a host: no stdin
        os.write(1, wire.HELP.encode())
        os._exit(0)
    try:
        raw = sys.stdin.buffer.read()
    except (OSError, ValueError):  # no stdin
        raw = b""

    event, host = wire.parse_argv(sys.argv[1:])
    if event == "SessionStart":  # a plugin its host updated: upgrade the venv it runs
        from zmem.resident import plugin_venv

        root = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
        if plugin_venv.update_pending(root, _env_prefix()):
            plugin_venv.upgrade(root)
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
