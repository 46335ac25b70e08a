"""Every ZMEM_* knob the spec names, resolved once into a frozen Settings, plus the one clock.
`now()` re-reads ZMEM_TEST_NOW on every call because harnesses move the clock between calls
inside one process."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from zmem.errors import ConfigError, UsageError
from zmem.locations import DEFAULT_DATA_DIR, STORE_FILENAME  # one rule with the CLI's entry

CAPTURE_MODES = ("manual", "reviewed", "auto")
# Profiles this build can name. "minilm" is the operator default; when its runtime is absent the
# store runs model-absent (fail-open), exactly as the spec requires of a missing embedding runtime.
EMBED_PROFILES = ("minilm", "fake")

# Knobs the spec names for features this build does not have yet. They are not read; setting
# one earns a one-line warning, so nobody believes, say, that backups happen. Each comes back
# into Settings with its feature (the maintenance and MCP issues).

# One canonical timestamp shape: fixed-width microseconds and a Z, so lexical order in SQL equals
# chronological order and --as-of comparisons can stay plain string comparisons.
_TS_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


@dataclass(frozen=True)
class Settings:
    store_path: Path
    data_dir: Path
    capture_mode: str = "manual"
    embed_profile: str = "minilm"
    allow_newer_schema: bool = False
    link_threshold: float = 0.75
    inject_floor_prompt: float = 0.25
    inject_floor_recent: float = 0.5
    inject_floor_gate_none: float = 0.4
    inject_token_budget: int = 1500
    ctx_budget: int = 8000
    mmr_lambda: float = 0.7
    unfold_top_k: int = 3
    unfold_max_hops: int = 3
    unfold_budget: int = 4
    query_context: bool = True
    cross_encoder: bool = False
    cross_encoder_model: str | None = None
    ns_migration_map: str | None = None
    backup_dir: Path | None = None  # None: <store dir>/backups
    backup_interval_days: float = 1.0  # backup --if-due
    sentinel_sweep_days: float = 7.0  # sweep --max-age-days default
    session_upkeep: bool = True  # SessionStart launches due backups, organize and the sweep
    hub_sync_minutes: float = 15.0  # the upkeep syncs with the team hub this often; 0: never
    # consolidate / organize: the shared cadence gate, prune, compression, the judge, the gates
    consolidate_min_interval_days: float = 7.0
    consolidate_growth_threshold: float = 0.2  # a fraction: 0.2 = 20 % more live rows
    keeper_compress_chars: int = 4000
    unrecalled_days: float = 30.0
    nli_cmd: str | None = None
    organize_episode_bound: int = 256
    organize_idle_hours: float = 0.0
    # Values that could not be parsed fall back to their default; the reason is kept here so a
    # front end can say so once instead of failing a hook over a typo.
    warnings: tuple[str, ...] = ()


class _Reader:
    def __init__(self, env: Mapping[str, str]):
        self.env = env
        self.warnings: list[str] = []

    def raw(self, name: str) -> str | None:
        value = self.env.get(name)
        if value is None or value.strip() == "":
            return None
        return value.strip()

    def number(
        self,
        name: str,
        default: float,
        lo: float | None = None,
        hi: float | None = None,
        integer: bool = False,
    ) -> float:
        raw = self.raw(name)
        if raw is None:
            return default
        try:
            value = int(raw) if integer else float(raw)
        except ValueError:
            self.warnings.append(f"{name}={raw!r} is not a number; using {default}")
            return default
        if not math.isfinite(value):
            self.warnings.append(f"{name}={raw!r} is not finite; using {default}")
            return default
        # The spec clamps these knobs rather than refusing them.
        if lo is not None and value < lo:
            value = lo
        if hi is not None and value > hi:
            value = hi
        return value

    def flag(self, name: str, default: bool) -> bool:
        raw = self.raw(name)
        if raw is None:
            return default
        lowered = raw.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        self.warnings.append(f"{name}={raw!r} is not a boolean; using {int(default)}")
        return default


# The per-namespace consolidation cap (rows one run clusters per namespace); organize's episode
# bound is clamped to it.
CONSOLIDATE_NAMESPACE_CAP = 20000
EPISODE_BOUND_CAP = CONSOLIDATE_NAMESPACE_CAP


def _compress_chars(r: _Reader) -> int:
    """ZMEM_KEEPER_COMPRESS_CHARS is a cap, not a switch: 0 or less means the default."""
    value = int(r.number("ZMEM_KEEPER_COMPRESS_CHARS", 4000, None, 65536, integer=True))
    return value if value > 0 else 4000


def debug_enabled(env: Mapping[str, str] | None = None) -> bool:
    """ZMEM_DEBUG: tracebacks instead of one-line errors (read where an error is shown)."""
    env = os.environ if env is None else env
    return env.get("ZMEM_DEBUG", "").strip().lower() in ("1", "true", "yes", "on")


def default_data_dir(env: Mapping[str, str] | None = None, home: Path | None = None) -> Path:
    """ZMEM_DATA, or ~/.zmem. `home` stands for ~ in that default, where a caller resolves the
    files of the home it was given (setup and doctor); a ZMEM_DATA written with ~ expands
    against this process's HOME, as the store and the hooks expand it."""
    env = os.environ if env is None else env
    raw = env.get("ZMEM_DATA", "").strip()
    if raw:
        return Path(raw).expanduser()
    return home / ".zmem" if home is not None else Path(DEFAULT_DATA_DIR).expanduser()


