"""Time as a ranking signal: a row's time read and parsed, the bounded decay by age, its
reference (never the clock), and the newest revision superseding the older ones."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import structlog
from fakes import FakeSource
from hypothesis import example, given, settings
from hypothesis import strategies as st

from nautilus_ranking import AdapterResult, RankingSynthesizer
from nautilus_ranking.broker import Broker
from nautilus_ranking.profiles.build import load_profiles
from nautilus_ranking.request.answer import answer_sync
from nautilus_ranking.request.engine import Engine
from nautilus_ranking.request.errors import ProblemError
from nautilus_ranking.request.model import QueryRequest, parse_request
from nautilus_ranking.row_paths import getter
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.settings.time_entries import parse_recency, parse_source_paths
from nautilus_ranking.synthesis import recency
from nautilus_ranking.synthesis.ranking_boost import MAX_SPREAD
from nautilus_ranking.synthesis.row_times import period_of

DAY = 86_400.0


def at(text: str) -> float:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp()


# --- what a time is -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "lo", "hi"),
    [
        ("2026-03-01T10:00:00Z", "2026-03-01T10:00:00", "2026-03-01T10:00:00"),
        ("2026-03-01T12:00:00+02:00", "2026-03-01T10:00:00", "2026-03-01T10:00:00"),
        ("2026-03-01T10:00:00", "2026-03-01T10:00:00", "2026-03-01T10:00:00"),  # naive: UTC
        ("2026-03-01 10:00", "2026-03-01T10:00:00", "2026-03-01T10:00:00"),
        ("2026-03-01", "2026-03-01T00:00:00", "2026-03-01T23:59:59.999"),
        ("2026-03", "2026-03-01T00:00:00", "2026-03-31T23:59:59.999"),
        ("2026-12", "2026-12-01T00:00:00", "2026-12-31T23:59:59.999"),
        ("2026", "2026-01-01T00:00:00", "2026-12-31T23:59:59.999"),
        (1_772_359_200, "2026-03-01T10:00:00", "2026-03-01T10:00:00"),  # epoch seconds
        (1_772_359_200_000, "2026-03-01T10:00:00", "2026-03-01T10:00:00"),  # milliseconds
        ("1772359200", "2026-03-01T10:00:00", "2026-03-01T10:00:00"),
        (1_772_359_200.5, "2026-03-01T10:00:00.5", "2026-03-01T10:00:00.5"),
        (dt.datetime(2026, 3, 1, 10), "2026-03-01T10:00:00", "2026-03-01T10:00:00"),
        (
            dt.datetime(2026, 3, 1, 11, tzinfo=dt.timezone(dt.timedelta(hours=1))),
            "2026-03-01T10:00:00",
            "2026-03-01T10:00:00",
        ),
        (dt.date(2026, 3, 1), "2026-03-01T00:00:00", "2026-03-01T23:59:59.999"),
    ],
)
def test_every_format_reads_as_its_period(value: object, lo: str, hi: str) -> None:
    found = period_of(value)
    assert not isinstance(found, str), found
    assert found[0] == pytest.approx(at(lo)) and found[1] == pytest.approx(at(hi), abs=2e-3)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "missing"),
        (True, "not a time"),
        ("soon", "not ISO 8601 or an epoch number"),
        ("2026-13", "not a date"),
        ("9999-12-31", "out of range (1900 to 2200)"),  # a placeholder, not a time
        (1_772_359_200_000_000, "out of range (1900 to 2200)"),  # microseconds
        (float("nan"), "not a time"),
        ({"at": 1}, "not a time"),
        ("x" * 10_000, "not a time"),
    ],
)
def test_what_is_not_a_time_says_why(value: object, reason: str) -> None:
    assert period_of(value) == reason


def test_paths_read_a_key_a_dotted_path_a_json_column_and_a_jmespath() -> None:
    row = {"at": 1, "meta": {"modified": 2}, "json": '{"modified": 3}', "a.b": 4, "h": [{"t": 5}]}
    readers = {path: getter(path) for path in ("at", "meta.modified", "json.modified", "a.b")}
    assert {p: r(row) for p, r in readers.items() if callable(r)} == {
        "at": 1,
        "meta.modified": 2,
        "json.modified": 3,
        "a.b": 4,
    }
    jmespath = getter("h[0].t")
    assert callable(jmespath) and jmespath(row) == 5
    assert isinstance(getter("h[0"), str)  # a bad expression says why, once


# --- the settings ---------------------------------------------------------------------


def test_a_recency_setting_is_normalised_and_a_bad_entry_is_skipped_and_named() -> None:
    assert parse_recency("v", "half_life:90d") == ("half_life:90d", None)
    assert parse_recency("v", " Tickets:Window:7d , half_life:3m") == (
        "half_life:3m,tickets:window:7d",
        None,
    )
    assert parse_recency("v", "off") == (None, None)
    assert parse_recency("v", "tickets:off") == (None, None)  # nothing left to age
    value, problem = parse_recency("v", "half_life:90d,wiki:half_life:soon")
    assert value == "half_life:90d" and problem is not None
    assert problem.name == "v" and "not a duration" in problem.reason
    for bad in ("half_life:0.1s", "decay:90d", "half_life", "half_life:1000y"):
        assert parse_recency("v", bad)[1] is not None, bad
    assert parse_source_paths("v", "Tickets:updated_at, wiki:meta.modified") == (
        {"tickets": "updated_at", "wiki": "meta.modified"},
        None,
    )
    paths, problem = parse_source_paths("v", "tickets,wiki:at")
    assert paths == {"wiki": "at"} and problem is not None


def test_a_bad_recency_in_a_request_is_a_422_naming_it() -> None:
    engine = Engine.of(Broker([FakeSource("a", [{"id": "1", "text": "disk"}])]), NautilusSettings())
    with pytest.raises(ProblemError) as refused:
        answer_sync(engine, QueryRequest(query="disk", recency="half_life:soon"))
    assert refused.value.status == 422 and refused.value.extra["field"] == "recency"
    with pytest.raises(ProblemError) as bad_time:
        parse_request({"query": "disk", "as_of": "next tuesday"})
    assert bad_time.value.extra["field"] == "as_of"


# --- the decay ------------------------------------------------------------------------


def two_sources(a_time: object, b_time: object, a_text: str, b_text: str) -> list[AdapterResult]:
    """Row a1 and row b1, beside an undated source of rows of graded relevance: the batch
    a decay's bound (a share of the relevance spread) is read from."""
    graded = [
        {
            "id": f"f{i}",
            "text": " ".join(["orders", "database", "disk", "full"][: 1 + i % 4]) + " word" * i,
        }
        for i in range(16)
    ]
    return [
        AdapterResult("a", [{"id": "a1", "text": a_text, "at": a_time}]),
        AdapterResult("b", [{"id": "b1", "text": b_text, "at": b_time}]),
        AdapterResult("f", graded),
    ]


