"""The boost level table and the two stage functions."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nautilus.ranking_boost import (
    BOOST_LEVELS,
    RRF_K,
    stage1_key,
    stage1_reach,
    stage2_score,
    weights_for,
)

LEVELS = ["low", "medium", "high"]


def test_table_is_frozen() -> None:
    with pytest.raises(TypeError):
        BOOST_LEVELS["extreme"] = BOOST_LEVELS["high"]  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        BOOST_LEVELS["high"].bump = 0.5  # type: ignore[misc]


def test_levels_are_ordered_in_both_stages() -> None:
    multipliers = [BOOST_LEVELS[level].multiplier for level in LEVELS]
    bumps = [BOOST_LEVELS[level].bump for level in LEVELS]
    assert 1.0 < multipliers[0] < multipliers[1] < multipliers[2]
    assert 0.0 < bumps[0] < bumps[1] < bumps[2]


def test_no_boost_is_the_identity() -> None:
    none = weights_for(None)
    assert stage1_key(7.0, none.multiplier) == 1.0 / (RRF_K + 7)
    assert stage2_score(0.25, none.bump) == 0.25


def test_stage2_worked_example() -> None:
    # high adds 2% of the row's own relevance; nothing to an irrelevant row.
    assert stage2_score(0.5, BOOST_LEVELS["high"].bump) == pytest.approx(0.5 + 0.02 * 0.5)
    assert stage2_score(0.0, BOOST_LEVELS["high"].bump) == 0.0
    assert stage2_score(-0.2, BOOST_LEVELS["high"].bump) == pytest.approx(-0.2 + 0.02 * 0.2)


def test_stage1_key_worked_example() -> None:
    # high: rank 9 counts as rank 9 / 1.5 = 6, so its key is 1 / (60 + 6).
    assert stage1_key(9.0, BOOST_LEVELS["high"].multiplier) == pytest.approx(1 / 66)
    # ...which ties an unboosted rank-6 row, and beats rank 7.
    assert stage1_key(9.0, 1.5) == pytest.approx(stage1_key(6.0))
    assert stage1_key(9.0, 1.5) > stage1_key(7.0)


def test_stage1_is_rank_aware_not_source_first() -> None:
    """Unlike a score multiplier of 6 (Hindsight), a boosted deep row never beats
    another source's top rows: the boost is bounded in rank space."""
    high = BOOST_LEVELS["high"].multiplier
    assert stage1_key(40.0, high) < stage1_key(5.0)
    # A boosted list still interleaves with the others instead of coming first.
    boosted = [stage1_key(float(r), high) for r in range(1, 31)]
    plain = [stage1_key(float(r)) for r in range(1, 31)]
    merged = sorted([(k, "boosted") for k in boosted] + [(k, "plain") for k in plain],
                    reverse=True)
    top_30 = [label for _, label in merged[:30]]
    assert 15 <= top_30.count("boosted") <= 21
    assert top_30.count("plain") >= 9


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("other_rank", [1, 2, 3, 5, 10, 17])
def test_stage1_reach_matches_the_keys(level: str, other_rank: int) -> None:
    """The documented reach is exact: rank `reach` overtakes, rank `reach + 1` does not."""
    multiplier = BOOST_LEVELS[level].multiplier
    reach = stage1_reach(level, other_rank)
    other = stage1_key(float(other_rank))
    if reach >= 1:
        assert stage1_key(float(reach), multiplier) > other
    assert stage1_key(float(reach + 1), multiplier) <= other


def test_stage1_reach_documented_values() -> None:
    # docs/configuration.md: at high, another source's rank-5 row can be overtaken
    # by boosted ranks 1-7, never 8; nothing but rank 1 reaches a rank-1 row.
    assert stage1_reach("high", 5) == 7
    assert stage1_reach("high", 1) == 1
    assert stage1_reach("medium", 5) == 6
    assert stage1_reach("low", 5) == 5
    assert stage1_reach("low", 10) == 10
    assert all(stage1_reach(level, 1) == 1 for level in LEVELS)


@given(relevance=st.floats(-1, 1), rank=st.integers(1, 10_000))
def test_both_stages_are_monotonic_in_level(relevance: float, rank: int) -> None:
    keys = [stage1_key(float(rank), weights_for(lvl).multiplier) for lvl in [None, *LEVELS]]
    scores = [stage2_score(relevance, weights_for(lvl).bump) for lvl in [None, *LEVELS]]
    assert keys == sorted(keys)
    assert scores == sorted(scores)


@given(boosted=st.floats(0, 1), other=st.floats(0, 1))
def test_stage2_is_bounded_by_the_bump(boosted: float, other: float) -> None:
    """A boosted row overtakes an unboosted one only if that one was less than
    `bump` (relative to the boosted row's relevance) above it."""
    bump = BOOST_LEVELS["high"].bump
    if stage2_score(boosted, bump) > stage2_score(other) and boosted < other:
        assert other - boosted < bump * boosted
