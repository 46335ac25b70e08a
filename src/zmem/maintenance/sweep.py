"""sweep: pruning the per-session cooldown sentinels the hooks leave in the data dir
(.capture-prompted-<session>, .convention-prompted-<session>). A sentinel only means something
to the session it names, so one older than the age limit is garbage. Nothing that is not a
sentinel-named regular file is ever touched; fail-open per file."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zmem.errors import UsageError
from zmem.layout import SENTINEL_KINDS, SENTINEL_SUFFIX

PREFIXES = tuple(f".{kind}{SENTINEL_SUFFIX}" for kind in SENTINEL_KINDS)


@dataclass
class SweepResult:
    dirs: list[str]
    max_age_days: float
    dry_run: bool
    scanned: int = 0
    removed: int = 0
    kept: int = 0
    failed: int = 0
    paths: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def summary_line(self) -> str:
        verb = "would remove" if self.dry_run else "removed"
        return (
            f"sweep: {verb} {self.removed} of {self.scanned} sentinel(s) older than "
            f"{self.max_age_days:g} days; kept {self.kept}"
        )


def sweep(dirs: Iterable[Path], max_age_days: float, *, dry_run: bool = False) -> SweepResult:
    if not max_age_days >= 0:
        raise UsageError("--max-age-days must be 0 or more")
    folders = list(dict.fromkeys(Path(d).expanduser() for d in dirs))
    result = SweepResult([str(d) for d in folders], max_age_days, dry_run)
    cutoff = time.time() - max_age_days * 86400
    for folder in folders:
        try:
            entries = list(folder.iterdir())
        except OSError:
            continue  # a dir that is not there has nothing to sweep
        for path in entries:
            if not path.name.startswith(PREFIXES):
                continue
            try:
                st = path.lstat()
            except OSError:
                continue
            if not path.is_file() or path.is_symlink():
                continue  # a sentinel is a plain empty file; anything else is not ours
            result.scanned += 1
            if st.st_mtime >= cutoff:
                result.kept += 1
                continue
            if not dry_run:
                try:
                    path.unlink()
                except OSError:
                    result.failed += 1
                    continue
            result.removed += 1
            result.paths.append(str(path))
    return result
