"""Hook launcher for every host: `<venv python> zmem_hook.py <Event> --host claude|codex|zcode`.

It imports the hook client without running zmem/__init__.py (which loads the whole store, about
125 ms): a bare package object stands in for `zmem`, so only the standard-library client
modules load until the hook knows it has work."""

import sys
import types
from pathlib import Path


def _package_dir() -> Path:
    # The plugin is a checkout: its own src/zmem is the package, found without importlib.util
    # (~4 ms of imports on every prompt). An install elsewhere is looked up the slow way.
    src = Path(__file__).resolve().parents[1] / "src"
    if (src / "zmem" / "hosts" / "client.py").is_file():
        sys.path.insert(0, str(src))
        return src / "zmem"
    import importlib.util

    spec = importlib.util.find_spec("zmem")  # finds the installed package without importing it
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    sys.path.insert(0, str(src))
    return src / "zmem"


def _load_client():
    pkg_dir = _package_dir()
    if "zmem" not in sys.modules:
        stub = types.ModuleType("zmem")
        stub.__path__ = [str(pkg_dir)]
        stub.__file__ = str(pkg_dir / "__init__.py")
        sys.modules["zmem"] = stub
    from zmem.hosts import client

    return client


if __name__ == "__main__":
    try:
        _load_client().main()
    except BaseException:  # a broken install must still never fail the host
        import os

        os._exit(0)
