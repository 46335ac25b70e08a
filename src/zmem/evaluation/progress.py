"""How long evaluation runs report progress without printing: each entry point takes a
`track` (wrap an iterable, report as it is consumed). The default is silent; a front end passes
its own progress bar (zmem.cli.output.track), since only front ends print."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

T = TypeVar("T")


class Tracker(Protocol):
    def __call__(
        self, items: Iterable[T], description: str, total: int | None = None
    ) -> Iterable[T]: ...


def quiet(items: Iterable[T], description: str, total: int | None = None) -> Iterable[T]:
    """No progress shown (libraries, tests, CI)."""
    return items
