"""reembed: backfill missing vectors (flagless) or rebuild every live row's vector under a
profile (--all), recreating memory_vec at the profile's dimension inside the same single
transaction, so a crash can never leave a half-converted index. Only embedding bytes, their
model marker, embedded_at and the embedding_profile meta key change."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import apsw

from zmem import config
from zmem.db import vectors
from zmem.db.connect import transaction
from zmem.embedding import PROFILE_DIMS, PROFILE_MODELS, PROFILES, get_embedder
from zmem.errors import Refusal, UsageError

Progress = Callable[[int, int], None]


@dataclass
class ReembedReport:
    profile: str
    model: str
    dim: int
    mode: str  # "backfill" | "all"
    live_rows: int
    rows_to_change: int
    rows_changed: int
    index_recreated: bool
    dry_run: bool
    skipped: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _needs(conn: apsw.Connection, model: str, dim: int, everything: bool) -> list[tuple[int, str]]:
    """(rid, content) to embed. Backfill: rows without a vector. --all: rows whose vector is
    missing, of another model, or of another size (so switching back and forth is honest)."""
    out = []
    for rid, content, blob, row_model in vectors.live_rows(conn):
        # A vector of another size is as good as none (a handle opened before a conversion
        # may have stored one): the backfill replaces it too.
        if blob is None or (not everything and len(blob) != dim * 4):
            out.append((rid, content))
        elif everything and (row_model != model or len(blob) != dim * 4):
            out.append((rid, content))
    return out


def run(
    conn: apsw.Connection,
    data_dir: Any,
    *,
    everything: bool = False,
    profile: str | None = None,
    active_profile: str = "minilm",
    batch: int = 64,
    dry_run: bool = False,
    confirm: bool = False,
    progress: Progress | None = None,
) -> ReembedReport:
    if profile is not None and not everything:
        raise UsageError(
            f"--profile needs --all (it converts every vector): zmem reembed --all --profile "
            f"{profile}"
        )
    target = profile or active_profile
    if target not in PROFILES:
        raise UsageError(f"unknown profile {target!r} ({', '.join(PROFILES)})")
    if batch < 1:
        raise UsageError("--batch must be at least 1")
    model, dim = PROFILE_MODELS[target], PROFILE_DIMS[target]
    committed_profile, committed_dim = vectors.committed(conn)
    rows = _needs(conn, model, dim, everything)
    live = len(vectors.live_rows(conn))
    report = ReembedReport(
        target, model, dim, "all" if everything else "backfill", live, len(rows), 0,
        False, dry_run,
    )  # fmt: skip
    if not everything and committed_dim is not None and committed_dim != dim:
        raise Refusal(
            f"this store's vectors are {committed_dim}-d ({committed_profile}); backfilling "
            f"{dim}-d {target} vectors would mix sizes: zmem reembed --all --profile {target}"
        )
    if everything and target == "fake" and not confirm:
        real = [m for m in vectors.embedded_models(conn) if m not in (None, PROFILE_MODELS["fake"])]
        if real or committed_profile not in (None, "fake"):
            raise Refusal(
                "the store holds real (non-fake) vectors; replacing them with fake ones cannot "
                "be undone without the model: add --confirm if that is what you want"
            )
    if dry_run:
        return report
    try:
        embedder = get_embedder(target, data_dir)
    except Exception as exc:
        if not everything:  # flagless: no runtime or model is a graceful skip, not an error
            report.skipped = f"no {target} embedder here: {exc}"
            return report
        raise Refusal(f"cannot load the {target} model: {exc}") from None
    recreate = everything and (committed_dim != dim or not vectors.table_exists(conn))
    at = config.now_iso()
    with transaction(conn):
        if recreate:
            vectors.drop(conn)
            vectors.create(conn, target, dim)
            report.index_recreated = True
        elif not vectors.table_exists(conn) and vectors.available(conn):
            vectors.create(conn, target, dim)
        done = 0
        for start in range(0, len(rows), batch):
            chunk = rows[start : start + batch]
            matrix = embedder.embed([content for _, content in chunk])
            for (rid, _), vec in zip(chunk, matrix, strict=True):
                vectors.set_embedding(conn, rid, vec.astype("<f4").tobytes(), model, at)
            done += len(chunk)
            if progress is not None:
                progress(done, len(rows))
        # The index holds exactly the live rows' vectors of the committed model.
        vectors.reindex(conn, model)
        if everything or committed_dim is None:
            vectors.set_committed(conn, target, dim)
        report.rows_changed = done
    return report