def order(ranked: list[Any], only: tuple[str, ...] = ()) -> list[str]:
    return [r.row["id"] for r in ranked if not only or r.row["id"] in only]


QUERY = {"query": "orders database disk full"}
PATHS = {"a": "at", "b": "at"}


def test_recency_puts_the_newer_of_two_similar_rows_first() -> None:
    rows = two_sources(
        "2024-01-01", "2026-01-01", "orders database disk full", "orders database disk full today"
    )
    plain = RankingSynthesizer(time_fields=PATHS).rank(rows, QUERY)
    aged = RankingSynthesizer(recency="half_life:365d", time_fields=PATHS).rank(rows, QUERY)
    pair = ("a1", "b1")
    assert order(plain, pair) == ["a1", "b1"] and order(aged, pair) == ["b1", "a1"]
    old = next(r for r in aged if r.row["id"] == "a1")
    assert old.time["age_days"] == pytest.approx(731.0) and old.time["recency"] < 0
    assert old.score == pytest.approx(old.relevance + old.boost_bump + old.time["recency"])
    new = next(r for r in aged if r.row["id"] == "b1")
    assert new.time == {"time": "2026-01-01", "age_days": 0.0, "freshness": 1.0, "recency": 0.0}


def test_recency_never_passes_a_clearly_better_match() -> None:
    rows = [
        AdapterResult(
            "a",
            [
                {"id": f"a{i}", "text": "orders database disk full " + "filler " * i, "at": "2020"}
                for i in range(12)
            ],
        ),
        AdapterResult("b", [{"id": "new", "text": "a newsletter about lunch", "at": "2026-06-01"}]),
    ]
    ranked = RankingSynthesizer(recency="window:30d", time_fields=PATHS).rank(rows, QUERY)
    first = ranked[0]
    assert first.row["id"] == "a0"
    # what any row can lose is bounded: a share of at most a quarter of one vote
    assert all(-r.time["recency"] <= recency.RECENCY_SHARE * MAX_SPREAD + 1e-12 for r in ranked)


