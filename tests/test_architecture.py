"""The layering the architecture promises, held by a test: imports only point down and never
in a circle, front ends never reach db/, SQL lives in db/, click in cli/, only the CLI's output
module and the hook emitter print, the hosts' shims stay thin, every module says what it owns,
no junk-drawer modules, no giant files. The checkers take a tree, so the last tests plant a
cycle and a db import in a copy of the package and watch them fail."""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "zmem"
# The plugin tree the package carries (hook launchers, the skill's scripts) is not part of the
# library's layering: those files are the hosts' shims, held thin by SHIMS below.
PLUGIN = SRC / "plugin"
MODULES = sorted(p for p in SRC.rglob("*.py") if not p.is_relative_to(PLUGIN))

# Lower number = lower layer. A module may import its own layer or any lower one.
LAYERS = {
    "cli": 4,
    "hosts": 4,
    "resident": 4,
    "mcp_server": 4,
    "hermes_provider": 4,
    "agent_tools": 4,
    "webui": 4,
    "store": 3,
    "doctor": 3,
    "maintenance": 3,
    "sync": 3,
    "evaluation": 3,
    "retrieval": 2,
    "access": 2,
    "embedding": 2,
    "capture": 2,
    "db": 1,
    "outputs": 1,
    "models": 0,
    "errors": 0,
    "config": 0,
    "tokens": 0,
    "namespace_keys": 0,
    "untrusted": 0,
    "locations": 0,
    "codex_trust": 0,
    "layout": 0,
    "ports": 0,
    "installation": 0,
}
FRONT_ENDS = {area for area, layer in LAYERS.items() if layer == 4}
# Printing belongs to the front ends' output modules; the launchers (plugin/hooks/) are shims.
MAY_PRINT = {SRC / "cli" / "output.py", SRC / "cli" / "plain.py", SRC / "hosts" / "emit.py"}
# What the hosts' shims may import from zmem: the entry points, nothing under them.
SHIMS = {
    PLUGIN / "hooks" / "zmem_hook.py": set(),
    PLUGIN / "hooks" / "zmem-hook": set(),
    PLUGIN / "hooks" / "zmem_launch.py": {
        "zmem.resident.wire",
        "zmem.resident.client",
        "zmem.resident.plugin_venv",
    },
    PLUGIN / "hooks" / "bootstrap.py": set(),
    PLUGIN / "hooks" / "zmem_mcp_pending.py": set(),
    PLUGIN / "skills" / "memory" / "scripts" / "store.py": set(),
    PLUGIN / "skills" / "memory" / "scripts" / "doctor.py": set(),
    # Finds a Python that has ZMem for the two above (issue 20), then imports the CLI.
    PLUGIN / "skills" / "memory" / "scripts" / "python_finder.py": {"zmem.cli"},
    # The Hermes plugins' way to zmem when Hermes's Python lacks it (issue 31).
    SRC / "hermes_provider" / "plugins" / "zmem_bridge.py": {"zmem.hermes_provider"},
}
SHIM_MAX_LINES = 80
SQL = re.compile(
    r"\b(SELECT\s.+\sFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|"
    r"CREATE\s+(TABLE|INDEX|TRIGGER|VIRTUAL))\b",
    re.S,
)


# ---- reading a tree ------------------------------------------------------------------------


def _module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, src: Path) -> list[str]:
    """Every zmem module this file imports, anywhere in it (function bodies and TYPE_CHECKING
    blocks too: an import loop is a loop wherever the import sits). `from a import b` names
    the module a.b when there is one, else the package a."""
    known = {_module_name(p, src) for p in src.rglob("*.py")}
    here = _module_name(path, src)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "zmem"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if base.split(".")[0] != "zmem":
                continue
            for alias in node.names:
                child = f"{base}.{alias.name}"
                found.append(child if child in known else base)
    return [m for m in found if m in known]


