"""Copied into each of ZMem's Hermes plugins by `zmem setup hermes`: when Hermes's own Python
has no zmem package (ZMem was installed as a tool, not into Hermes's environment), the plugin
imports zmem from the install that ran setup, recorded beside this file in zmem_install.json.

Only the top-level modules that install's provider path needs (zmem and its runtime
requirements, never the MCP server's or the inspector's) are served, and only after Hermes's
own finders came up empty: Hermes keeps its own packages, and an optional import of its own
(it imports `mcp` when it can) does not start finding ours. Standard library only."""

import importlib.machinery
import importlib.util
import json
import os
import sys

INFO = "zmem_install.json"


class _Finder:
    def __init__(self, paths, modules):
        self.paths = list(paths)
        self.modules = frozenset(modules)

    def find_spec(self, name, path=None, target=None):
        if path is not None or name not in self.modules:
            return None  # submodules resolve through their package's own __path__
        return importlib.machinery.PathFinder.find_spec(name, self.paths)


def install(plugin_dir):
    """Make `import zmem` work in this process: a no-op when Hermes's Python has zmem, else the
    finder for the recorded install (an ImportError saying what to do when it cannot serve)."""
    if importlib.util.find_spec("zmem") is not None:
        return
    if any(isinstance(f, _Finder) for f in sys.meta_path):
        return
    try:
        with open(os.path.join(plugin_dir, INFO), encoding="utf-8") as fh:
            info = json.load(fh)
    except (OSError, ValueError) as exc:
        raise ImportError(
            "ZMem is not installed in Hermes's Python and no install was recorded: run "
            "`zmem setup hermes` from your ZMem install"
        ) from exc
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if info.get("python") != here:
        raise ImportError(
            f"ZMem's install ({info.get('prefix')}) runs Python {info.get('python')}, Hermes "
            f"runs {here}: install ZMem for Hermes's Python "
            f"(uv tool install --python {here} --reinstall zmem), then `zmem setup hermes`"
        )
    sys.meta_path.append(_Finder(info["paths"], info["modules"]))