def test_a_missing_or_unreadable_time_leaves_the_row_unaged_and_warned() -> None:
    rows = [
        AdapterResult(
            "a",
            [
                {"id": "no-time", "text": "orders database disk full"},
                {"id": "bad", "text": "orders database disk full!", "at": "soon"},
                {"id": "ok", "text": "orders database disk", "at": "2024-01-01"},
                {"id": "new", "text": "lunch", "at": "2026-01-01"},
            ],
        )
    ]
    with structlog.testing.capture_logs() as logs:
        ranked = RankingSynthesizer(recency="half_life:30d", time_fields={"a": "at"}).rank(
            rows, QUERY
        )
    assert sorted(order(ranked)) == ["bad", "new", "no-time", "ok"]  # nothing dropped
    by_id = {r.row["id"]: r.time for r in ranked}
    assert by_id["no-time"] == {"time": None, "age_days": None, "freshness": 1.0, "recency": 0.0}
    assert by_id["bad"]["recency"] == 0.0 and by_id["ok"]["recency"] < 0
    unreadable = [e for e in logs if e["event"] == "rank_time_unreadable"]
    assert sorted((e["reason"], e["count"]) for e in unreadable) == [
        ("missing", 1),
        ("not ISO 8601 or an epoch number", 1),
    ]


def test_each_source_may_age_at_its_own_pace_or_not_at_all() -> None:
    rows = two_sources("2024-01-01", "2024-01-01", "orders database disk", "orders database disk!")
    rows.append(AdapterResult("c", [{"id": "c1", "text": "lunch", "at": "2026-01-01"}]))
    paths = {**PATHS, "c": "at"}
    ranked = RankingSynthesizer(recency="half_life:365d,b:off", time_fields=paths).rank(rows, QUERY)
    by_id = {r.row["id"]: r.time for r in ranked}
    assert by_id["a1"]["freshness"] == pytest.approx(0.5 ** (731 / 365))
    assert by_id["a1"]["recency"] < 0
    assert by_id["b1"]["freshness"] == 1.0 and by_id["b1"]["recency"] == 0.0


def test_a_year_only_date_is_aged_from_the_middle_of_its_year() -> None:
    """Read as 1 January, '2025' would look half a year older than it may be, and lose to a
    '2025-03-01' row that may well be older than it."""
    rows = two_sources("2025", "2025-03-01", "orders database disk", "orders database disk")
    rows.append(AdapterResult("c", [{"id": "c1", "text": "lunch", "at": "2026-01-01T12:00:00Z"}]))
    ranked = RankingSynthesizer(recency="half_life:90d", time_fields={**PATHS, "c": "at"}).rank(
        rows, QUERY
    )
    by_id = {r.row["id"]: r.time for r in ranked}
    assert by_id["a1"]["age_days"] == pytest.approx(183.0, abs=0.01)  # 2 July 2025, noon
    assert by_id["b1"]["age_days"] == pytest.approx(306.0, abs=0.01)
    assert order(ranked, ("a1", "b1")) == ["a1", "b1"]


# --- the reference --------------------------------------------------------------------


def test_the_reference_is_the_newest_row_and_never_the_clock() -> None:
    rows = two_sources("2024-01-01", "2024-02-01", "orders database disk", "orders disk")
    ranker = RankingSynthesizer(recency="half_life:90d", time_fields=PATHS)
    found = ranker.merge_ranked(rows, QUERY)
    first, report = found.ranking, found.time
    assert report is not None and report["reference"] == "2024-02-01"
    assert report["from"] == "newest_row" and report["dated"] == 2
    assert ranker.rank(rows, QUERY) == first  # the same rows, the same answer, any day
    as_of_found = ranker.merge_ranked(rows, {**QUERY, "as_of": "2025-01-01T00:00:00Z"})
    as_of, report = as_of_found.ranking, as_of_found.time
    assert report is not None and (report["reference"], report["from"]) == (
        "2025-01-01T00:00:00Z",
        "as_of",
    )
    # a date is aged from its middle: noon
    ages = {r.row["id"]: r.time["age_days"] for r in as_of if r.time["time"] is not None}
    assert ages == {"a1": 365.5, "b1": 334.5}


def test_one_far_future_row_cannot_age_every_other() -> None:
    rows = [
        AdapterResult(
            "a",
            [
                {"id": "x", "text": "orders database disk", "at": "2024-01-01"},
                {"id": "y", "text": "orders database", "at": "2024-01-02"},
                {"id": "typo", "text": "orders", "at": "2124-01-01"},
            ],
        )
    ]
    with structlog.testing.capture_logs() as logs:
        ranked = RankingSynthesizer(recency="half_life:30d", time_fields={"a": "at"}).rank(
            rows, QUERY
        )
    by_id = {r.row["id"]: r.time for r in ranked}
    assert by_id["typo"]["age_days"] == 0.0
    assert by_id["y"]["age_days"] == pytest.approx(8 * 30)  # held back: eight half-lives
    assert [e["count"] for e in logs if e["event"] == "rank_time_ahead"] == [1]


