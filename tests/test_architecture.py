"""The layering the architecture promises, held by a test: imports only point down, SQL lives in
db/, click in cli/, every module says what it owns, no junk-drawer modules, no giant files."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "zmem"
MODULES = sorted(p for p in SRC.rglob("*.py"))

# Lower number = lower layer. A module may import its own layer or any lower one.
LAYERS = {
    "cli": 4,
    "hosts": 4,
    "mcp_server": 4,
    "hermes_provider": 4,
    "store": 3,
    "reading": 3,
    "maintenance": 3,
    "sync": 3,
    "evaluation": 3,
    "retrieval": 2,
    "embedding": 2,
    "capture": 2,
    "db": 1,
    "models": 0,
    "errors": 0,
    "config": 0,
    "tokens": 0,
}
SQL = re.compile(
    r"\b(SELECT\s.+\sFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|"
    r"CREATE\s+(TABLE|INDEX|TRIGGER|VIRTUAL))\b",
    re.S,
)


def _area(path: Path) -> str | None:
    rel = path.relative_to(SRC).parts
    if rel[0] in ("__init__.py", "__main__.py"):
        return None  # the package root re-exports; __main__ launches the CLI
    return rel[0].removesuffix(".py")


def _zmem_imports(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("zmem"):
            parts = node.module.split(".")
            if len(parts) == 1:
                found += [alias.name for alias in node.names]
            else:
                found.append(parts[1])
        elif isinstance(node, ast.Import):
            found += [a.name.split(".")[1] for a in node.names if a.name.startswith("zmem.")]
    return found


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_imports_point_down(path):
    area = _area(path)
    if area is None:
        return
    assert area in LAYERS, f"{area} is not placed in a layer"
    for target in _zmem_imports(ast.parse(path.read_text())):
        if target in ("__version__", "MemoryStore"):
            target = "store" if target == "MemoryStore" else "config"
        assert target in LAYERS, f"{path.name} imports unknown area {target}"
        assert LAYERS[target] <= LAYERS[area], f"{area} must not import {target}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_sql_only_in_db(path):
    if _area(path) == "db":
        return
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            assert not SQL.search(node.value), f"SQL text in {path}: {node.value[:60]!r}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_click_only_in_cli(path):
    if _area(path) == "cli":
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
