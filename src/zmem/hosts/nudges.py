"""The convention-capture nudge (issue 33): when a session changes a file that holds a
project's conventions (AGENTS.md, CONTRIBUTING, lint and format configs, CI workflows), the
PostToolUse hook asks once per session whether it set a rule worth remembering, and leaves the
spec's cooldown marker (`.convention-prompted-<session>`, pruned by `zmem sweep`). Decided from
the payload and one marker file: no store. Standard library only."""

from __future__ import annotations

from zmem.hosts import sidecars

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

    from zmem.hosts.events import HookEvent

# Basenames (lowercase) of files whose edits usually set a project rule.
CONVENTION_FILES = frozenset({
    "agents.md", "claude.md", "contributing.md", "contributing.rst", "contributing",
    "styleguide.md", ".editorconfig", ".pre-commit-config.yaml", "ruff.toml", ".ruff.toml",
    "pyproject.toml", "setup.cfg", "tox.ini", ".flake8", "mypy.ini", ".pylintrc",
    ".eslintrc", ".eslintrc.js", ".eslintrc.json", ".eslintrc.cjs", "eslint.config.js",
    "eslint.config.mjs", ".prettierrc", ".prettierrc.json", "prettier.config.js",
    "biome.json", "tsconfig.json", ".golangci.yml", "rustfmt.toml", "clippy.toml",
    "makefile", "justfile", "taskfile.yml", ".gitattributes", "codeowners",
})  # fmt: skip
EDIT_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit", "apply_patch"})


def _conventional(path: str) -> bool:
    norm = path.replace("\\", "/").lower()
    name = norm.rsplit("/", 1)[-1]
    return name in CONVENTION_FILES or "/.github/workflows/" in f"/{norm}"


def convention(data_dir: Path, event: HookEvent) -> str | None:
    """The nudge, the first time in a session that it edits a conventions file; else None."""
    if event.tool_failed or event.tool_name not in EDIT_TOOLS or not event.session_id:
        return None
    changed = [p for p in event.paths if _conventional(p)]
    if not changed:
        return None
    if not sidecars.claim_marker(data_dir, "convention", event.session_id):
        return None
    name = changed[0].replace("\\", "/").rsplit("/", 1)[-1]
    return (
        f"ZMem: {name} holds this project's conventions. If this change set a rule later "
        "sessions should follow, capture it once with the memory skill "
        '(add --type convention --signal user --content "...").'
    )
