"""Which code is running: the package directory, the file stamps the resident process compares
with the disk between answers, the content digest that lets two installs of one release
(Claude Code's and Codex's plugin copies) share a resident process, and the bytecode compile the
hooks rely on, and starting one of this install's modules detached (the resident process,
the keeper). Standard library only."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the zmem package this process runs


def env_for_this_install(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment as given (its ZMEM_* settings too: the resident process serves only
    clients with equal ones), with this install first on the import path."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(PACKAGE_DIR.parent), *filter(None, [env.get("PYTHONPATH")])]
    )
    return env


def start_detached(module: str, *args: str, env: dict[str, str] | None = None) -> bool:
    """`python -m <module> ARGS` of this install in a session of its own, no stdio; False when
    it could not be started. subprocess is imported here: it costs a cold hook ~6 ms."""
    import subprocess
    import sys

    try:
        subprocess.Popen(
            [sys.executable, "-m", module, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env=env_for_this_install(env),
        )
    except OSError:
        return False
    return True


def _code_files(pkg: Path) -> list[tuple[str, str, int, int]]:
    """(relative path, path, mtime ns, size) of the package's code, sorted: os.scandir, because
    the resident process checks this after every answer (pathlib's rglob costs 4x)."""
    root = str(pkg)
    out = []
    stack = [root]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for e in entries:
                if e.is_dir(follow_symlinks=False):
                    if e.name != "__pycache__":
                        stack.append(e.path)
                elif e.name.endswith((".py", ".sql")):
                    st = e.stat()
                    out.append((e.path[len(root) :], e.path, st.st_mtime_ns, st.st_size))
    out.sort()
    return out


def _digest(chunks: list[bytes]) -> str:
    # A change detector, not a security check: crc32 and adler32 need only zlib.
    crc, adler, size = 0, 1, 0
    for chunk in chunks:
        crc, adler, size = zlib.crc32(chunk, crc), zlib.adler32(chunk, adler), size + len(chunk)
    return f"{crc:08x}{adler:08x}{size:x}"


def build_id(pkg: Path = PACKAGE_DIR) -> str:
    """The code's file stamps: the resident process compares its own with the disk after each
    answer and while idle, and hands over to a fresh process when they differ (~1 ms for the
    package's 171 files)."""
    return _digest([f"{rel}:{mtime}:{size};".encode() for rel, _, mtime, size in _code_files(pkg)])


def code_digest(pkg: Path = PACKAGE_DIR) -> str:
    """What the code is, wherever it lies and whenever it was copied: two installs of the same
    release digest alike."""
    chunks = []
    for rel, path, _, _ in _code_files(pkg):
        chunks.append(rel.encode())
        try:
            with open(path, "rb") as fh:
                chunks.append(fh.read())
        except OSError:
            chunks.append(b"?")
    return _digest(chunks)


def is_package(pkg: str) -> bool:
    """`pkg` looks like a zmem package of this layout (the resident process checks a client's
    install before digesting it)."""
    return os.path.isfile(os.path.join(pkg, "resident", "wire.py"))


def compile_code() -> None:
    """Write the .pyc files of the code the hooks import (this package, its plugin/hooks/
    launchers included). The install compiles them once, but a plugin update keeps its venv, and
    where PYTHONDONTWRITEBYTECODE=1 nothing else would: every cold hook would compile the
    package again (~150 ms). Up-to-date files cost a stat each."""
    import compileall

    compileall.compile_dir(str(PACKAGE_DIR), quiet=2)
    hooks = PACKAGE_DIR / "plugin" / "hooks"  # not a package: compileall's walk skips nothing
    if hooks.is_dir():
        compileall.compile_dir(str(hooks), quiet=2, maxlevels=0)
