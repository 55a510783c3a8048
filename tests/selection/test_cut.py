"""The relevance cut: a prefix of the ranking, never empty, read from relevance."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nautilus_ranking.errors import Problem
from nautilus_ranking.records import RankedRow
from nautilus_ranking.selection.cut import (
    CUT_SETTINGS,
    RelevanceCut,
    normalised_content,
    parse_cut,
    relevance_cut,
)


def rows(
    relevance: list[float],
    content: list[float] | None = None,
    weight: float = 1.0,
    score: list[float] | None = None,
) -> list[RankedRow]:
    content = content if content is not None else [0.0] * len(relevance)
    score = score if score is not None else relevance
    return [
        RankedRow(
            "s",
            {"id": i},
            score[i],
            i + 1,
            i + 1,
            relevance=r,
            content=content[i],
            content_weight=weight,
        )
        for i, r in enumerate(relevance)
    ]


R = RelevanceCut


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, None),
        ("", None),
        (" off ", None),
        ("OFF", None),
        ("none", None),
        ("relative:0.8", R("relative", 0.8)),
        (" Relative : .5 ", R("relative", 0.5)),
        ("floor:1", R("floor", 1.0)),
        ("gap:0.1", R("gap", 0.1)),
        ("gap:+0.25", R("gap", 0.25)),
    ],
)
def test_settings_that_parse(raw: Any, expected: RelevanceCut | None) -> None:
    assert parse_cut("NAUTILUS_RANKING_CUT", raw) == (expected, None)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("relative", "not a cut setting"),
        ("top:0.5", "not a cut setting"),
        ("relative:0", "the number is not in (0, 1]"),
        ("floor:1.5", "the number is not in (0, 1]"),
        ("gap:-0.1", "not a cut setting"),
        ("relative:0.8x", "not a cut setting"),
        (0.8, "not a cut setting"),
        ("relative:nan", "not a cut setting"),
    ],
)
def test_a_bad_setting_names_the_variable_the_value_and_the_choices(raw: Any, reason: str) -> None:
    value, problem = parse_cut("NAUTILUS_RANKING_CUT", raw)
    assert value is None
    assert isinstance(problem, Problem)
    assert problem.variable == "NAUTILUS_RANKING_CUT"
    assert problem.reason == reason
    assert "relative:A, floor:T or gap:G" in problem.valid


def test_every_documented_setting_parses_and_prints_as_written() -> None:
    for setting in CUT_SETTINGS[1:]:
        cut, problem = parse_cut("x", setting)
        assert problem is None and str(cut) == setting


def test_relative_keeps_the_rows_within_a_share_of_the_best() -> None:
    # best 0.040; relative:0.8 keeps relevance >= 0.032: 0.040, 0.035, 0.033
    ranked = rows([0.040, 0.035, 0.033, 0.020, 0.019])
    assert relevance_cut(ranked, R("relative", 0.8)) == 3
    assert relevance_cut(ranked, R("relative", 0.4)) == 5  # 0.016: every row


def test_floor_reads_the_normalised_content_score() -> None:
    # content weight 0.5: a content vote c is ŝ = c · 61 / 0.5
    content = [0.9 * 0.5 / 61, 0.7 * 0.5 / 61, 0.4 * 0.5 / 61, 0.65 * 0.5 / 61]
    ranked = rows([0.03, 0.02, 0.01, 0.005], content, weight=0.5)
    assert normalised_content(ranked[1]) == pytest.approx(0.7)
    # the last row at ŝ >= 0.6 is the 4th (0.65): the 3rd (0.4) stays, a prefix
    assert relevance_cut(ranked, R("floor", 0.6)) == 4
    assert relevance_cut(ranked, R("floor", 0.8)) == 1
    assert relevance_cut(ranked, R("floor", 0.95)) == 1  # the first row always


def test_gap_cuts_at_the_largest_drop_when_it_is_large_enough() -> None:
    # drops 0.125, 0.25, 0.125: the largest after the 2nd row, 0.25 = 0.25 × the best (1)
    ranked = rows([1.0, 0.875, 0.625, 0.5])
    assert relevance_cut(ranked, R("gap", 0.25)) == 2
    assert relevance_cut(ranked, R("gap", 0.26)) == 4  # no drop that large: all


def test_no_cut_and_short_lists() -> None:
    ranked = rows([0.04, 0.01])
    assert relevance_cut(ranked, None) == 2
    assert relevance_cut([], R("relative", 0.9)) == 0
    assert relevance_cut(ranked[:1], R("floor", 1.0)) == 1


def test_a_boosted_row_with_less_relevance_never_cuts_the_better_rows_below_it() -> None:
    # Boosted order (score): the 2nd row is boosted, its relevance lower than the 3rd's.
    ranked = rows([0.040, 0.020, 0.036, 0.010], score=[0.041, 0.039, 0.036, 0.010])
    assert relevance_cut(ranked, R("relative", 0.8)) == 3  # 0.036 passes: kept, and above
    # the drop after the 2nd row is not a drop of everything below (0.036 is there)
    assert relevance_cut(ranked, R("gap", 0.1)) == 3  # 0.020 → 0.010 below all


finite = st.floats(0.0, 0.05, allow_nan=False)


@given(
    st.lists(st.tuples(finite, st.floats(0.0, 1.0)), min_size=1, max_size=30),
    st.sampled_from(["relative", "floor", "gap"]),
    st.floats(0.01, 1.0),
)
def test_a_cut_is_a_non_empty_prefix_that_drops_no_passing_row(
    values: list[tuple[float, float]], method: str, value: float
) -> None:
    ranked = rows([r for r, _ in values], [s / 61 for _, s in values])
    kept = relevance_cut(ranked, R(method, value))
    assert 1 <= kept <= len(ranked)
    best = max(r.relevance for r in ranked)
    if method == "relative":
        assert all(r.relevance < value * best for r in ranked[kept:])
        assert any(r.relevance == best for r in ranked[:kept])  # the strongest match
    elif method == "floor":
        assert all(normalised_content(r) < value for r in ranked[kept:])
    else:
        assert any(r.relevance == best for r in ranked[:kept])
        if kept < len(ranked):  # a real drop: every row kept above every row left out
            assert min(r.relevance for r in ranked[:kept]) > max(r.relevance for r in ranked[kept:])
