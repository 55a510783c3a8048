"""A row's time never fails or unranks a request: odd values are read as what they are,
or left undated and counted; far-future rows never age the rest."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import structlog
from fakes import FakeSource

from nautilus_ranking import AdapterResult, RankingSynthesizer
from nautilus_ranking.broker import Broker
from nautilus_ranking.synthesis.row_times import period_of

QUERY = {"query": "orders database disk full"}
HUGE = 10**400  # an integer past the float range


def day(text: str) -> float:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp()


def ranked_times(rows: list[dict[str, Any]], setting: str = "half_life:30d") -> dict[str, Any]:
    ranked = RankingSynthesizer(recency=setting, time_fields={"a": "at"}).rank(
        [AdapterResult("a", rows)], QUERY
    )
    return {r.row["id"]: r.time for r in ranked}


def test_an_integer_past_the_float_range_is_out_of_range_never_raised() -> None:
    assert period_of(HUGE) == "out of range (1900 to 2200)"
    assert period_of(-HUGE) == "out of range (1900 to 2200)"


def test_a_row_dated_past_the_float_range_is_unaged_counted_and_still_ranked() -> None:
    rows = [
        {"id": "huge", "text": "orders database disk full", "at": HUGE},
        {"id": "ok", "text": "orders database disk", "at": "2024-01-01"},
        {"id": "new", "text": "orders", "at": "2026-01-01"},
    ]
    with structlog.testing.capture_logs() as logs:
        times = ranked_times(rows)
    assert times["huge"] == {"time": None, "age_days": None, "freshness": 1.0, "recency": 0.0}
    assert times["ok"]["recency"] < 0
    unreadable = [e for e in logs if e["event"] == "rank_time_unreadable"]
    assert [(e["reason"], e["count"]) for e in unreadable] == [("out of range (1900 to 2200)", 1)]


def test_a_broker_still_ranks_a_request_whose_rows_include_such_a_time() -> None:
    """A time that raised made the broker fall back to passthrough order: no scores, the
    operator's top K off."""
    rows = [
        {"id": f"r{i}", "text": "lunch " * i + "orders disk", "at": "2024-01-01"} for i in range(6)
    ]
    rows.append({"id": "huge", "text": "orders disk", "at": HUGE})
    ranker = RankingSynthesizer(recency="half_life:30d", time_fields={"a": "at"}, top_k=3)
    response = Broker([FakeSource("a", rows)], ranker).request("orders disk")
    assert len(response.ranking) == 3
    assert all(r.score is not None and r.relevance is not None for r in response.ranking)
    assert response.ranking[0].row["id"] in {"r0", "huge"}  # the best matches, not row order


@pytest.mark.parametrize("value", ["20240601", 20240601, " 20240601 "])
def test_a_basic_date_is_that_day_not_epoch_seconds(value: object) -> None:
    found = period_of(value)
    assert not isinstance(found, str)
    assert found[0] == day("2024-06-01T00:00:00") and found[2] == "2024-06-01"
    assert found[1] == pytest.approx(day("2024-06-02T00:00:00"), abs=2e-3)


def test_eight_digits_that_are_no_date_stay_epoch_seconds() -> None:
    found = period_of("20241399")  # no 13th month: 23 August 1970 in seconds
    assert not isinstance(found, str) and found[0] == 20_241_399.0


def test_a_column_of_basic_dates_ages_each_row_from_its_day() -> None:
    rows = [
        {"id": "june", "text": "orders database disk full", "at": 20240601},
        {"id": "may", "text": "orders database disk", "at": 20240501},
        {"id": "epoch", "text": "orders", "at": 1_717_286_400},  # 2024-06-02, in seconds
    ]
    times = ranked_times(rows, "half_life:365d")
    assert times["june"]["time"] == "2024-06-01" and times["may"]["time"] == "2024-05-01"
    assert times["june"]["age_days"] == pytest.approx(0.5)
    assert times["may"]["age_days"] == pytest.approx(31.5)