def load_settings(
    env: Mapping[str, str] | None = None, store_path: str | Path | None = None
) -> Settings:
    """Resolve the environment into Settings. Raises ConfigError for values that would change what
    gets written (capture mode, embedding profile): guessing there is worse than refusing."""
    env = os.environ if env is None else env
    r = _Reader(env)
    data_dir = default_data_dir(env)
    if store_path is None:
        store_raw = r.raw("ZMEM_STORE")
        store = Path(store_raw).expanduser() if store_raw else data_dir / STORE_FILENAME
    else:
        store = Path(store_path).expanduser()

    capture_mode = (r.raw("ZMEM_CAPTURE_MODE") or "manual").lower()
    if capture_mode not in CAPTURE_MODES:
        raise ConfigError(
            f"ZMEM_CAPTURE_MODE={env.get('ZMEM_CAPTURE_MODE')!r} is not one of "
            f"{', '.join(CAPTURE_MODES)}"
        )
    profile = (r.raw("ZMEM_EMBED_PROFILE") or "minilm").lower()
    if profile not in EMBED_PROFILES:
        raise ConfigError(
            f"ZMEM_EMBED_PROFILE={env.get('ZMEM_EMBED_PROFILE')!r} is not a known profile "
            f"({', '.join(EMBED_PROFILES)})"
        )
    backup_raw = r.raw("ZMEM_BACKUP_DIR")
    return Settings(
        store_path=store,
        data_dir=data_dir,
        capture_mode=capture_mode,
        embed_profile=profile,
        allow_newer_schema=r.flag("ZMEM_ALLOW_NEWER_SCHEMA", False),
        link_threshold=r.number("ZMEM_LINK_THRESHOLD", 0.75, 0.0, 1.0),
        inject_floor_prompt=r.number("ZMEM_INJECT_FLOOR_PROMPT", 0.25, 0.0, 1.0),
        inject_floor_recent=r.number("ZMEM_INJECT_FLOOR_RECENT", 0.5, 0.0, 1.0),
        inject_floor_gate_none=r.number("ZMEM_INJECT_FLOOR_GATE_NONE", 0.4, 0.0, 1.0),
        inject_token_budget=int(r.number("ZMEM_INJECT_TOKEN_BUDGET", 1500, 0, integer=True)),
        ctx_budget=int(r.number("ZMEM_CTX_BUDGET", 8000, 0, integer=True)),
        mmr_lambda=r.number("ZMEM_MMR_LAMBDA", 0.7, 0.0, 1.0),
        unfold_top_k=int(r.number("ZMEM_UNFOLD_TOP_K", 3, 1, 10, integer=True)),
        unfold_max_hops=int(r.number("ZMEM_UNFOLD_MAX_HOPS", 3, 1, 10, integer=True)),
        unfold_budget=int(r.number("ZMEM_UNFOLD_BUDGET", 4, 1, 20, integer=True)),
        query_context=r.flag("ZMEM_QUERY_CONTEXT", True),
        cross_encoder=r.flag("ZMEM_CROSS_ENCODER", False),
        cross_encoder_model=r.raw("ZMEM_CROSS_ENCODER_MODEL"),
        ns_migration_map=r.raw("ZMEM_NS_MIGRATION_MAP"),
        backup_dir=Path(backup_raw).expanduser() if backup_raw else None,
        backup_interval_days=r.number("ZMEM_BACKUP_INTERVAL_DAYS", 1.0, 0.0, 3650.0),
        sentinel_sweep_days=r.number("ZMEM_SENTINEL_SWEEP_DAYS", 7.0, 0.0, 3650.0),
        session_upkeep=r.flag("ZMEM_SESSION_UPKEEP", True),
        hub_sync_minutes=r.number("ZMEM_HUB_SYNC_MINUTES", 15.0, 0.0, 525600.0),
        consolidate_min_interval_days=r.number(
            "ZMEM_CONSOLIDATE_MIN_INTERVAL_DAYS", 7.0, 0.0, 3650.0
        ),
        consolidate_growth_threshold=r.number("ZMEM_CONSOLIDATE_GROWTH_THRESHOLD", 0.2, 0.0, 100.0),
        keeper_compress_chars=_compress_chars(r),
        unrecalled_days=r.number("ZMEM_UNRECALLED_DAYS", 30.0, 0.0, 36500.0),
        nli_cmd=r.raw("ZMEM_NLI_CMD"),
        organize_episode_bound=int(
            r.number("ZMEM_ORGANIZE_EPISODE_BOUND", 256, 0, EPISODE_BOUND_CAP, integer=True)
        ),
        organize_idle_hours=r.number("ZMEM_ORGANIZE_IDLE_HOURS", 0.0, 0.0, 87600.0),
        warnings=tuple(r.warnings),
    )


def parse_instant(text: str) -> datetime:
    """Parse an ISO-8601 instant (date-only, naive, Z or offset) into an aware UTC datetime."""
    raw = text.strip()
    try:
        parsed = datetime.fromisoformat(raw)
    except ValueError:
        raise UsageError(f"not an ISO-8601 timestamp: {text!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    try:
        moment = parsed.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:00-05:00 is past the last representable instant
        raise UsageError(f"timestamp out of range: {text!r}") from None
    if moment.year < 1000:
        # Stored instants compare as text; a 3-digit year would sort wrongly against them.
        raise UsageError(f"timestamp out of range (years 1000-9999): {text!r}")
    return moment


def format_instant(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime(_TS_FORMAT)


def normalize_instant(text: str) -> str:
    """User-supplied timestamp → the canonical stored shape (for --as-of comparisons)."""
    return format_instant(parse_instant(text))


def now() -> datetime:
    pinned = os.environ.get("ZMEM_TEST_NOW", "").strip()
    if pinned:
        try:
            return parse_instant(pinned)
        except UsageError:
            raise ConfigError(f"ZMEM_TEST_NOW={pinned!r} is not an ISO-8601 timestamp") from None
    return datetime.now(UTC)


def now_iso() -> str:
    return format_instant(now())
