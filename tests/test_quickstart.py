"""docs/quickstart.md, run verbatim: every ```sh block in order, in one bash session, from a
fresh clone of this checkout, with a temporary HOME, so the page a new user follows cannot
drift from what ZMem does. The clone reuses this run's venv (its install is what `make
install` would make: the same commit), so no package is downloaded; its install stamp is
refreshed first, so the clone's `make install` finds it up to date instead of re-pointing the
shared venv's editable install at the clone."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV = Path(sys.prefix) if sys.prefix != sys.base_prefix else None


def fresh_clone(tmp_path: Path) -> Path:
    """A clone of this checkout whose .venv is this run's, its install stamp refreshed."""
    assert VENV is not None
    clone = tmp_path / "zmem"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    (clone / ".venv").symlink_to(VENV, target_is_directory=True)
    stamp = VENV / ".installed"
    if not stamp.exists():
        pytest.skip("this run's venv was not made by make install")
    stamp.touch()  # newer than the clone's pyproject.toml: nothing to reinstall
    return clone


def blocks(text: str) -> list[str]:
    return re.findall(r"^```sh\n(.*?)^```", text, re.S | re.M)


@pytest.mark.skipif(VENV is None, reason="needs this run's venv (make test)")
def test_the_quickstart_runs_verbatim(tmp_path):
    clone = fresh_clone(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    script = "\n".join(["set -euo pipefail", *blocks((ROOT / "docs/quickstart.md").read_text())])
    env = {
        "HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
        "ZMEM_EMBED_PROFILE": "fake", "ZMEM_HOOK_DAEMON": "0", "ZMEM_SESSION_UPKEEP": "0",
        # make install's model build: where this run's tests keep theirs, not the real ~/.cache
        "ZMEM_MODEL_DIR": str(tmp_path / "models"),
    }  # fmt: skip
    done = subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "namespace   project:github.com/acme/webapp" in out
    assert re.search(r"Run `make migrate` before the integration tests", out)
    settings = home / ".claude" / "settings.json"
    assert "zmem_hook.py" in settings.read_text()
    assert out.count("settings.json: unchanged") == 1  # the third setup changed nothing
    assert (home / "scratch" / "memories.jsonl").read_text().count('"kind":"memory"') == 2


@pytest.mark.skipif(VENV is None, reason="needs this run's venv (make test)")
def test_the_readme_top_commands_run(tmp_path):
    """The README's first block: `make demo` verbatim in a fresh clone (`make test` is this very
    run, so it is the one line not repeated here)."""
    assert VENV is not None
    block = blocks((ROOT / "README.md").read_text())[0]
    lines = [ln for ln in block.splitlines() if ln.strip() and not ln.startswith("make test")]
    assert lines and lines[0].startswith("make demo")
    clone = fresh_clone(tmp_path)
    env = {"HOME": str(tmp_path / "home"), "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "LANG": "C.UTF-8", "ZMEM_MODEL_DIR": str(tmp_path / "models")}  # fmt: skip
    done = subprocess.run(["bash", "-c", "set -e\n" + "\n".join(lines)], cwd=clone, env=env,
                          capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "==> Store summary" in done.stdout