@pytest.mark.parametrize(
    "value",
    [
        "２０２４",  # full-width
        "٢٠٢٤-٠٦",  # Arabic-Indic
        "２０２４-06-01",
        "１７７２３５９２００",
        "٢٠٢٤-٠٦-٠١T10:00:00",
    ],
)
def test_digits_are_ascii_digits_only(value: str) -> None:
    assert period_of(value) == "not ISO 8601 or an epoch number"


def test_a_full_width_year_is_never_the_reference() -> None:
    rows = [
        {"id": "wide", "text": "orders database disk full", "at": "２０２６"},
        {"id": "ok", "text": "orders database disk", "at": "2024-01-01"},
    ]
    found = RankingSynthesizer(recency="half_life:30d", time_fields={"a": "at"}).merge_ranked(
        [AdapterResult("a", rows)], QUERY
    )
    times = {r.row["id"]: r.time for r in found.ranking}
    report = found.time
    assert report is not None and report["reference"] == "2024-01-01"
    assert times["wide"]["time"] is None


@pytest.mark.parametrize("future", [1, 2, 3])
def test_far_future_rows_age_no_real_row_however_many(future: int) -> None:
    rows = [
        {"id": f"real{i}", "text": "orders database disk " + "word " * i, "at": f"2024-01-0{i + 1}"}
        for i in range(4)
    ]
    rows += [{"id": f"typo{i}", "text": "orders", "at": "2199-01-01"} for i in range(future)]
    with structlog.testing.capture_logs() as logs:
        times = ranked_times(rows)
    assert times["real3"]["age_days"] == pytest.approx(8 * 30)  # the reach, not 175 years
    assert all(times[f"typo{i}"]["age_days"] == 0.0 for i in range(future))
    assert [e["count"] for e in logs if e["event"] == "rank_time_ahead"] == [future]


def test_the_majority_of_the_rows_sets_the_reference() -> None:
    """Three rows of 2026 beside two of 2024 are the batch's time, not outliers."""
    rows = [
        {"id": f"new{i}", "text": "orders database disk", "at": f"2026-01-0{i + 1}"}
        for i in range(3)
    ]
    rows += [{"id": f"old{i}", "text": "orders", "at": "2024-01-01"} for i in range(2)]
    times = ranked_times(rows)
    assert times["new2"]["age_days"] == 0.0 and times["new0"]["age_days"] == pytest.approx(2.0)


def test_an_unreadable_time_is_warned_about_naming_its_source_and_field() -> None:
    results = [
        AdapterResult("a", [{"id": "a1", "text": "orders disk", "at": "soon"}]),
        AdapterResult(
            "b", [{"id": f"b{i}", "text": "orders", "meta": {"when": HUGE}} for i in (1, 2)]
        ),
        AdapterResult("c", [{"id": "c1", "text": "disk", "at": "2024-01-01"}]),
    ]
    paths = {"a": "at", "b": "meta.when", "c": "at"}
    with structlog.testing.capture_logs() as logs:
        RankingSynthesizer(recency="half_life:30d", time_fields=paths).rank(results, QUERY)
    unreadable = [
        (e["source_id"], e["field"], e["reason"], e["count"])
        for e in logs
        if e["event"] == "rank_time_unreadable"
    ]
    assert unreadable == [
        ("a", "at", "not ISO 8601 or an epoch number", 1),
        ("b", "meta.when", "out of range (1900 to 2200)", 2),
    ]


def test_a_path_that_is_not_one_is_warned_about_naming_its_source_and_field() -> None:
    results = [AdapterResult("a", [{"id": "a1", "text": "orders disk", "at": "2024"}])]
    with structlog.testing.capture_logs() as logs:
        RankingSynthesizer(
            supersede=True, time_fields={"a": "[[["}, document_keys={"a": "(("}
        ).rank(results, QUERY)
    invalid = {
        e["event"]: (e["source_id"], e["field"]) for e in logs if e["event"].endswith("_invalid")
    }
    assert invalid == {
        "rank_time_path_invalid": ("a", "[[["),
        "rank_document_key_path_invalid": ("a", "(("),
    }