# --- revisions ------------------------------------------------------------------------

OLD = "Incidents are reported to the regulator within 24 hours."
NEW = "Incidents are reported to the regulator within 48 hours."
REVISIONS = {"query": "when are incidents reported to the regulator"}


def revisions(old_time: object, new_time: object) -> list[AdapterResult]:
    return [
        AdapterResult(
            "archive",
            [{"id": "R-01", "text": OLD, "at": old_time}, {"id": "X", "text": "lunch menu"}],
        ),
        AdapterResult("faq", [{"id": "R-01", "text": NEW, "at": new_time}]),
    ]


#: Across sources, rows are revisions only by document key, where the newer's source may
#: revise the other's.
ACROSS: dict[str, Any] = {
    "time_fields": {"archive": "at", "faq": "at"},
    "document_keys": {"archive": "id", "faq": "id"},
    "may_revise": {"faq": ["archive"]},
}


def test_the_newest_revision_takes_the_best_place_with_the_older_in_its_provenance() -> None:
    ranker = RankingSynthesizer(supersede=True, **ACROSS)
    ranked = ranker.rank(revisions("2025-01-10", "2026-02-01T09:00:00Z"), REVISIONS)
    assert [(r.source_id, r.row["id"]) for r in ranked] == [("faq", "R-01"), ("archive", "X")]
    kept = ranked[0]
    assert [c.as_dict() for c in kept.also_from] == [
        {
            "source_id": "archive",
            "id": "R-01",
            "source_rank": 1,
            "copy": "revision",
            "time": "2025-01-10",
        }
    ]
    assert kept.also_from[0].label() == "archive:R-01 (revision of 2025-01-10)"


def test_revisions_whose_times_may_be_in_either_order_are_both_kept() -> None:
    ranker = RankingSynthesizer(supersede=True, **ACROSS)
    for old, new in (("2026", "2026-02-01"), ("2026-02-01", "2026-02-01"), (None, "2026-02-01")):
        ranked = ranker.rank(revisions(old, new), REVISIONS)
        assert sorted(r.source_id for r in ranked) == ["archive", "archive", "faq"], (old, new)


def test_time_wins_over_a_canonical_source() -> None:
    ranker = RankingSynthesizer(supersede=True, canonical_sources=["archive"], **ACROSS)
    ranked = ranker.rank(revisions("2025-01-10", "2026-02-01"), REVISIONS)
    assert (ranked[0].source_id, ranked[0].row["text"]) == ("faq", NEW)


def test_a_document_key_names_revisions_under_other_ids() -> None:
    rows = [
        AdapterResult("wiki", [{"id": "w-7", "page": "P", "text": OLD, "at": "2025-01-01"}]),
        AdapterResult("cms", [{"id": "c-1", "page": "P", "text": NEW, "at": "2026-01-01"}]),
    ]
    paths = {"wiki": "at", "cms": "at"}
    by_id = RankingSynthesizer(supersede=True, time_fields=paths).rank(rows, REVISIONS)
    assert len(by_id) == 2  # different ids: not revisions
    keys = {"wiki": "page", "cms": "page"}
    unnamed = RankingSynthesizer(supersede=True, time_fields=paths, document_keys=keys)
    assert len(unnamed.rank(rows, REVISIONS)) == 2  # cms may not revise wiki: both kept
    by_page = RankingSynthesizer(
        supersede=True, time_fields=paths, document_keys=keys, may_revise={"cms": ["wiki"]}
    ).rank(rows, REVISIONS)
    assert [r.row["id"] for r in by_page] == ["c-1"]
    assert [c.id for c in by_page[0].also_from] == ["w-7"]


# --- unset ----------------------------------------------------------------------------


def test_a_mapped_time_alone_changes_nothing() -> None:
    rows = revisions("2025-01-10", "2026-02-01")
    plain = RankingSynthesizer().rank(rows, REVISIONS)
    mapped = RankingSynthesizer(time_fields={"archive": "at", "faq": "at"}, document_keys={}).rank(
        rows, REVISIONS
    )
    assert mapped == plain and all(r.time is None for r in mapped)
    assert "time" not in Broker([FakeSource("a", rows[0].rows)]).request("x").to_dict()


