"""Settings resolution: defaults, every override path, clamps, bad values, and the clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from zmem import config
from zmem.errors import ConfigError, UsageError


def test_defaults_follow_the_spec(tmp_path):
    s = config.load_settings({"HOME": str(tmp_path)})
    assert s.store_path == Path("~/.zmem/store.sqlite").expanduser()
    assert (s.capture_mode, s.embed_profile, s.link_threshold) == ("manual", "minilm", 0.75)
    assert (s.inject_floor_prompt, s.inject_floor_recent, s.inject_floor_gate_none) == (
        0.25,
        0.5,
        0.4,
    )
    assert (s.inject_token_budget, s.mmr_lambda) == (1500, 0.7)
    assert (s.unfold_top_k, s.unfold_max_hops, s.unfold_budget) == (3, 3, 4)
    assert s.allow_newer_schema is False and s.query_context is True and s.warnings == ()


def test_store_and_data_dir_resolution(tmp_path):
    s = config.load_settings({"ZMEM_DATA": str(tmp_path / "d")})
    assert s.data_dir == tmp_path / "d" and s.store_path == tmp_path / "d" / "store.sqlite"
    s = config.load_settings(
        {"ZMEM_DATA": str(tmp_path / "d"), "ZMEM_STORE": str(tmp_path / "x.sqlite")}
    )
    assert s.store_path == tmp_path / "x.sqlite"
    s = config.load_settings(
        {"ZMEM_STORE": str(tmp_path / "x.sqlite")}, store_path=tmp_path / "y.sqlite"
    )
    assert s.store_path == tmp_path / "y.sqlite"


def test_overrides_and_clamps():
    s = config.load_settings(
        {
            "ZMEM_LINK_THRESHOLD": "0.6",
            "ZMEM_UNFOLD_TOP_K": "99",
            "ZMEM_UNFOLD_BUDGET": "0",
            "ZMEM_MMR_LAMBDA": "1.5",
            "ZMEM_CAPTURE_MODE": "AUTO",
            "ZMEM_EMBED_PROFILE": "fake",
            "ZMEM_ALLOW_NEWER_SCHEMA": "1",
            "ZMEM_QUERY_CONTEXT": "0",
            "ZMEM_INJECT_TOKEN_BUDGET": "900",
        }
    )
    assert s.link_threshold == 0.6 and s.unfold_top_k == 10 and s.unfold_budget == 1
    assert s.mmr_lambda == 1.0 and s.capture_mode == "auto" and s.embed_profile == "fake"
    assert s.allow_newer_schema and not s.query_context
    assert s.inject_token_budget == 900


def test_the_maintenance_knobs_parse_clamp_and_degrade():
    s = config.load_settings({})
    assert (s.consolidate_min_interval_days, s.consolidate_growth_threshold) == (7.0, 0.2)
    assert (s.keeper_compress_chars, s.unrecalled_days, s.nli_cmd) == (4000, 30.0, None)
    assert (s.organize_episode_bound, s.organize_idle_hours) == (256, 0.0)
    s = config.load_settings(
        {
            "ZMEM_CONSOLIDATE_MIN_INTERVAL_DAYS": "-3",
            "ZMEM_CONSOLIDATE_GROWTH_THRESHOLD": "0.5",
            "ZMEM_KEEPER_COMPRESS_CHARS": "0",
            "ZMEM_UNRECALLED_DAYS": "12",
            "ZMEM_NLI_CMD": "judge --strict",
            "ZMEM_ORGANIZE_EPISODE_BOUND": "99999999",
            "ZMEM_ORGANIZE_IDLE_HOURS": "2",
        }
    )
    assert s.consolidate_min_interval_days == 0.0 and s.consolidate_growth_threshold == 0.5
    # A cap, not a switch: 0 or less degrades to the default instead of compressing to nothing.
    assert s.keeper_compress_chars == 4000
    assert s.unrecalled_days == 12.0 and s.nli_cmd == "judge --strict"
    assert s.organize_episode_bound == config.CONSOLIDATE_NAMESPACE_CAP
    assert s.organize_idle_hours == 2.0 and s.warnings == ()
    assert config.load_settings({"ZMEM_KEEPER_COMPRESS_CHARS": "-5"}).keeper_compress_chars == 4000
    bad = config.load_settings({"ZMEM_ORGANIZE_EPISODE_BOUND": "many"})
    assert bad.organize_episode_bound == 256 and "ZMEM_ORGANIZE_EPISODE_BOUND" in bad.warnings[0]


def test_unparseable_numbers_fall_back_with_a_warning():
    s = config.load_settings(
        {"ZMEM_LINK_THRESHOLD": "high", "ZMEM_MMR_LAMBDA": "nan", "ZMEM_QUERY_CONTEXT": "maybe"}
    )
    assert s.link_threshold == 0.75 and s.mmr_lambda == 0.7 and s.query_context is True
    assert len(s.warnings) == 3 and "ZMEM_LINK_THRESHOLD" in s.warnings[0]


@pytest.mark.parametrize(
    "env", [{"ZMEM_CAPTURE_MODE": "sometimes"}, {"ZMEM_EMBED_PROFILE": "qwen3"}]
)
def test_values_that_change_writes_are_refused(env):
    with pytest.raises(ConfigError):
        config.load_settings(env)


def test_settings_are_frozen():
    s = config.load_settings({})
    with pytest.raises(AttributeError):
        s.capture_mode = "auto"  # type: ignore[misc]


def test_now_reads_the_pinned_clock_at_every_call(monkeypatch):
    monkeypatch.setenv("ZMEM_TEST_NOW", "2026-01-01T00:00:00Z")
    assert config.now_iso() == "2026-01-01T00:00:00.000000Z"
    monkeypatch.setenv("ZMEM_TEST_NOW", "2026-06-01T12:30:00+02:00")
    assert config.now_iso() == "2026-06-01T10:30:00.000000Z"
    monkeypatch.delenv("ZMEM_TEST_NOW")
    assert config.now_iso() > "2026-06-01"


def test_bad_pinned_clock_is_a_config_error(monkeypatch):
    monkeypatch.setenv("ZMEM_TEST_NOW", "tuesday")
    with pytest.raises(ConfigError):
        config.now()


@pytest.mark.parametrize(
    "text,expected",
    [
        ("2026-03-01", "2026-03-01T00:00:00.000000Z"),
        ("2026-03-01T10:00:00", "2026-03-01T10:00:00.000000Z"),
        ("2026-03-01T10:00:00.5Z", "2026-03-01T10:00:00.500000Z"),
    ],
)
def test_instants_normalise_to_one_sortable_shape(text, expected):
    assert config.normalize_instant(text) == expected


def test_bad_instant_is_a_usage_error():
    with pytest.raises(UsageError):
        config.normalize_instant("last week")


def test_the_data_dir_resolves_one_way_for_every_caller(tmp_path, monkeypatch):
    """ZMEM_DATA, or ~/.zmem, where ~ is the home a caller names (setup and doctor write to a
    home they were given); a blank ZMEM_DATA is unset for them as for the store."""
    from zmem.config import default_data_dir

    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    assert default_data_dir({}) == tmp_path / "me" / ".zmem"
    assert default_data_dir({"ZMEM_DATA": "  "}, tmp_path / "them") == tmp_path / "them" / ".zmem"
    assert default_data_dir({"ZMEM_DATA": "~/d"}, tmp_path / "them") == tmp_path / "me" / "d"
    assert default_data_dir({"ZMEM_DATA": str(tmp_path / "x")}) == tmp_path / "x"
