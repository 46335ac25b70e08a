"""Validating a write request and applying the capture policy to it: signal → confidence and
taint defaults, the closed enums, the content cap, secret redaction (auto mode) or advisory
(manual/reviewed), and prompt-injection tagging. Produces a fully-decided row; no I/O."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from zmem.capture.controls import has_controls, strip_controls
from zmem.capture.injection import injection_shapes
from zmem.capture.learned_injection import classified_as_injection
from zmem.capture.namespaces import validate_namespace
from zmem.capture.secrets import find_secrets, looks_like_secret, redact
from zmem.capture.source import file_path, hash_file, normalize_source_ref
from zmem.config import CAPTURE_MODES
from zmem.errors import Refusal, UsageError
from zmem.models import (
    GROUNDED_SIGNALS,
    INJECTION_TAG,
    MAX_CONTENT_CHARS,
    MAX_TAG_CHARS,
    MEMORY_TYPES,
    REDACTED_TAG,
    SIGNAL_CONFIDENCE,
    SIGNALS,
    TAINTS,
)

MAX_TAGS = 64


@dataclass(frozen=True)
class Prepared:
    content: str
    type: str
    tags: tuple[str, ...]
    namespace: str
    signal: str
    confidence: float
    taint: str
    source_ref: str | None
    source_hash: str | None
    warnings: tuple[dict[str, Any], ...]


def _choice(value: str, allowed: tuple[str, ...], what: str) -> str:
    if value not in allowed:
        raise UsageError(f"{what} {value!r} is not one of: {', '.join(allowed)}")
    return value


def validate_content(content: str) -> str:
    if not isinstance(content, str):
        raise UsageError("content must be text")
    if not content.strip():
        raise UsageError("content must not be empty")
    if len(content) > MAX_CONTENT_CHARS:
        raise UsageError(f"content is {len(content)} characters; the limit is {MAX_CONTENT_CHARS}")
    try:
        content.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError("content is not valid Unicode (lone surrogate)") from None
    return content


def parse_tags(tags: str | Iterable[str] | None) -> tuple[str, ...]:
    """ "a, b,a" or ["a", "b"] → ("a", "b"): trimmed, de-duplicated case-insensitively."""
    if tags is None:
        return ()
    parts = tags.split(",") if isinstance(tags, str) else [p for t in tags for p in t.split(",")]
    seen: dict[str, str] = {}
    for part in parts:
        tag = part.strip()
        if not tag:
            continue
        if len(tag) > MAX_TAG_CHARS:
            raise UsageError(f"tag {tag[:20]!r}... is longer than {MAX_TAG_CHARS} characters")
        if has_controls(tag):
            raise UsageError(f"tag {tag!r} contains control characters")
        seen.setdefault(tag.lower(), tag)
    if len(seen) > MAX_TAGS:
        raise UsageError(f"at most {MAX_TAGS} tags per memory")
    return tuple(seen.values())


def merge_tags(existing: Iterable[str], extra: Iterable[str]) -> tuple[str, ...]:
    return parse_tags([*existing, *extra])


def validate_confidence(confidence: float, name: str = "confidence") -> float:
    """A 0..1 number; `name` is what the error calls it (the option the user typed)."""
    try:
        value = float(confidence)
    except (TypeError, ValueError):
        raise UsageError(f"{name} {confidence!r} is not a number") from None
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise UsageError(f"{name} {confidence!r} must be between 0 and 1")
    return value


def default_taint(signal: str) -> str:
    return "trusted_internal" if signal in GROUNDED_SIGNALS else "untrusted_tool"


def prepare(
    content: str,
    *,
    namespace: str,
    type: str,
    tags: str | Iterable[str] | None,
    signal: str,
    taint: str | None,
    source_ref: str | None,
    confidence: float | None,
    capture_mode: str,
    hash_source: bool = True,
) -> Prepared:
    """Validate everything first (so a refusal writes nothing), then apply the policy.
    `hash_source=False` (sync ingest) keeps the file's recorded hash instead of reading the
    file here, where it may not exist."""
    validate_content(content)
    validate_namespace(namespace)
    _choice(type, MEMORY_TYPES, "type")
    _choice(signal, SIGNALS, "signal")
    _choice(capture_mode, CAPTURE_MODES, "capture mode")
    if taint is not None:
        _choice(taint, TAINTS, "taint")
    tag_list = parse_tags(tags)
    conf = SIGNAL_CONFIDENCE[signal] if confidence is None else validate_confidence(confidence)
    ref = normalize_source_ref(source_ref) if source_ref else None
    warnings: list[dict[str, Any]] = []
    content, stripped = strip_controls(content)
    if stripped:
        if not content.strip():
            raise UsageError("content is nothing but control characters")
        warnings.append({"type": "controls_stripped", "count": stripped})

    if capture_mode == "auto":
        if ref is not None and looks_like_secret(ref):
            raise Refusal("source_ref looks like a secret; not stored (capture mode auto)")
        content, redacted = redact(content)
        clean_tags = []
        for tag in tag_list:
            clean, n = redact(tag)
            clean_tags.append(clean)
            redacted += n
        tag_list = parse_tags(clean_tags)
        if redacted:
            tag_list = merge_tags(tag_list, [REDACTED_TAG])
            warnings.append({"type": "redacted", "count": redacted})
        if len(content) > MAX_CONTENT_CHARS:
            raise UsageError(f"content exceeds {MAX_CONTENT_CHARS} characters after redaction")
    else:
        found = len(find_secrets(content)) + sum(len(find_secrets(t)) for t in tag_list)
        if found:
            # manual/reviewed keep the text verbatim: the reviewer decides.
            warnings.append({"type": "secret_warning", "count": found})

    # The learned detector (0.3 ms a text) runs here, once per write; reads check the tag it
    # leaves and the cheap patterns only.
    shapes = injection_shapes(content) + (["learned"] if classified_as_injection(content) else [])
    if shapes:
        tag_list = merge_tags(tag_list, [INJECTION_TAG])
        warnings.append({"type": "injection_risk", "shapes": shapes})

    source_hash = None
    path = file_path(ref) if hash_source else None
    if path is not None:
        source_hash = hash_file(path)
        if source_hash is None:
            warnings.append({"type": "source_unreadable", "path": path})

    return Prepared(
        content=content,
        type=type,
        tags=tag_list,
        namespace=namespace,
        signal=signal,
        confidence=conf,
        taint=taint or default_taint(signal),
        source_ref=ref,
        source_hash=source_hash,
        warnings=tuple(warnings),
    )
