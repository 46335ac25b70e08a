"""Harnesses steer ZMem through the environment it reads at each call (ZMEM_TEST_NOW for the
clock, ZMEM_EMBED_PROFILE): this puts the caller's values back however a run ends."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def restored_env(*keys: str, **values: str) -> Iterator[None]:
    """Set `values`, let the run change `keys` freely, then restore all of them."""
    saved = {k: os.environ.get(k) for k in (*keys, *values)}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
