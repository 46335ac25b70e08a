"""The README's install, upgrade and removal commands, run verbatim for each route (uv, pipx)
on a fresh machine (issue 49): a clone of an upstream repository, `make wheel`, the tool
installed, `zmem setup claude --fetch-model` (the model from a package index on loopback);
then upstream moves on (a newer version), and the README's upgrade lines (`git pull && make
wheel`, the install over the old one) give the new version with the hooks still answering
and setup changing nothing; last, the README's removal lines leave Claude Code's settings as
they were, no tool, no keeper, and the memories kept. Each README line for the other route
is the one line left out."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from package_index import package_index, weights_wheel

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # the test venv's uv and pipx (the test extra)
NETWORK_VARS = ("PIP_", "UV_", "SSL_CERT", "REQUESTS_CA", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
                "http_proxy", "https_proxy", "no_proxy")  # fmt: skip
INSTALLERS = ("uv", "pipx")


def readme_blocks() -> dict[str, str]:
    """The README's install, upgrade and removal blocks, by what each begins with."""
    found = re.findall(r"^```sh\n(.*?)^```", (ROOT / "README.md").read_text(), re.S | re.M)
    named = {"install": "make wheel", "upgrade": "git pull && make wheel",
             "remove": "zmem setup --remove --all"}  # fmt: skip
    out = {}
    for name, first in named.items():
        [block] = [b for b in found if b.startswith(first + " ") or b.startswith(first + "\n")]
        out[name] = block
    return out


def for_route(block: str, installer: str) -> str:
    """The block's lines for one installer: a line that runs the other one is left out."""
    others = {i for i in INSTALLERS if i != installer}
    keep = [ln for ln in block.splitlines() if ln.split(" ", 1)[0] not in others]
    assert any(ln.startswith(installer + " ") for ln in keep), (installer, block)
    return "\n".join(["set -euo pipefail", *keep])


class Machine:
    """A fresh user with a clone of upstream and nothing installed."""

    def __init__(self, base: Path, upstream: Path) -> None:
        self.base = base
        self.home = base / "home"
        self.home.mkdir()
        self.bin = base / "bin"  # where uv and pipx put `zmem`
        self.tools = base / "tools"  # uv and pipx themselves (the test venv's), nothing else
        self.tools.mkdir()
        for tool in INSTALLERS:
            (self.tools / tool).symlink_to(BIN / tool)
        self.clone = base / "zmem"
        subprocess.run(["git", "clone", "-q", str(upstream), str(self.clone)], check=True)
        self.settings = self.home / ".claude" / "settings.json"

    def env(self, **extra: str) -> dict[str, str]:
        real_home = Path(os.environ.get("HOME") or Path.home())
        env = {k: v for k, v in os.environ.items() if k.startswith(NETWORK_VARS)}
        env |= {
            "PATH": os.pathsep.join([str(self.bin), str(self.tools),
                                     os.environ.get("PATH") or "/usr/bin:/bin"]),  # fmt: skip
            "HOME": str(self.home), "LANG": "C.UTF-8",
            "UV_TOOL_DIR": str(self.base / "uv-tools"), "UV_TOOL_BIN_DIR": str(self.bin),
            "UV_PYTHON_DOWNLOADS": "never", "UV_PYTHON": sys._base_executable,
            "PIPX_HOME": str(self.base / "pipx"), "PIPX_BIN_DIR": str(self.bin),
            "PIPX_DEFAULT_BACKEND": "pip", "PIPX_DEFAULT_PYTHON": sys._base_executable,
            "UV_CACHE_DIR": os.environ.get("UV_CACHE_DIR") or str(real_home / ".cache" / "uv"),
            "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR") or str(real_home / ".cache" / "pip"),
            "ZMEM_HOOKD_IDLE_S": "30",
        }  # fmt: skip
        # The dev venv must not leak into the user's shell (python3 is the system's).
        env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                      if Path(p) != BIN)  # fmt: skip
        env.update(extra)
        return env

    def sh(self, script: str, **extra: str) -> subprocess.CompletedProcess:
        done = subprocess.run(["bash", "-c", script], cwd=self.clone, env=self.env(**extra),
                              capture_output=True, text=True, timeout=900)  # fmt: skip
        assert done.returncode == 0, f"{script}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done

    def zmem(self, *args: str) -> subprocess.CompletedProcess:
        return self.sh(" ".join(["zmem", *map(_quote, args)]))

    def session_start(self) -> str:
        """What Claude Code's SessionStart hook, as setup wired it, gives the model in the
        project's checkout (the command run the way Claude Code runs it: through a shell)."""
        doc = json.loads(self.settings.read_text())
        [command] = [h["command"] for e in doc["hooks"]["SessionStart"] for h in e["hooks"]]
        payload = json.dumps({"hook_event_name": "SessionStart", "source": "startup",
                              "session_id": f"s{time.monotonic_ns()}", "cwd": str(self.clone),
                              "transcript_path": ""})  # fmt: skip
        done = subprocess.run(
            ["bash", "-c", command],
            input=payload,
            cwd=self.clone,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def keeper_running(self) -> bool:
        done = subprocess.run(["pgrep", "-f", f"zmem.resident.keeper {self.home / '.zmem'}"],
                              capture_output=True, text=True)  # fmt: skip
        return bool(done.stdout.strip())


def _quote(word: str) -> str:
    return "'" + word.replace("'", "'\\''") + "'"


@pytest.fixture(scope="module")
def upstream(tmp_path_factory) -> Path:
    """A bare repository holding this checkout's files as one commit (what users clone)."""
    base = tmp_path_factory.mktemp("upstream")
    work = base / "work"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    for rel in files:
        if (ROOT / rel).is_file():
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / rel).write_bytes((ROOT / rel).read_bytes())
            (work / rel).chmod((ROOT / rel).stat().st_mode)
    _git(work, "init", "-q", "-b", "main")
    _git(work, "add", "-A")
    _git(work, "commit", "-q", "-m", "zmem")
    bare = base / "zmem.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    return bare


