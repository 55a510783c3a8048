"""NautilusSettings and parse_source_boosts: parsing, warn-and-skip, strict mode."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from nautilus_ranking import BOOST_LEVELS, ConfigError, NautilusSettings, parse_source_boosts
from nautilus_ranking.settings.boost_entries import VALID_LEVELS, collect_source_boosts


def warnings_of(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in logs if e["log_level"] == "warning"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, {}),
        ("", {}),
        ("   ", {}),
        ("graph:high", {"graph": "high"}),
        ("graph:high, SQL:low,vector", {"graph": "high", "sql": "low", "vector": "medium"}),
        ("  Graph : HIGH  ", {"graph": "high"}),
        ("graph:", {"graph": "medium"}),
        ("graph,sql", {"graph": "medium", "sql": "medium"}),
        ("graph:high,,sql:low,", {"graph": "high", "sql": "low"}),
        ("my-source.v2:low", {"my-source.v2": "low"}),
    ],
)
def test_parse_source_boosts_good_input(raw: str | None, expected: dict[str, str]) -> None:
    with capture_logs() as logs:
        assert parse_source_boosts(raw) == expected
    assert warnings_of(logs) == []


@pytest.mark.parametrize(
    ("raw", "expected", "bad_entry", "reason_part"),
    [
        ("graph:hgih", {}, "graph:hgih", "unknown level 'hgih' for 'graph'"),
        (":high", {}, ":high", "empty source id"),
        ("graph:high:extra", {}, "graph:high:extra", "malformed entry"),
        ("===", {}, "===", "invalid source id"),
        ("graph:hgih,sql:low", {"sql": "low"}, "graph:hgih", "unknown level"),
        ("sql:low, :high ,graph", {"sql": "low", "graph": "medium"}, ":high", "empty source id"),
        ("graph:low,graph:high", {"graph": "high"}, "graph:low", "repeated source id 'graph'"),
    ],
)
def test_parse_source_boosts_bad_entry_is_warned_and_skipped(
    raw: str, expected: dict[str, str], bad_entry: str, reason_part: str
) -> None:
    with capture_logs() as logs:
        assert parse_source_boosts(raw) == expected
    [event] = warnings_of(logs)
    assert event["event"] == "source_boost_skipped"
    assert event["variable"] == "NAUTILUS_SOURCE_BOOSTS"
    assert event["value"] == bad_entry
    assert reason_part in event["reason"]
    assert event["valid"] == (
        "each id once" if "repeated" in reason_part else "-high, -medium, -low, low, medium, high"
    )


def test_defaults_are_all_unset() -> None:
    s = NautilusSettings()
    assert (
        s.ranking_top_k,
        s.ranking_idf,
        s.source_boosts,
        s.ranking_max_candidates,
        s.ranking_dedup_key,
    ) == (None, None, {}, None, None)  # IDF None: the embedder's default (auto)
    assert not s.ranking_enabled
    assert s.problems == ()


@pytest.mark.parametrize(
    ("variable", "value", "field", "expected"),
    [
        ("NAUTILUS_RANKING_TOP_K", "10", "ranking_top_k", 10),
        ("NAUTILUS_RANKING_TOP_K", " 3 ", "ranking_top_k", 3),
        ("NAUTILUS_RANKING_TOP_K", "", "ranking_top_k", None),
        ("NAUTILUS_RANKING_MAX_CANDIDATES", "200", "ranking_max_candidates", 200),
        ("NAUTILUS_RANKING_IDF", "true", "ranking_idf", True),
        ("NAUTILUS_RANKING_IDF", "YES", "ranking_idf", True),
        ("NAUTILUS_RANKING_IDF", "On", "ranking_idf", True),
        ("NAUTILUS_RANKING_IDF", "1", "ranking_idf", True),
        ("NAUTILUS_RANKING_IDF", "off", "ranking_idf", False),
        ("NAUTILUS_RANKING_IDF", "No", "ranking_idf", False),
        ("NAUTILUS_RANKING_IDF", "0", "ranking_idf", False),
        ("NAUTILUS_RANKING_IDF", "FALSE", "ranking_idf", False),
        ("NAUTILUS_RANKING_IDF", "auto", "ranking_idf", None),
        ("NAUTILUS_RANKING_DEDUP_KEY", "id", "ranking_dedup_key", "id"),
        ("NAUTILUS_RANKING_MAX_TOKENS", " 2000 ", "ranking_max_tokens", 2000),
        ("NAUTILUS_RANKING_CUT", " Relative:0.80 ", "ranking_cut", "relative:0.8"),
        ("NAUTILUS_RANKING_CUT", "gap : .1", "ranking_cut", "gap:0.1"),
        ("NAUTILUS_RANKING_CUT", "off", "ranking_cut", None),
        ("NAUTILUS_EMBEDDER", "NOOP", "embedder", "noop"),
        ("NAUTILUS_RANKING_LEXICAL", " Cosine ", "ranking_lexical", "cosine"),
        ("NAUTILUS_RANKING_LEXICAL", "", "ranking_lexical", "bm25"),
        ("NAUTILUS_RANKING_LEXICAL", "BM25", "ranking_lexical", "bm25"),
        ("NAUTILUS_EMBEDDER", "onnx", "embedder", "onnx"),
        ("NAUTILUS_EMBEDDER_CACHE_SIZE", "500", "embedder_cache_size", 500),
        ("NAUTILUS_EMBEDDER_CACHE_SIZE", "0", "embedder_cache_size", 0),
        ("NAUTILUS_EMBEDDER_CACHE_SIZE", "", "embedder_cache_size", 10_000),
        ("NAUTILUS_EMBEDDER_DISK_CACHE_MB", "64", "embedder_disk_cache_mb", 64),
        ("NAUTILUS_EMBEDDER_DISK_CACHE_MB", "0", "embedder_disk_cache_mb", 0),
        ("NAUTILUS_EMBEDDER_DISK_CACHE_MB", "", "embedder_disk_cache_mb", 256),
        ("NAUTILUS_EMBEDDER_DEADLINE_MS", "50", "embedder_deadline_ms", 50),
        ("NAUTILUS_EMBEDDER_DEADLINE_MS", "0", "embedder_deadline_ms", 0),
    ],
)
def test_env_values_parse(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, field: str, expected: object
) -> None:
    monkeypatch.setenv(variable, value)
    with capture_logs() as logs:
        s = NautilusSettings()
    assert getattr(s, field) == expected
    assert warnings_of(logs) == []


@pytest.mark.parametrize(
    ("variable", "value", "field", "fallback", "valid_part"),
    [
        ("NAUTILUS_RANKING_TOP_K", "abc", "ranking_top_k", None, "integer >= 1"),
        ("NAUTILUS_RANKING_TOP_K", "0", "ranking_top_k", None, "integer >= 1"),
        ("NAUTILUS_RANKING_TOP_K", "-3", "ranking_top_k", None, "integer >= 1"),
        ("NAUTILUS_RANKING_TOP_K", "2.5", "ranking_top_k", None, "integer >= 1"),
        ("NAUTILUS_RANKING_TOP_K", "1e3", "ranking_top_k", None, "integer >= 1"),
        ("NAUTILUS_RANKING_MAX_CANDIDATES", "lots", "ranking_max_candidates", None, "integer >= 1"),
        ("NAUTILUS_RANKING_MAX_CANDIDATES", "0", "ranking_max_candidates", None, "integer >= 1"),
        ("NAUTILUS_RANKING_MAX_TOKENS", "0", "ranking_max_tokens", None, "integer >= 1"),
        ("NAUTILUS_RANKING_MAX_TOKENS", "4k", "ranking_max_tokens", None, "integer >= 1"),
        ("NAUTILUS_RANKING_CUT", "relative", "ranking_cut", None, "relative:A, floor:T or gap:G"),
        ("NAUTILUS_RANKING_CUT", "floor:1.5", "ranking_cut", None, "relative:A, floor:T or gap:G"),
        ("NAUTILUS_RANKING_IDF", "maybe", "ranking_idf", None, "true/false"),
        ("NAUTILUS_RANKING_IDF", "2", "ranking_idf", None, "true/false"),
        ("NAUTILUS_EMBEDDER", "bert", "embedder", "auto", "auto, hashing, onnx, onnx-float32"),
        ("NAUTILUS_RANKING_LEXICAL", "tfidf", "ranking_lexical", "bm25", "bm25, cosine"),
        ("NAUTILUS_EMBEDDER_CACHE_SIZE", "-1", "embedder_cache_size", 10_000, "integer >= 0"),
        ("NAUTILUS_EMBEDDER_CACHE_SIZE", "big", "embedder_cache_size", 10_000, "integer >= 0"),
        ("NAUTILUS_EMBEDDER_DISK_CACHE_MB", "-5", "embedder_disk_cache_mb", 256, "integer >= 0"),
        ("NAUTILUS_EMBEDDER_DEADLINE_MS", "-1", "embedder_deadline_ms", 1500, "integer >= 0"),
        ("NAUTILUS_LOG_LEVEL", "loud", "log_level", "info", "debug, info"),
        ("NAUTILUS_LOG_FORMAT", "xml", "log_format", "auto", "auto, console, json"),
        ("NAUTILUS_CONFIG_STRICT", "sure", "config_strict", False, "true/false"),
        ("NAUTILUS_FEEDBACK", "sure", "feedback", False, "true/false"),
        ("NAUTILUS_FEEDBACK_CITE_LIFETIME_DAYS", "0", "feedback_cite_lifetime_days", 7, "days"),
        ("NAUTILUS_FEEDBACK_RETENTION_DAYS", "a month", "feedback_retention_days", 30, "days"),
        ("NAUTILUS_FEEDBACK_MAX_MB", "-1", "feedback_max_mb", 256, "MB"),
        ("NAUTILUS_FEEDBACK_OPENSEARCH_URL", "opensearch", "feedback_opensearch_url", None, "URL"),
    ],
)
def test_bad_env_value_is_warned_and_falls_back(
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    value: str,
    field: str,
    fallback: object,
    valid_part: str,
) -> None:
    monkeypatch.setenv(variable, value)
    with capture_logs() as logs:
        s = NautilusSettings()
    assert getattr(s, field) == fallback
    [event] = warnings_of(logs)
    assert event["event"] == "config_value_skipped"
    assert event["variable"] == variable
    assert event["value"] == value
    assert valid_part in event["valid"]
    assert [p.variable for p in s.problems] == [variable]


def test_bad_boost_entry_keeps_the_good_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NAUTILUS_SOURCE_BOOSTS", "graph:hgih, SQL:low")
    with capture_logs() as logs:
        s = NautilusSettings()
    assert s.source_boosts == {"sql": "low"}
    assert s.ranking_enabled
    [event] = warnings_of(logs)
    assert event["event"] == "source_boost_skipped"


def test_unknown_nautilus_variable_is_warned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NAUTILUS_RANKING_TOPK", "5")
    with capture_logs() as logs:
        s = NautilusSettings()
    assert s.ranking_top_k is None
    [event] = warnings_of(logs)
    assert event["variable"] == "NAUTILUS_RANKING_TOPK"
    assert "NAUTILUS_RANKING_TOP_K" in event["valid"]
    assert event["value"] == "(set)"  # its value is never echoed: it may be a secret


def test_unknown_variable_offers_the_three_nearest_names_the_closest_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NAUTILUS_TOP_K", "5")  # one of ours without RANKING_
    monkeypatch.setenv("NAUTILUS_EMBEDER", "onnx")
    with capture_logs() as logs:
        NautilusSettings()
    valid = {e["variable"]: e["valid"].split(", ") for e in warnings_of(logs)}
    assert valid["NAUTILUS_TOP_K"][0] == "NAUTILUS_RANKING_TOP_K"
    assert valid["NAUTILUS_EMBEDER"][0] == "NAUTILUS_EMBEDDER"
    assert all(len(names) == 3 == len(set(names)) for names in valid.values())


def test_strict_mode_raises_one_error_listing_every_problem(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NAUTILUS_CONFIG_STRICT", "true")
    monkeypatch.setenv("NAUTILUS_SOURCE_BOOSTS", "graph:hgih,:high")
    monkeypatch.setenv("NAUTILUS_RANKING_TOP_K", "ten")
    with pytest.raises(ConfigError) as info:
        NautilusSettings()
    message = str(info.value)
    assert "3 configuration problem(s)" in message
    assert (
        "unknown level 'hgih' for 'graph' (valid: -high, -medium, -low, low, medium, high)"
    ) in message
    assert "':high': empty source id" in message
    assert "NAUTILUS_RANKING_TOP_K: 'ten': not an integer >= 1" in message
    assert len(info.value.problems) == 3


def test_strict_mode_refuses_a_bad_budget_or_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NAUTILUS_CONFIG_STRICT", "true")
    monkeypatch.setenv("NAUTILUS_RANKING_MAX_TOKENS", "-5")
    monkeypatch.setenv("NAUTILUS_RANKING_CUT", "top:0.5")
    with pytest.raises(ConfigError) as info:
        NautilusSettings()
    assert [p.variable for p in info.value.problems] == [
        "NAUTILUS_RANKING_MAX_TOKENS",
        "NAUTILUS_RANKING_CUT",
    ]
    assert "'top:0.5': not a cut setting" in str(info.value)


def test_a_cut_turns_ranking_on_and_a_budget_does_not() -> None:
    assert NautilusSettings(ranking_cut="relative:0.8").ranking_enabled
    assert not NautilusSettings(ranking_max_tokens=500).ranking_enabled


def test_strict_mode_with_good_values_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NAUTILUS_CONFIG_STRICT", "1")
    monkeypatch.setenv("NAUTILUS_SOURCE_BOOSTS", "graph:high")
    assert NautilusSettings().source_boosts == {"graph": "high"}


def test_long_bad_value_is_cut_in_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NAUTILUS_RANKING_TOP_K", "x" * 5000)
    s = NautilusSettings()
    [problem] = s.problems
    assert len(problem.value) <= 61
    assert len(problem.message) < 200


def test_constructor_values_go_through_the_same_checks() -> None:
    with capture_logs() as logs:
        s = NautilusSettings(ranking_top_k=0, source_boosts={"Graph": "HIGH", "sql": "nope"})
    assert s.ranking_top_k is None
    assert s.source_boosts == {"graph": "high"}
    assert len(warnings_of(logs)) == 2


def test_levels_in_config_match_the_boost_table() -> None:
    """Guard: the names config accepts are exactly the levels that have numbers."""
    assert tuple(VALID_LEVELS) == tuple(BOOST_LEVELS)


@settings(max_examples=300, deadline=None)
@given(raw=st.text())
def test_no_boost_string_raises(raw: str) -> None:
    boosts, problems = collect_source_boosts(raw)
    assert all(level in VALID_LEVELS for level in boosts.values())
    assert all(p.variable == "NAUTILUS_SOURCE_BOOSTS" for p in problems)


_ENV_TEXT = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40
)


@settings(max_examples=150, deadline=None)
@given(top_k=_ENV_TEXT, idf=_ENV_TEXT, boosts=_ENV_TEXT, cap=_ENV_TEXT, strict=_ENV_TEXT)
def test_no_env_value_raises_without_strict_mode(
    top_k: str, idf: str, boosts: str, cap: str, strict: str
) -> None:
    strict_on = strict.strip().lower() in {"1", "true", "yes", "on"}
    with capture_logs():
        try:
            s = NautilusSettings(
                ranking_top_k=top_k,
                ranking_idf=idf,
                source_boosts=boosts,
                ranking_max_candidates=cap,
                config_strict=strict,
            )
        except ConfigError:
            assert strict_on
            return
    assert s.ranking_top_k is None or s.ranking_top_k >= 1
    assert s.ranking_idf is None or isinstance(s.ranking_idf, bool)


def test_every_setting_is_documented_and_in_the_example_env() -> None:
    """A new NAUTILUS_* setting is named in docs/configuration.md and .env.example."""
    root = Path(__file__).parents[2]
    docs = (root / "docs" / "configuration.md").read_text(encoding="utf-8")
    example = (root / ".env.example").read_text(encoding="utf-8")
    names = ["NAUTILUS_" + name.upper() for name in NautilusSettings.model_fields]
    assert [n for n in names if n not in docs] == []
    assert [n for n in names if n not in example] == []


def documented_fallbacks() -> list[tuple[str, int]]:
    """Each setting whose section of docs/configuration.md says a bad value falls back to
    a number, with that number."""
    text = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text(encoding="utf-8")
    found = []
    for section in text.split("\n### ")[1:]:
        named = re.findall(r"`NAUTILUS_(\w+)`", section.splitlines()[0])
        said = re.search(r"[Bb]ad value[^:\n]*: warned, skipped → (\d+)\.", section)
        if len(named) == 1 and said and named[0].lower() in NautilusSettings.model_fields:
            found.append((named[0].lower(), int(said.group(1))))
    return found


@pytest.mark.parametrize(("field", "fallback"), documented_fallbacks())
def test_a_bad_number_falls_back_to_what_the_docs_say(
    field: str, fallback: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The docs said a bad NAUTILUS_EMBEDDER_MAX_ROWS falls back to 1500; it was 100."""
    monkeypatch.setenv(f"NAUTILUS_{field.upper()}", "abc")
    with capture_logs():
        settings = NautilusSettings()
    assert [p.variable for p in settings.problems] == [f"NAUTILUS_{field.upper()}"]
    assert getattr(settings, field) == fallback


def test_the_docs_fallbacks_cover_the_embedder_numbers() -> None:
    assert {"embedder_cache_size", "embedder_max_rows"} <= dict(documented_fallbacks()).keys()
