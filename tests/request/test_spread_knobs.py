"""The near-duplicate, diversity and per-source cap knobs: off by default, warned and
skipped when bad in the environment, refused naming the field in a request, and part of
what a cursor is made for."""

from __future__ import annotations

import os
from typing import Any

import pytest
from cli_process import run_nautilus
from plain_environment import plain_environment
from structlog.testing import capture_logs

from nautilus_ranking import ConfigError, NautilusSettings
from nautilus_ranking.request.errors import ProblemError
from nautilus_ranking.request.model import parse_request
from nautilus_ranking.request.pages import ranking_key
from nautilus_ranking.settings.parsing import NEAR_DUPLICATES_ON

VARIABLES = {
    "NAUTILUS_RANKING_NEAR_DUPLICATES": "ranking_near_duplicates",
    "NAUTILUS_RANKING_DIVERSITY": "ranking_diversity",
    "NAUTILUS_RANKING_MAX_PER_SOURCE": "ranking_max_per_source",
}
BAD = ["2", "-0.1", "nan", "yes"]


def test_unset_is_off_and_ranking_stays_off() -> None:
    settings = NautilusSettings()
    assert all(getattr(settings, field) is None for field in VARIABLES.values())
    assert not settings.ranking_enabled


@pytest.mark.parametrize(
    ("variable", "raw", "value"),
    [
        ("NAUTILUS_RANKING_NEAR_DUPLICATES", "on", NEAR_DUPLICATES_ON),
        ("NAUTILUS_RANKING_NEAR_DUPLICATES", "0.7", 0.7),
        ("NAUTILUS_RANKING_NEAR_DUPLICATES", "1", 1.0),
        ("NAUTILUS_RANKING_DIVERSITY", "0.3", 0.3),
        ("NAUTILUS_RANKING_DIVERSITY", "1", 1.0),
        ("NAUTILUS_RANKING_MAX_PER_SOURCE", "2", 2),
    ],
)
def test_a_value_turns_ranking_on(
    monkeypatch: pytest.MonkeyPatch, variable: str, raw: str, value: Any
) -> None:
    monkeypatch.setenv(variable, raw)
    settings = NautilusSettings()
    assert getattr(settings, VARIABLES[variable]) == value
    assert settings.ranking_enabled


@pytest.mark.parametrize("raw", ["off", "0"])
def test_off_and_zero_diversity_are_off(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("NAUTILUS_RANKING_DIVERSITY", raw)
    assert NautilusSettings().ranking_diversity is None
    monkeypatch.setenv("NAUTILUS_RANKING_NEAR_DUPLICATES", "off")
    assert not NautilusSettings().ranking_enabled


@pytest.mark.parametrize("variable", list(VARIABLES))
@pytest.mark.parametrize("raw", BAD)
def test_a_bad_value_is_warned_and_skipped(
    monkeypatch: pytest.MonkeyPatch, variable: str, raw: str
) -> None:
    if variable == "NAUTILUS_RANKING_MAX_PER_SOURCE" and raw == "2":
        raw = "0"  # 2 is a good cap
    monkeypatch.setenv(variable, raw)
    with capture_logs() as logs:
        settings = NautilusSettings()
    assert getattr(settings, VARIABLES[variable]) is None
    [event] = [e for e in logs if e["log_level"] == "warning"]
    assert event["variable"] == variable and event["value"] == raw


def test_strict_mode_refuses_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NAUTILUS_CONFIG_STRICT", "true")
    for variable in VARIABLES:
        monkeypatch.setenv(variable, "nan")
    with pytest.raises(ConfigError) as info:
        NautilusSettings()
    assert sorted(p.variable for p in info.value.problems) == sorted(VARIABLES)


@pytest.mark.parametrize("field", ["near_duplicates", "diversity", "max_per_source"])
@pytest.mark.parametrize("raw", [2.5, -0.1, "nan", "yes", True])
def test_a_request_with_a_bad_value_is_refused_naming_the_field(field: str, raw: Any) -> None:
    from nautilus_ranking.request.engine import Engine
    from nautilus_ranking.request.plan import plan

    try:
        request = parse_request({"query": "disk", field: raw})
    except ProblemError as exc:
        assert exc.status == 422 and exc.extra["errors"][0]["field"] == field
        return
    engine = Engine.of(_broker())
    with pytest.raises(ProblemError) as refused:
        plan(request, engine.broker, engine.settings, engine.embedder, 100)
    assert refused.value.status == 422
    assert refused.value.extra["errors"][0]["field"] == field


def _broker() -> Any:
    from nautilus_ranking.broker import Broker
    from tests.fakes import FakeSource

    return Broker([FakeSource("a", [{"id": "1", "text": "disk"}])])


def test_the_cursor_key_changes_with_each_knob_and_not_when_unset() -> None:
    base = NautilusSettings(ranking_top_k=5)
    keys = {ranking_key("q", base, ["a"])}
    for field, value in (
        ("ranking_near_duplicates", 0.5),
        ("ranking_diversity", 0.3),
        ("ranking_max_per_source", 2),
    ):
        keys.add(ranking_key("q", base.model_copy(update={field: value}), ["a"]))
    assert len(keys) == 4


def test_the_cli_refuses_a_bad_value_with_exit_2() -> None:
    env = plain_environment()
    env["NAUTILUS_DATA_DIR"] = os.environ.get("NAUTILUS_DATA_DIR", "/tmp/nautilus-test")
    done = run_nautilus("query", "disk full", "--diversity", "2", env=env)
    assert done.returncode == 2
    assert "diversity" in done.stderr


def test_a_cursor_chain_through_the_request_core_is_disjoint_and_complete() -> None:
    """Page after page by next_cursor, with every knob on, over the demo: no row twice,
    none skipped, and no collapsed row on a later page."""
    from nautilus_ranking.broker import Broker
    from nautilus_ranking.request.answer import answer_sync
    from nautilus_ranking.request.engine import Engine

    knobs = {"near_duplicates": "on", "diversity": 0.3, "max_per_source": 2}
    with Broker.from_config(None, NautilusSettings()) as broker:
        engine = Engine.of(broker)
        whole = answer_sync(
            engine, parse_request({"query": "orders-db disk full", "top_k": 500, **knobs})
        ).to_json()["ranking"]
        seen: list[tuple[str, Any]] = []
        collapsed: set[tuple[str, Any]] = set()
        body: dict[str, Any] = {"query": "orders-db disk full", "top_k": 4, "page": 1, **knobs}
        for _ in range(200):
            out = answer_sync(engine, parse_request(body)).to_json()
            seen.extend((e["source_id"], e["id"]) for e in out["ranking"])
            collapsed |= {(c["source_id"], c["id"]) for e in out["ranking"] for c in e["also_from"]}
            cursor = out["page"]["next_cursor"]
            if cursor is None:
                break
            body = {k: v for k, v in body.items() if k != "page"} | {"cursor": cursor}
    assert len(seen) == len(set(seen)) > 8
    assert not set(seen) & collapsed
    # together the pages hold every row of the whole ranking (the cap counts per page, so
    # the order within the whole list may differ)
    assert sorted(seen, key=str) == sorted(((e["source_id"], e["id"]) for e in whole), key=str)
