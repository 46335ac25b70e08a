"""The optional local NLI judge (ZMEM_NLI_CMD): an argv template run once per polarity-flagged
pair of a contested cluster. It reads the two first sentences on stdin, one per line, and
prints a verdict word; only "entailment" counts. Any other verdict, a timeout, a non-zero exit
or a missing program parks the merge: the judge can only ever make consolidation more careful
than "never merge", never less."""

from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import dataclass, field

TIMEOUT_S = 30.0
ENTAILMENT = "entailment"


def parse_template(template: str) -> list[str]:
    """The argv of the template. On Windows, backslashes become forward slashes first: POSIX
    quoting rules would strip them from C:\\path\\judge.py."""
    if os.name == "nt":
        template = template.replace("\\", "/")
    return shlex.split(template)


@dataclass
class Judge:
    argv: list[str]
    calls: int = 0
    diagnostics: list[str] = field(default_factory=list)
    _verdicts: dict[tuple[str, str], str] = field(default_factory=dict)

    @classmethod
    def from_setting(cls, template: str | None) -> Judge | None:
        if not template:
            return None
        try:
            argv = parse_template(template)
        except ValueError as exc:  # unbalanced quotes
            judge = cls([])
            judge.diagnostics.append(f"ZMEM_NLI_CMD cannot be parsed ({exc}); merges stay parked")
            return judge
        return cls(argv)

    def verdict(self, first: str, second: str) -> str:
        """The judge's verdict word for one pair (cached per run), or "error"."""
        key = (first, second)
        if key not in self._verdicts:
            self._verdicts[key] = self._ask(first, second)
        return self._verdicts[key]

    def entails(self, first: str, second: str) -> bool:
        return self.verdict(first, second) == ENTAILMENT

    def _ask(self, first: str, second: str) -> str:
        if not self.argv:
            return "error"
        self.calls += 1
        # One sentence per line: a newline inside either would shift the judge's reading.
        stdin = f"{' '.join(first.split())}\n{' '.join(second.split())}\n"
        try:
            done = subprocess.run(
                self.argv,
                input=stdin.encode("utf-8"),
                capture_output=True,
                timeout=TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return self._fail(f"timed out after {TIMEOUT_S:g} s")
        except OSError as exc:
            return self._fail(f"cannot run {self.argv[0]!r}: {exc.strerror or exc}")
        if done.returncode != 0:
            return self._fail(f"exited {done.returncode}")
        out = done.stdout.decode("utf-8", "replace").split()
        if not out:
            return self._fail("printed no verdict")
        return out[0].strip().lower().strip(".:,;!\"'")

    def _fail(self, why: str) -> str:
        text = f"NLI judge failed ({why}); the merge stays parked"
        if text not in self.diagnostics:
            self.diagnostics.append(text)
        return "error"
