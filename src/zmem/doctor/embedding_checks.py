"""The embedding and MCP checks: the active profile against the store's committed vectors, the
MiniLM model files deep-verified against their pins (hashes cached in memory by mtime and size,
since doctor writes nothing), the cross-encoder's model-file state, the fake-profile warning,
and the MCP token's scope (never its value)."""

from __future__ import annotations

import importlib.util
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from zmem import access, config, installation
from zmem.doctor.base import FAIL, NA, OK, RANK, WARN, check, existing
from zmem.embedding import PROFILE_DIMS, cross_encoder, model_files, profiles, weights
from zmem.errors import ZMemError
from zmem.store import inspect

# The spec's note on what a model checksum mismatch means, printed verbatim (with this build's
# actual pins beside it, in PINNED_MODEL).
CHECKSUM_NOTE = (
    "The published pin covers the Xenova ONNX export (onnx/model.onnx), NOT the "
    "sentence-transformers PyTorch weights — different builds of the same checkpoint hash "
    'differently. checksum_mismatch therefore means "wrong build installed"'
)
PINNED_MODEL = (
    f"this build pins onnx/model.onnx of sentence-transformers/all-MiniLM-L6-v2 at "
    f"{model_files.OFFICIAL_REVISION[:12]} (sha256 {model_files.OFFICIAL_MODEL_SHA256}); an "
    "offline build is checked against the sha256 recorded beside it"
)
# (path, expected sha256 or None for the recorded one, mtime_ns, size, inode) -> verified. A
# cache in memory only: doctor writes nothing, so a fresh process hashes once per model file.
_VERIFIED: dict[tuple[Any, ...], bool] = {}


# ---- MCP token, embeddings ---------------------------------------------------------------


def _mcp_server_present() -> bool:
    """The server module and the `mcp` SDK it runs on (a dependency: missing means a broken
    install)."""
    return all(importlib.util.find_spec(m) is not None for m in ("zmem.mcp_server", "mcp"))


def mcp_token(env: Mapping[str, str]) -> dict[str, Any]:
    env_token = bool(env.get("ZMEM_MCP_TOKEN", "").strip())
    raw_file = env.get("ZMEM_MCP_TOKEN_FILE", "").strip()
    token_file = Path(raw_file).expanduser() if raw_file else None
    extra: dict[str, Any] = {"env_token": env_token, "token_file": str(token_file or "") or None}
    if not _mcp_server_present():
        detail = installation.missing_piece("the MCP server", "mcp")
        if env_token or token_file:
            detail += "; ZMEM_MCP_TOKEN/ZMEM_MCP_TOKEN_FILE is set but nothing reads it"
        return check("mcp-token", NA, detail, mcp_server=False, **extra)
    try:
        tokens = access.load_tokens(env)  # the server's own reading; never shows a value
    except ZMemError as exc:
        return check("mcp-token", FAIL, f"the server refuses to start: {exc}", **extra)
    if not tokens.configured:
        return check("mcp-token", OK, "no MCP token configured", unscoped_token=False, **extra)
    unscoped = tokens.unscoped
    if unscoped:
        which = (
            unscoped[0] if unscoped[0] == "ZMEM_MCP_TOKEN" else f"ZMEM_MCP_TOKEN_FILE {token_file}"
        )
        detail = f"{which} is an unscoped operator token (full access to every namespace); "
        detail += 'scope it with a token file {"token": ..., "namespaces": [...]}'
        return check("mcp-token", WARN, detail, unscoped_token=True, **extra)
    scopes = sorted(next(t.scope.namespaces for t in tokens.tokens if t.scope.namespaces))
    detail = f"scoped token: {', '.join(scopes)}"
    return check("mcp-token", OK, detail, unscoped_token=False, namespaces=scopes, **extra)


def _verified(path: Path, expected: str | None) -> bool:
    st = path.stat()
    key = (str(path), expected, st.st_mtime_ns, st.st_size, st.st_ino)
    if key not in _VERIFIED:
        _VERIFIED[key] = model_files.read_if_valid(path, expected) is not None
    return _VERIFIED[key]


def _model_state(data_dir: Path) -> dict[str, Any]:
    files = []
    for kind, path, expected in (
        (
            "official-export",
            model_files.official_model_path(data_dir),
            model_files.OFFICIAL_MODEL_SHA256,
        ),
        ("built-from-weights", model_files.built_model_path(data_dir), None),
    ):
        if path.is_file():
            files.append(
                {"kind": kind, "path": str(path), "checksum_ok": _verified(path, expected)}
            )
    tok_path = model_files.tokenizer_path(data_dir)
    tokenizer = {"path": str(tok_path), "present": tok_path.is_file(), "checksum_ok": None}
    if tokenizer["present"]:
        tokenizer["checksum_ok"] = _verified(tok_path, weights.TOKENIZER_SHA256)
    checked = [f["checksum_ok"] for f in files] + (
        [tokenizer["checksum_ok"]] if tokenizer["present"] else []
    )
    usable = next((f["kind"] for f in files if f["checksum_ok"]), None)
    return {
        "files": files,
        "tokenizer": tokenizer,
        "source": usable if usable and tokenizer["checksum_ok"] else None,
        "checksum_ok": all(checked) if files else None,
    }