def test_a_profile_ages_its_own_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NAUTILUS_PROFILES__FRESH__RANKING_RECENCY", "half_life:30d")
    monkeypatch.setenv("NAUTILUS_RANKING_TIME_FIELDS", "archive:at,faq:at")
    monkeypatch.setenv("NAUTILUS_RANKING_TOP_K", "5")
    settings = NautilusSettings()
    sources = [FakeSource(r.source_id, r.rows) for r in revisions("2025-01-10", "2026-02-01")]
    engine = Engine.of(Broker(sources), settings)
    engine.profiles = load_profiles(settings)
    engine.build_profiles(settings)
    fresh = answer_sync(engine, QueryRequest(query=REVISIONS["query"]), profile="fresh")
    assert fresh.response.time is not None and fresh.response.time["recency"] == "half_life:30d"
    plain = answer_sync(engine, QueryRequest(query=REVISIONS["query"]))
    assert plain.response.time is None


# --- odd rows, cursors ----------------------------------------------------------------

ODD_TIMES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(["2025", "2025-02", "2025-02-30", "2025-13-01", "9999-12-31", "0000"]),
    st.datetimes(timezones=st.none() | st.just(dt.UTC)),
    st.dates(),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@settings(max_examples=60, deadline=None)
@given(times=st.lists(ODD_TIMES, min_size=1, max_size=12), ids=st.lists(st.sampled_from("abc")))
@example(times=["1e400", float("nan"), "2026-01-01T00:00:00+14:00", 10**19], ids=["a", "a"])
def test_any_time_value_is_read_or_left_unaged_never_raised_or_dropped(
    times: list[Any], ids: list[str]
) -> None:
    rows = [
        {"id": ids[i] if i < len(ids) else f"r{i}", "text": f"orders disk {i}", "at": at}
        for i, at in enumerate(times)
    ]
    results = [AdapterResult("a", rows[::2]), AdapterResult("b", rows[1::2])]
    ranker = RankingSynthesizer(
        recency="window:30d,b:half_life:1h", supersede=True, time_fields=PATHS
    )
    ranked = ranker.rank(results, {"query": "orders disk"})
    revisions_kept = sum(c.copy == "revision" for r in ranked for c in r.also_from)
    assert len(ranked) + revisions_kept == len(rows)  # every row shown, or a revision of one
    for r in ranked:
        assert r.time is not None and r.time["recency"] <= 0.0
        own = r.time.get("own_score", r.score)  # a revision in force shows its place's score
        assert own == pytest.approx(r.relevance + r.boost_bump + r.time["recency"])


def test_as_of_is_in_the_cursor_a_cursor_made_as_of_one_time_is_refused_as_of_another() -> None:
    sources = [FakeSource(r.source_id, r.rows) for r in revisions("2025-01-10", "2026-02-01")]
    sources.append(FakeSource("more", [{"id": f"m{i}", "text": OLD + f" {i}"} for i in range(4)]))
    engine = Engine.of(Broker(sources), NautilusSettings(ranking_recency="half_life:30d"))

    def ask(as_of: str | None, cursor: str | None = None) -> Any:
        request = QueryRequest(query=REVISIONS["query"], top_k=2, as_of=as_of, cursor=cursor)
        return answer_sync(engine, request)

    first = ask("2026-03-01")
    assert first.response.time["reference"] == "2026-03-01" and first.next_cursor
    assert ask("2026-03-01", first.next_cursor).response.ranking  # the same as_of: page 2
    with pytest.raises(ProblemError) as refused:
        ask("2026-06-01", first.next_cursor)
    assert refused.value.extra["field"] == "cursor"
    with pytest.raises(ProblemError):
        ask(None, first.next_cursor)  # the newest row's time is another reference too


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("halflife:30d", "unknown decay 'halflife' (did you mean half_life?)"),
        ("half-life:30d", "unknown decay 'half-life' (did you mean half_life?)"),
        ("tickets:windw:7d", "unknown decay 'windw' (did you mean window?)"),
        ("tickets:30d", "unknown decay 'tickets' (half_life or window)"),
    ],
)
def test_a_mistyped_decay_is_named_with_the_decay_it_is_likely_a_typo_of(
    raw: str, reason: str
) -> None:
    """``halflife:30d`` was read as a source ``halflife`` with the decay ``30d``."""
    value, problem = parse_recency("NAUTILUS_RANKING_RECENCY", raw)
    assert value is None and problem is not None
    assert problem.value == raw
    assert problem.reason == reason
