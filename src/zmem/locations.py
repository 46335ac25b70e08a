"""Where the store and the data dir are, from the environment alone (os only): the rule
config.load_settings applies, kept here so the `zmem` entry can find the resident process of a
store before it imports the settings machinery (issue 49: a warm `zmem recall` pays for an
interpreter and a socket, not for dataclasses and pathlib)."""

from __future__ import annotations

import os
from collections.abc import Mapping

DEFAULT_DATA_DIR = "~/.zmem"
STORE_FILENAME = "store.sqlite"


def data_dir(env: Mapping[str, str] | None = None) -> str:
    """ZMEM_DATA, else ~/.zmem, expanded."""
    env = os.environ if env is None else env
    raw = env.get("ZMEM_DATA", "").strip()
    return os.path.expanduser(raw or DEFAULT_DATA_DIR)


def store_path(given: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """--store, else ZMEM_STORE, else <data dir>/store.sqlite, expanded."""
    env = os.environ if env is None else env
    if given is not None:
        return os.path.expanduser(given)
    raw = env.get("ZMEM_STORE", "").strip()
    return os.path.expanduser(raw) if raw else os.path.join(data_dir(env), STORE_FILENAME)
