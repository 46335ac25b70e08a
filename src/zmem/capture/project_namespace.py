"""The project namespace a hook reads and writes, derived canonically from the checkout: the
git remote when there is one (so two clones of one repository share memory), else
`project:<basename>` of the checkout root. Also resolves ZMEM_NS_MIGRATION_MAP entries into
(legacy key, canonical key) pairs. Reads .git/config directly: no git subprocess on the hook
path. The files belong to the checkout or to a directory above it anyone may write, so each is
read as hostile input (zmem.untrusted): a FIFO or device planted as .git/config is skipped."""

from __future__ import annotations

import json
import re
from pathlib import Path

from zmem import untrusted
from zmem.models import GLOBAL_NAMESPACE, fold_namespace_case

_REMOTE = re.compile(r'^\s*\[remote\s+"([^"]+)"\]\s*$')
_URL = re.compile(r"^\s*url\s*=\s*(.+?)\s*$")
_SECTION = re.compile(r"^\s*\[")
_SCP = re.compile(r"^(?:[^@/]+@)?([^:/]+):(.+)$")  # git@host:owner/repo.git
# A .git file or commondir is one line; a repository's config rarely passes a few KB. A longer
# config is read up to here: the remote sections come first in every git-written file.
GITFILE_CAP = 4096
CONFIG_CAP = 256 * 1024


def find_checkout(cwd: str | Path) -> tuple[Path, Path | None]:
    """(checkout root, git dir or None). Walks up from cwd to the first `.git`."""
    start = Path(cwd).expanduser().resolve()
    for d in (start, *start.parents):
        dot = d / ".git"
        if dot.is_dir():
            return d, dot
        if dot.is_file():  # a worktree or submodule: "gitdir: <path>"
            try:
                text = untrusted.read_text(dot, GITFILE_CAP).strip()
            except OSError:
                return d, None
            if text.startswith("gitdir:"):
                gitdir = Path(text[7:].strip())
                gitdir = gitdir if gitdir.is_absolute() else (d / gitdir).resolve()
                common = gitdir / "commondir"
                if common.is_file():
                    try:
                        rel = untrusted.read_text(common, GITFILE_CAP).strip()
                    except OSError:
                        return d, None
                    gitdir = (gitdir / rel).resolve()
                return d, gitdir
            return d, None
    return start, None


def remote_url(gitdir: Path) -> str | None:
    """origin's url, else the first remote's."""
    try:
        lines = untrusted.read_text(gitdir / "config", CONFIG_CAP).splitlines()
    except OSError:
        return None
    urls: dict[str, str] = {}
    current: str | None = None
    for line in lines:
        m = _REMOTE.match(line)
        if m:
            current = m.group(1)
            continue
        if _SECTION.match(line):
            current = None
            continue
        u = _URL.match(line)
        if current and u and current not in urls:
            urls[current] = u.group(1).strip('"')
    if not urls:
        return None
    return urls.get("origin") or next(iter(urls.values()))


def canonical_remote(url: str) -> str | None:
    """host/owner/repo, lower-cased (ASCII), no scheme, user, port, `.git` or trailing slash, so
    https, ssh and scp spellings of one repository, in any case, agree."""
    url = url.strip()
    if not url:
        return None
    if "://" in url:
        rest = url.split("://", 1)[1]
        host, _, path = rest.partition("/")
        host = host.rsplit("@", 1)[-1].split(":", 1)[0]
    else:
        m = _SCP.match(url)
        if not m or url.startswith(("/", ".")):
            return None  # a local path remote names no shared repository
        host, path = m.group(1), m.group(2)
    path = path.strip("/")
    if path.endswith(".git"):
        path = path[:-4]
    path = path.strip("/")
    if not host or not path:
        return None
    key = re.sub(r"\s+", "-", f"{host.lower()}/{path}")
    # Owner and repository compare without case on the forges: one spelling (models).
    return fold_namespace_case(f"project:{key}").removeprefix("project:")


def derive(cwd: str | Path | None) -> str:
    """The canonical project namespace for a working directory."""
    if not cwd:
        return GLOBAL_NAMESPACE
    try:
        root, gitdir = find_checkout(cwd)
    except OSError:
        return GLOBAL_NAMESPACE
    if gitdir is not None:
        url = remote_url(gitdir)
        key = canonical_remote(url) if url else None
        if key:
            return f"project:{key}"
    name = re.sub(r"\s+", "-", root.name) or "root"
    return f"project:{name}"


def checkout_namespace(cwd: str | Path | None) -> tuple[str, Path] | None:
    """(the namespace the hooks derive, the checkout root) when cwd is inside a git checkout;
    None elsewhere, where no project is implied."""
    if not cwd:
        return None
    try:
        root, gitdir = find_checkout(cwd)
        marked = (root / ".git").exists()
    except OSError:
        return None
    if gitdir is None and not marked:
        return None
    return derive(cwd), root


def migration_map(raw: str | None) -> list[tuple[str, str]]:
    """(legacy key, the namespace its checkout derives to) for every entry of
    ZMEM_NS_MIGRATION_MAP whose checkout exists; a malformed map yields nothing."""
    try:
        mapping = json.loads(raw) if raw else {}
    except ValueError:
        return []
    if not isinstance(mapping, dict):
        return []
    out = []
    for old, path in mapping.items():
        if not isinstance(old, str) or not isinstance(path, str) or not old.strip():
            continue
        try:
            if Path(path).expanduser().exists():
                derived = derive(path)
                if derived and derived != old:
                    out.append((old, derived))
        except OSError:
            continue
    return out


def migration_pairs(raw: str | None, namespace: str) -> list[str]:
    """Legacy keys ZMEM_NS_MIGRATION_MAP says belong to this namespace: entries whose checkout
    path derives to it. A malformed map yields nothing (a hook must not fail over it)."""
    if not raw:
        return []
    try:
        mapping = json.loads(raw)
    except ValueError:
        return []
    if not isinstance(mapping, dict):
        return []
    out = []
    for old, path in mapping.items():
        if not isinstance(old, str) or not isinstance(path, str) or old == namespace:
            continue
        try:
            if Path(path).expanduser().exists() and derive(path) == namespace:
                out.append(old)
        except OSError:
            continue
    return out