def _git(where: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
                   cwd=where, check=True, capture_output=True)  # fmt: skip


def _release(upstream: Path, base: Path, suffix: str) -> str:
    """Upstream moves on: a commit with the version bumped by `suffix`. The new version."""
    work = base / f"release{suffix}"
    subprocess.run(["git", "clone", "-q", str(upstream), str(work)], check=True)
    init = work / "src" / "zmem" / "__init__.py"
    text = init.read_text()
    old = re.search(r'__version__ = "([^"]+)"', text)
    assert old
    new = re.sub(r"(\.post\d+)?$", suffix, old[1], count=1)
    init.write_text(text.replace(old[0], f'__version__ = "{new}"'))
    _git(work, "commit", "-q", "-am", f"release {new}")
    _git(work, "push", "-q", "origin", "HEAD:main")
    return new


def _only_the_wheel(clone: Path) -> None:
    """`make wheel` leaves one wheel in dist/ and nothing else behind: no dev venv, no model,
    no setuptools build/ or egg-info in the clone."""
    [wheel] = (clone / "dist").iterdir()
    assert re.fullmatch(r"zmem-[^-]+-py3-none-any\.whl", wheel.name)
    assert not (clone / ".venv").exists() and not (clone / "build").exists()
    assert not list((clone / "src").glob("*.egg-info"))
    status = subprocess.run(["git", "status", "--porcelain", "--ignored"], cwd=clone,
                            capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert set(status.split()) <= {"!!", "dist/", ".venv-build/"}, status


@pytest.fixture(scope="module")
def weights() -> Path:
    return weights_wheel()


@pytest.mark.parametrize("installer", INSTALLERS)
def test_the_readme_install_upgrade_and_removal_verbatim(tmp_path, upstream, weights, installer):
    blocks = readme_blocks()
    m = Machine(tmp_path, upstream)
    m.settings.parent.mkdir(parents=True)
    mine = '{\n  "theme": "dark"\n}\n'
    m.settings.write_text(mine)
    try:
        with package_index(weights) as index:
            m.sh(for_route(blocks["install"], installer), ZMEM_MODEL_INDEX_URL=index.url)
        _only_the_wheel(m.clone)
        version = m.zmem("--version").stdout.split()[-1]
        assert "/bin/zmem-hook " in m.settings.read_text()
        assert str(m.clone) not in m.settings.read_text()  # the tool, not the clone
        m.zmem("add", "--type", "lesson", "--signal", "user",
               "Tag releases only from main (readme-marker-4417)")  # fmt: skip
        assert "readme-marker-4417" in m.session_start()
        recall = json.loads(m.zmem("recall", "how to tag releases", "--json").stdout)
        assert any("readme-marker-4417" in r["content"] for r in recall["results"])
        assert json.loads(m.zmem("model", "--json").stdout)["verified"]  # fetched by setup

        newer = _release(upstream, tmp_path, f".post{INSTALLERS.index(installer) + 1}")
        upgraded = m.sh(for_route(blocks["upgrade"], installer))
        _only_the_wheel(m.clone)  # the newer one replaced the old
        assert m.zmem("--version").stdout.split()[-1] == newer != version, upgraded.stdout
        assert "readme-marker-4417" in m.session_start()  # the hooks outlive the upgrade
        again = json.loads(m.zmem("setup", "claude", "--no-model", "--json").stdout)
        assert again["written"] == []

        removed = m.sh(for_route(blocks["remove"], installer))
        assert "kept:" in removed.stdout and str(m.home / ".zmem") in removed.stdout
        assert m.settings.read_text() == mine
        assert not (m.bin / "zmem").exists() and not (m.bin / "zmem-hook").exists()
        assert not list((m.base / "uv-tools").glob("zmem*")) if installer == "uv" else True
        assert not (m.base / "pipx" / "venvs" / "zmem").exists()
        deadline = time.monotonic() + 30
        while m.keeper_running() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not m.keeper_running()
        assert (m.home / ".zmem" / "store.sqlite").exists()  # the memories stay
    finally:
        subprocess.run(["pkill", "-f", str(m.home / ".zmem")], check=False)
