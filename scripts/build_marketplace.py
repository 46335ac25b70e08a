#!/usr/bin/env python3
"""Build a plugin marketplace for ZMem: a directory that Claude Code (`claude plugin marketplace
add <dir>`, then `claude plugin install zmem@<name>`) and Codex (`codex plugin marketplace add
<dir>`, then `codex plugin add zmem@<name>`) accept. It holds the plugin tree the package
carries (src/zmem/plugin: manifests, hooks, the memory skill, the MCP declaration) and, in the
plugin's wheels/, the wheel its first-run bootstrap installs into the plugin's own venv.

    .venv/bin/python scripts/build_marketplace.py [--out dist/marketplace] [--wheel PATH]
        [--name zmem-local]

Without --wheel the wheel is built from this checkout with the standard front end
(`python -m build`). The plugin manifests carry the wheel's version, so a host sees an update
when a newer wheel is published in the same place."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "src" / "zmem" / "plugin"
WHEEL = re.compile(r"^zmem-(?P<version>[^-]+)-py3-none-any\.whl$")
DESCRIPTION = "Local-first long-term memory for coding agents: one SQLite file, full history."


def build_wheel(source: Path, outdir: Path) -> Path:
    """The wheel of `source` (a checkout), built by `python -m build` into `outdir`."""
    done = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(outdir), str(source)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"build_marketplace: the wheel did not build:\n{done.stderr[-3000:]}")
    wheels = sorted(outdir.glob("zmem-*.whl"))
    if not wheels:
        raise SystemExit(f"build_marketplace: no wheel in {outdir}")
    return wheels[-1]


def build(out: Path, wheel: Path, name: str, plugin: Path = PLUGIN) -> Path:
    """Write the marketplace into `out` (replaced if it exists). Returns the plugin dir."""
    found = WHEEL.match(wheel.name)
    if found is None:
        raise SystemExit(f"build_marketplace: {wheel} is not a zmem wheel")
    version = found["version"]
    if out.exists():
        shutil.rmtree(out)
    dest = out / "plugins" / "zmem"
    # zmem-hook is the entry point of an installed package; a plugin runs zmem_hook.py.
    shutil.copytree(
        plugin, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "zmem-hook")
    )
    (dest / "wheels").mkdir()
    shutil.copy2(wheel, dest / "wheels" / wheel.name)
    for manifest in (
        dest / ".claude-plugin" / "plugin.json",
        dest / ".codex-plugin" / "plugin.json",
    ):
        doc = json.loads(manifest.read_text(encoding="utf-8"))
        doc["version"] = version
        manifest.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    entry = {"name": "zmem", "source": "./plugins/zmem", "description": DESCRIPTION,
             "version": version}  # fmt: skip
    claude = {"name": name, "owner": {"name": "ZMem contributors"}, "plugins": [entry]}
    _write(out / ".claude-plugin" / "marketplace.json", claude)
    codex_entry = {
        "name": "zmem",
        "source": {"source": "local", "path": "./plugins/zmem"},
        "policy": {"installation": "AVAILABLE", "authentication": "ON_INSTALL"},
        "category": "Productivity",
    }
    codex = {"name": name, "interface": {"displayName": "ZMem"}, "plugins": [codex_entry]}
    _write(out / ".agents" / "plugins" / "marketplace.json", codex)
    return dest


def _write(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "dist" / "marketplace")
    ap.add_argument("--wheel", type=Path, help="a built zmem wheel (default: build one)")
    ap.add_argument("--name", default="zmem-local", help="the marketplace's name")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="zmem-wheel-") as tmp:
        wheel = args.wheel or build_wheel(ROOT, Path(tmp))
        dest = build(args.out, wheel, args.name)
        print(f"marketplace {args.name} in {args.out} (plugin {dest}, wheel {wheel.name})")
    print(f"  claude plugin marketplace add {args.out} && claude plugin install zmem@{args.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