def import_graph(src: Path) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(src.rglob("*.py")):
        name = _module_name(path, src)
        edges = set(_imports(path, src)) - {name}
        if name == "zmem.cli":
            # The click registration: cli/__init__.py imports its command modules for their
            # side effect on the group, and they import the group back. Not a layering loop.
            edges = {e for e in edges if not e.startswith("zmem.cli.")}
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def _area(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None  # the package root re-exports


def front_end_db_imports(src: Path) -> list[tuple[str, str]]:
    """(module, db module) for every front end (or doctor) that reaches db/ directly."""
    out = []
    for name, edges in import_graph(src).items():
        if _area(name) in FRONT_ENDS | {"doctor"}:
            out += [(name, e) for e in sorted(edges) if _area(e) == "db"]
    return out


# ---- the rules, on this tree ---------------------------------------------------------------


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_imports_point_down(path):
    area = _area(_module_name(path, SRC))
    if area is None or area == "__main__":
        return  # the package root re-exports; __main__ launches the CLI
    assert area in LAYERS, f"{area} is not placed in a layer"
    for target in _imports(path, SRC):
        target_area = _area(target)
        if target_area is None:  # `from zmem import MemoryStore, __version__`
            continue
        assert target_area in LAYERS, f"{path.name} imports unknown area {target_area}"
        assert LAYERS[target_area] <= LAYERS[area], f"{area} must not import {target_area}"


def test_no_import_cycle_anywhere():
    cycle = find_cycle(import_graph(SRC))
    assert cycle is None, " -> ".join(cycle or [])


def test_front_ends_and_doctor_never_import_db():
    assert front_end_db_imports(SRC) == []


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_only_output_modules_print(path):
    if path in MAY_PRINT:
        return
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name):
                assert f.id not in ("print", "Console"), f"{path} prints ({f.id})"
            elif isinstance(f, ast.Attribute):
                owner = ast.unparse(f.value)
                assert not (owner == "click" and f.attr in ("echo", "secho")), f"{path} echoes"
                # Asking whether a stream is a terminal prints nothing.
                writes = f.attr not in ("isatty", "fileno")
                assert not (writes and owner in ("sys.stdout", "sys.stderr")), (
                    f"{path} writes {owner}"
                )
                assert f.attr != "Console", f"{path} builds a rich Console"


@pytest.mark.parametrize("path", sorted(SHIMS), ids=lambda p: str(p.relative_to(ROOT)))
def test_shims_stay_thin(path):
    lines = path.read_text().splitlines()
    assert len(lines) <= SHIM_MAX_LINES, f"{path.name}: logic belongs in the package"
    reached = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("zmem"):
            reached |= {
                f"{node.module}.{a.name}"
                if a.name in ("wire", "client", "plugin_venv")
                else node.module
                for a in node.names
            }
        elif isinstance(node, ast.Import):
            reached |= {a.name for a in node.names if a.name.startswith("zmem.")}
    assert reached <= SHIMS[path], f"{path.name} imports {sorted(reached - SHIMS[path])}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_sql_only_in_db(path):
    if _area(_module_name(path, SRC)) == "db":
        return
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            assert not SQL.search(node.value), f"SQL text in {path}: {node.value[:60]!r}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_click_only_in_cli(path):
    if _area(_module_name(path, SRC)) == "cli":
        return
    assert "click" not in _imported_top_levels(path), f"{path} imports click"


def _imported_top_levels(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_every_module_says_what_it_owns(path):
    doc = ast.get_docstring(ast.parse(path.read_text()))
    assert doc and len(doc.split()) >= 4, f"{path} needs an opening docstring"


def test_no_junk_drawer_modules():
    names = {p.stem for p in MODULES}
    assert not names & {"utils", "helpers", "misc", "common"}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_modules_stay_small(path):
    assert len(path.read_text().splitlines()) <= 600, f"{path} should split along a seam"


# ---- the checkers fail on what they guard against ------------------------------------------


@pytest.fixture
def tree(tmp_path):
    copy = tmp_path / "zmem"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def _plant(path: Path, line: str) -> None:
    text = path.read_text()
    head, sep, rest = text.partition("\nfrom __future__ import annotations\n")
    assert sep, path
    path.write_text(head + sep + line + "\n" + rest)


def test_a_planted_cycle_is_found(tree):
    assert find_cycle(import_graph(tree)) is None
    # The loop this restructuring removed: links imported the request types from pipeline.
    _plant(tree / "retrieval" / "links.py", "from zmem.retrieval.pipeline import plan_tiers")
    cycle = find_cycle(import_graph(tree))
    assert cycle is not None and cycle[0] == cycle[-1]
    assert {"zmem.retrieval.links", "zmem.retrieval.pipeline"} <= set(cycle)


def test_a_planted_db_import_in_a_front_end_is_found(tree):
    assert front_end_db_imports(tree) == []
    _plant(tree / "cli" / "recall.py", "from zmem.db import recall as db")
    _plant(tree / "resident" / "dispatch.py", "import zmem.db.connect")
    assert front_end_db_imports(tree) == [
        ("zmem.cli.recall", "zmem.db.recall"),
        ("zmem.resident.dispatch", "zmem.db.connect"),
    ]
