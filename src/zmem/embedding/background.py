"""A long job's model, on one worker thread at a lower CPU priority: on Linux a thread's nice
value is its own, and the model runtime's threads inherit it when the worker creates them, so
the job's model calls yield the CPU to the sessions beside it while the job's SQL, and the write
lock it holds, keep normal priority (a whole-process nice starved the lock holder: transactions
of 40 ms took 1.3 s). The caller may submit the next batch before committing the current one."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

NICE = 10


def _lower_priority() -> None:
    if not sys.platform.startswith("linux"):
        return  # elsewhere a priority is per process, which would starve the lock holder
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
    except (AttributeError, OSError):
        pass  # a priority we cannot lower only costs latency elsewhere


class BackgroundEmbedder:
    """`load()` runs on the worker (so the model's threads are born there); `submit(texts)`
    returns a future of the embedder's `embed(texts)`."""

    def __init__(self, load: Callable[[], Any]):
        self._pool = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="zmem-embed", initializer=_lower_priority
        )
        self._embedder = self._pool.submit(load).result()  # load errors raise here

    def submit(self, texts: Sequence[str]) -> Future:
        return self._pool.submit(self._embedder.embed, list(texts))

    def embed(self, texts: Sequence[str]) -> Any:
        return self.submit(texts).result()

    def close(self) -> None:
        self._pool.shutdown(wait=True)
