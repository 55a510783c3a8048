"""The abstain threshold's two sides together: the off-topic rate held with a stated
confidence, capped by the false-abstain quantile, each held against a brute-force
reference (every subset, every grid step) on small arrays."""

from __future__ import annotations

import itertools
import math

import pytest

from nautilus_ranking.selection.abstain_threshold import (
    GRID,
    choose_p,
    false_abstain_bound,
    null_threshold,
)

#: Every grid step a threshold can take on [0, 1].
STEPS = [round(i * GRID, 4) for i in range(int(1 / GRID) + 1)]


def _coverage_at_least(rate: float, m: int, j: int) -> float:
    """P(at least ``rate`` of new null scores fall at or below the ``j``-th smallest of
    ``m``), by every subset: the ``j``-th smallest of ``m`` uniforms is at least ``rate``
    when fewer than ``j`` of them fall below ``rate``."""
    total = 0.0
    for size in range(m + 1):
        for _ in itertools.combinations(range(m), size):
            if size <= j - 1:
                total += rate**size * (1 - rate) ** (m - size)
    return total


def _reference_null_p(null: list[float], rate: float, confidence: float) -> float | None:
    """The least grid ``p`` with enough null scores below it for ``rate`` at
    ``confidence``."""
    m = len(null)
    j = next((j for j in range(1, m + 1) if _coverage_at_least(rate, m, j) >= confidence), None)
    if j is None:
        return None
    return next(p for p in STEPS if sum(s < p for s in null) >= j)


def _reference_cap(answerable: list[float], alpha: float) -> float | None:
    """The largest grid ``p`` whose conformal false-abstain bound is at most ``alpha``."""
    n = len(answerable)
    fits = [p for p in STEPS if (sum(s < p for s in answerable) + 1) / (n + 1) <= alpha]
    return max(fits) if fits else None


NULL = [0.0312, 0.0051, 0.1207, 0.0834, 0.2511, 0.0093, 0.1702, 0.0425, 0.3118, 0.0666]


@pytest.mark.parametrize(
    ("rate", "confidence"), [(0.5, 0.8), (0.5, 0.95), (0.7, 0.6), (0.6, 0.9), (0.3, 0.99)]
)
def test_the_null_threshold_holds_the_rate_with_its_confidence(
    rate: float, confidence: float
) -> None:
    chosen = null_threshold(NULL, rate, confidence)
    expected = _reference_null_p(NULL, rate, confidence)
    assert expected is not None and chosen is not None
    assert chosen.p == expected and chosen.bound == rate
    assert sum(s < chosen.p for s in NULL) == chosen.k
    # the j-th order statistic reaches the rate with at least the confidence, the one
    # before it does not: the least p that keeps the promise
    assert _coverage_at_least(rate, len(NULL), chosen.k) >= confidence
    assert _coverage_at_least(rate, len(NULL), chosen.k - 1) < confidence


def test_too_few_null_scores_for_the_confidence_give_no_threshold() -> None:
    # all 10 below p reach 0.9 with probability 1 - 0.9**10 = 0.65 only
    assert _reference_null_p(NULL, 0.9, 0.95) is None
    assert null_threshold(NULL, 0.9, 0.95) is None
    assert null_threshold(NULL, 0.9, 0.6) is not None


ANSWERABLE = [0.2104, 0.3391, 0.0718, 0.4402, 0.2876, 0.5123, 0.1555, 0.3937, 0.2261]


@pytest.mark.parametrize(
    ("answerable", "alpha", "rate", "confidence"),
    [
        (ANSWERABLE, 0.2, 0.5, 0.8),  # the off-topic side sets p, under the cap
        (ANSWERABLE, 0.2, 0.6, 0.95),  # the cap binds
        ([s / 4 for s in ANSWERABLE], 0.3, 0.5, 0.8),  # low answerable scores: the cap
        (ANSWERABLE, 0.05, 0.5, 0.8),  # n < 1/alpha - 1: no cap, the off-topic side alone
    ],
)
def test_p_is_the_least_reaching_the_off_topic_rate_never_above_the_cap(
    answerable: list[float], alpha: float, rate: float, confidence: float
) -> None:
    answerable = [round(s, 4) for s in answerable]
    chosen = choose_p(answerable, NULL, alpha, rate, confidence)
    null_p = _reference_null_p(NULL, rate, confidence)
    cap = _reference_cap(answerable, alpha)
    assert null_p is not None
    expected = null_p if cap is None else min(null_p, cap)
    assert chosen.p == expected
    assert chosen.chosen_on == ("null" if expected == null_p else "answerable")
    assert (chosen.conformal is None) == (cap is None)
    below = sum(s < expected for s in answerable)
    assert chosen.false_abstain_bound == pytest.approx((below + 1) / (len(answerable) + 1))
    if cap is not None:  # under the cap the promise on answerable queries holds
        assert chosen.false_abstain_bound is not None
        assert chosen.false_abstain_bound <= alpha + 1e-12


def test_without_answerable_scores_the_off_topic_side_alone_sets_p() -> None:
    chosen = choose_p([], NULL, 0.02, 0.5, 0.8)
    assert chosen.p == _reference_null_p(NULL, 0.5, 0.8) and chosen.chosen_on == "null"
    assert chosen.conformal is None and chosen.false_abstain_bound is None
    nothing = choose_p([], NULL[:3], 0.02, 0.9, 0.95)
    assert nothing.p is None and nothing.chosen_on is None


def test_the_false_abstain_bound_counts_the_scores_strictly_below() -> None:
    scores = [0.1, 0.2, 0.2, 0.4]
    assert false_abstain_bound(scores, 0.05) == pytest.approx(1 / 5)
    assert false_abstain_bound(scores, 0.2) == pytest.approx(2 / 5)  # ties are not below
    assert false_abstain_bound(scores, 0.3) == pytest.approx(4 / 5)
    assert false_abstain_bound(scores, 0.9) == 1.0
    assert math.isclose(false_abstain_bound([], 0.5), 1.0)
