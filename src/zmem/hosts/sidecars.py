"""Files the hooks keep beside the store, never inside it: the capture-correction queue
(<data>/queue/<ns>.json, reviewed with queue-list / queue-clear; store-independent), the
pending pre-tool fence a later prompt delivers, what a session's context already holds, and
per-session cooldown markers. Writes are
atomic (temp file + rename) so a hook killed mid-write leaves the old file. Standard library."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

from zmem.hosts.opsring import session_key
from zmem.layout import SENTINEL_KINDS, SENTINEL_SUFFIX

QUEUE_MAX_ITEMS = 200
STALE_DAYS = 14
STALE_CONFIDENCE = 0.6
_NS_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


# ---- capture-correction queue -----------------------------------------------------------------


def queue_path(data_dir: Path, namespace: str) -> Path:
    safe = _NS_SAFE.sub("_", namespace).strip("_") or "ns"
    import hashlib  # ~3.6 ms (OpenSSL) that a prompt without a correction need not pay

    digest = hashlib.sha256(namespace.encode()).hexdigest()[:8]
    return data_dir / "queue" / f"{safe[:80]}-{digest}.json"


def queue_items(data_dir: Path, namespace: str) -> list[dict[str, Any]]:
    try:
        doc = json.loads(queue_path(data_dir, namespace).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    items = doc.get("items") if isinstance(doc, dict) else None
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def all_queues(data_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Every namespace's queued items (the inspector's queue page), namespaces sorted."""
    found: dict[str, list[dict[str, Any]]] = {}
    for path in sorted((data_dir / "queue").glob("*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        namespace = doc.get("namespace") if isinstance(doc, dict) else None
        if isinstance(namespace, str) and queue_path(data_dir, namespace) == path:
            items = queue_items(data_dir, namespace)
            if items:
                found[namespace] = items
    return dict(sorted(found.items()))


def _save_queue(data_dir: Path, namespace: str, items: list[dict[str, Any]]) -> None:
    doc = {"namespace": namespace, "items": items[-QUEUE_MAX_ITEMS:]}
    _atomic_write(queue_path(data_dir, namespace), json.dumps(doc, ensure_ascii=False, indent=1))


def enqueue(data_dir: Path, namespace: str, item: dict[str, Any]) -> dict[str, Any]:
    items = queue_items(data_dir, namespace)
    if any(i.get("message") == item.get("message") for i in items):
        return item  # the same correction typed twice is one candidate
    import uuid  # only when a correction is queued: see capture.writer._uuid4

    item = {"id": uuid.uuid4().hex[:12], "queued_at": time.time(), **item}
    items.append(item)
    _save_queue(data_dir, namespace, items)
    return item


def clear(
    data_dir: Path,
    namespace: str,
    *,
    ids: tuple[str, ...] = (),
    all_items: bool = False,
    drop_stale: bool = False,
    now: float | None = None,
) -> int:
    """Remove queue items by exactly one selector; returns how many went."""
    if sum((bool(ids), all_items, drop_stale)) != 1:
        raise ValueError("exactly one of --id, --all, --drop-stale is required")
    items = queue_items(data_dir, namespace)
    if all_items:
        keep: list[dict[str, Any]] = []
    elif ids:
        keep = [i for i in items if i.get("id") not in ids]
    else:
        cutoff = (now if now is not None else time.time()) - STALE_DAYS * 86400
        keep = [
            i
            for i in items
            if not (
                float(i.get("queued_at") or 0) < cutoff
                and float(i.get("confidence") or 0) < STALE_CONFIDENCE
            )
        ]
    removed = len(items) - len(keep)
    if removed:
        _save_queue(data_dir, namespace, keep)
    return removed


# ---- pending pre-tool fence ---------------------------------------------------------------------


def pending_path(data_dir: Path, session_id: str) -> Path:
    return data_dir / "ops" / f"pending-{session_key(session_id)}.txt"


def put_pending(data_dir: Path, session_id: str, block: str) -> None:
    _atomic_write(pending_path(data_dir, session_id), block)


def take_pending(data_dir: Path, session_id: str) -> str | None:
    """The pending fence, removed as it is read (delivered at most once): the caller decides
    whether the host already showed it (hosts.transcript.showed_pretool)."""
    path = pending_path(data_dir, session_id)
    taken = path.with_name(f".{path.name}.{os.getpid()}.taken")
    try:
        os.replace(path, taken)  # atomic claim: two prompts never both deliver it
    except OSError:
        return None
    try:
        return taken.read_text(encoding="utf-8") or None
    except OSError:
        return None
    finally:
        try:
            taken.unlink()
        except OSError:
            pass


# ---- per-session cooldown markers ----------------------------------------------------------------


def marker_path(data_dir: Path, kind: str, session_id: str) -> Path:
    # The spec's sentinel names (layout.py), which `sweep` prunes by prefix.
    assert kind in SENTINEL_KINDS
    return data_dir / f".{kind}{SENTINEL_SUFFIX}{session_key(session_id)}"


def claim_marker(data_dir: Path, kind: str, session_id: str) -> bool:
    """True the first time per session (the marker is created), False after."""
    path = marker_path(data_dir, kind, session_id)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return False
    os.close(fd)
    return True


# ---- what this session's context already holds -------------------------------------------------

# A row injected into a session's context is not injected again into that context (issue 33):
# the pending pre-tool fence and the next prompt's recall share this record. A compaction or a
# cleared session starts a new context and the record with it; this bound covers a context the
# host compacted without telling (auto compaction before PreCompact existed, a lost hook).
SEEN_TTL_S = 6 * 3600


def seen_path(data_dir: Path, session_id: str) -> Path:
    return data_dir / "ops" / f"seen-{session_key(session_id)}.json"


def _seen_times(data_dir: Path, session_id: str, now: float) -> dict[str, float]:
    try:
        doc = json.loads(seen_path(data_dir, session_id).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    ids = doc.get("ids") if isinstance(doc, dict) else None
    if not isinstance(ids, dict):
        return {}
    cutoff = now - SEEN_TTL_S
    return {i: at for i, at in ids.items() if isinstance(at, int | float) and at >= cutoff}


def seen(data_dir: Path, session_id: str) -> set[str]:
    """The ids already injected into this session's current context."""
    return set(_seen_times(data_dir, session_id, time.time()))


def mark_seen(data_dir: Path, session_id: str, ids: tuple[str, ...] | list[str]) -> None:
    if not ids:
        return
    now = time.time()
    kept = _seen_times(data_dir, session_id, now)  # what has aged out goes
    kept.update(dict.fromkeys(ids, now))
    _atomic_write(seen_path(data_dir, session_id), json.dumps({"ids": kept}))


def reset_seen(data_dir: Path, session_id: str) -> None:
    try:
        seen_path(data_dir, session_id).unlink()
    except OSError:
        pass