def _temporary(path: Path) -> bool:
    root = Path(tempfile.gettempdir()).resolve()
    return existing(path).resolve().is_relative_to(root)


def _cross_encoder(settings: config.Settings) -> dict[str, Any]:
    path = settings.cross_encoder_model
    block: dict[str, Any] = {
        "enabled": settings.cross_encoder,
        "model_path": path,
        "pinned": False,  # an operator-supplied file: no checksum could be published
        "model_file": "unset",
        "tokenizer_file": "unset",
        "loads": None,
        "problem": None,
    }
    if path:
        model = Path(path).expanduser()
        block["model_file"] = "present" if model.is_file() else "missing"
        tok = model.with_name(cross_encoder.TOKENIZER_FILE)
        block["tokenizer_file"] = "present" if tok.is_file() else "missing"
    if not settings.cross_encoder:
        return block
    if not path:
        block["problem"] = "ZMEM_CROSS_ENCODER=1 but ZMEM_CROSS_ENCODER_MODEL is unset"
    elif block["model_file"] == "missing":
        block["problem"] = f"no model file at {path}"
    elif block["tokenizer_file"] == "missing":
        block["problem"] = f"no {cross_encoder.TOKENIZER_FILE} beside {path}"
    else:
        block["problem"] = cross_encoder.reranker_problem(path)
        block["loads"] = block["problem"] is None
    return block


def embeddings(settings: config.Settings, facts: inspect.StoreFacts | None) -> dict[str, Any]:
    profile = settings.embed_profile
    dim = PROFILE_DIMS[profile]
    model = _model_state(settings.data_dir)
    runtime = profiles.runtime_available()
    weights_installed = weights.source_files() is not None
    embeds = profile == "fake" or (runtime and (model["source"] or weights_installed))
    temporary = _temporary(settings.store_path)
    committed = (facts.committed_profile, facts.committed_dim) if facts else (None, None)
    stored = facts.vectors_by_model if facts else {}
    fake_store = "fake" in (profile, committed[0]) or "fake-16" in stored
    health: dict[str, Any] = {
        "profile": profile,
        "dim": dim,
        "runtime": runtime,
        "vec0": inspect.vector_extension_present(),
        "offline_weights": weights_installed,
        "model": model,
        "checksum_ok": model["checksum_ok"],
        "hash_cache": "memory",
        "store": {"committed_profile": committed[0], "committed_dim": committed[1]},
        "conversion_pending": facts.conversion_pending if facts else None,
        "vectors_by_model": stored,
        "temporary_store": temporary,
        "fake_profile_warning": fake_store and not temporary,
        "cross_encoder": _cross_encoder(settings),
    }
    findings: list[tuple[str, str]] = []
    if committed[1] is not None and committed[1] != dim:
        why = f"store vectors are {committed[1]}-d ({committed[0]}) but {profile} is {dim}-d"
        if embeds:
            why += f": every command refuses; run `zmem reembed --all --profile {profile}`"
        findings.append((FAIL if embeds else WARN, why))
    pending = facts.conversion_pending if facts else None
    if pending:
        findings.append((
            WARN,
            f"an interrupted reembed to {pending['profile']} is pending ({pending['phase']} "
            f"phase, {pending['done'] or 0} rows staged): `zmem reembed --all --profile "
            f"{pending['profile']}` finishes it",
        ))  # fmt: skip
    if health["fake_profile_warning"]:
        findings.append((WARN, "fake profile on a non-temporary store (tests/CI only)"))
    if model["checksum_ok"] is False:
        health["checksum_note"] = CHECKSUM_NOTE
        health["pinned"] = PINNED_MODEL
        findings.append((WARN, "checksum_mismatch: a model file fails its pinned sha256"))
    if profile == "minilm" and not runtime:
        findings.append((WARN, "onnxruntime/tokenizers/numpy missing: lexical + entity lanes only"))
    elif profile == "minilm" and not embeds:
        findings.append((WARN, f"no verified MiniLM model: recall is lexical; {model_files.FIX}"))
    if not health["vec0"]:
        findings.append((WARN, "sqlite-vec not installed: no vector lane"))
    ce = health["cross_encoder"]
    if ce["problem"]:
        findings.append((WARN, f"cross-encoder enabled but unusable ({ce['problem']})"))
    if findings:
        status = max((s for s, _ in findings), key=RANK.__getitem__)
        detail = "; ".join(text for _, text in findings)
    else:
        status = OK
        where = model["source"] or ("built on first use" if profile == "minilm" else "no files")
        verified = ", checksum_ok" if model["checksum_ok"] else ""
        detail = f"{profile} {dim}-d ({where}{verified}); cross-encoder "
        detail += "on" if ce["enabled"] else "off"
    return check("embeddings", status, detail, embeddings_health=health)
