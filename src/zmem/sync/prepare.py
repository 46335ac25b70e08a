"""The CPU side of ingest-jsonl: each line parsed, validated, put through the capture policy,
and given its dedup norm and entity mentions, so the process that writes only runs SQL. A big
file is prepared in worker processes, chunk by chunk, in file order, while the writer commits
earlier chunks. Pure: never opens the store."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from zmem.capture import policy
from zmem.capture.entities import extract_entities
from zmem.errors import Refusal, UsageError
from zmem.models import REDACTED_TAG
from zmem.sync.records import BadRecord, MemoryRecord, parse
from zmem.tokens import similarity_norm

CHUNK_LINES = 1024
# Below this a worker's start (~0.3 s of imports under spawn) costs more than it saves.
PARALLEL_MIN_LINES = 4096

Line = tuple[int, str, Any]  # (line number, "ok" | "malformed" | "refused", record or reason)


def count_lines(path: Path) -> int:
    try:
        with path.open("rb") as handle:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None


def has_records(path: Path) -> bool:
    """Whether the file holds anything but blank lines (read until the first that is not)."""
    try:
        with path.open("rb") as handle:
            return any(raw.strip() for raw in handle)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None


def _chunks(path: Path) -> Iterator[list[tuple[int, bytes]]]:
    chunk: list[tuple[int, bytes]] = []
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            if raw.strip():
                chunk.append((number, raw))
                if len(chunk) == CHUNK_LINES:
                    yield chunk
                    chunk = []
    if chunk:
        yield chunk


def prepare_chunk(job: tuple[list[tuple[int, bytes]], str, str, str | None]) -> list[Line]:
    lines, now, capture_mode, source_ref = job
    out: list[Line] = []
    for number, raw in lines:
        try:
            out.append((number, "ok", _line(raw, number, now, capture_mode, source_ref)))
        except UnicodeDecodeError:
            out.append((number, "malformed", "not UTF-8 text"))
        except BadRecord as exc:
            out.append((number, "malformed", str(exc)))
        except ValueError as exc:  # JSONDecodeError
            out.append((number, "malformed", f"not JSON: {exc}"))
        except UsageError as exc:
            out.append((number, "malformed", str(exc)))
        except Refusal as exc:
            out.append((number, "refused", str(exc)))
    return out


def _line(raw: bytes, number: int, now: str, capture_mode: str, source_ref: str | None) -> Any:
    record = parse(json.loads(raw.decode("utf-8")), number, now)
    if not isinstance(record, MemoryRecord):
        return record
    f = record.fields
    # The add path's capture policy on a remote row: enums, content cap, redaction (auto),
    # injection tagging. The row keeps its recorded file hash: the file it names may not
    # exist on this machine.
    row = policy.prepare(
        f["content"],
        namespace=f["namespace"],
        type=f["type"],
        tags=f["tags"],
        signal=f["signal"],
        taint=f["taint"],
        source_ref=source_ref if source_ref is not None else f["source_ref"],
        confidence=f["confidence"],
        capture_mode=capture_mode,
        hash_source=False,
    )
    kinds = {w["type"] for w in row.warnings}
    record.redacted = "redacted" in kinds or REDACTED_TAG in row.tags
    record.secret_warning = "secret_warning" in kinds
    record.injection = "injection_risk" in kinds
    f.update(
        content=row.content,
        tags=row.tags,
        source_ref=row.source_ref,
        confidence=row.confidence,
        taint=row.taint,
    )
    if f["superseded_at"] is None:
        record.norm = similarity_norm(row.content)
    record.mentions = tuple(extract_entities(row.content, row.tags))
    return record


def prepared(
    path: Path, now: str, capture_mode: str, source_ref: str | None, workers: int, lines: int
) -> Iterator[list[Line]]:
    """Prepared chunks in file order: in worker processes when the file is big enough (spawned,
    not forked: the writer holds a database connection and, with MiniLM, model threads)."""
    jobs = ((chunk, now, capture_mode, source_ref) for chunk in _chunks(path))
    if workers <= 1 or lines < PARALLEL_MIN_LINES:
        yield from map(prepare_chunk, jobs)
        return
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_worker_start)
    try:
        yield from pool.map(prepare_chunk, jobs)
    finally:
        # An ingest that stops early (an error, Ctrl-C) must not wait for the rest of the file.
        pool.shutdown(wait=True, cancel_futures=True)


def _worker_start() -> None:
    # Ctrl-C is the writer's to handle: it stops the run and shuts the workers down, and a
    # traceback from every worker would bury its one-line message.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def default_workers() -> int:
    return max(1, min(4, os.cpu_count() or 1))
