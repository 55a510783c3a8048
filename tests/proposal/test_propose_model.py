"""The position-based model's fit, the usefulness ratios, their bootstrap and Holm."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import minimize
from simulated_feedback import simulate

from nautilus_ranking.proposal.logs import Answer, read_logs
from nautilus_ranking.proposal.position_model import fit_pbm, log_likelihood
from nautilus_ranking.proposal.usefulness import _p_value, holm_adjusted, impressions, usefulness

# Small counts [profile, position, source]: two sources at three positions.
SHOWN = np.array([[[40.0, 10.0], [25.0, 25.0], [10.0, 40.0]]])
USED = np.array([[[30.0, 4.0], [9.0, 5.0], [5.0, 12.0]]])


def _brute_force_ll(shown: np.ndarray, used: np.ndarray) -> float:
    """The best log-likelihood a general optimiser finds over logit θ and γ, from many
    starts: the reference the EM fit must reach."""
    positions, sources = shown.shape[1], shown.shape[2]

    def negative(x: np.ndarray) -> float:
        theta = 1 / (1 + np.exp(-x[:positions]))
        gamma = 1 / (1 + np.exp(-x[positions:]))
        return -log_likelihood(shown[0], used[0], theta[None], gamma)

    best = -np.inf
    for start in itertools.product((-1.0, 0.0, 1.5), repeat=2):
        x0 = np.r_[np.full(positions, start[0]), np.full(sources, start[1])]
        found = minimize(
            negative,
            x0,
            method="Nelder-Mead",
            options={"maxiter": 20000, "xatol": 1e-10, "fatol": 1e-12},
        )
        best = max(best, -found.fun)
    return best


def test_em_reaches_the_brute_force_maximum() -> None:
    fit = fit_pbm(SHOWN[None], USED[None])
    em = log_likelihood(SHOWN[0], USED[0], fit.theta[0], fit.gamma[0])
    assert em >= _brute_force_ll(SHOWN, USED) - 1e-6


def test_one_source_fits_each_position_s_own_rate() -> None:
    """Analytic: with one source, θγ at each position is that position's use share."""
    shown = np.array([[[50.0], [40.0], [30.0], [20.0]]])
    used = np.array([[[35.0], [10.0], [6.0], [9.0]]])
    fit = fit_pbm(shown[None], used[None])
    rates = fit.theta[0, 0] * fit.gamma[0, 0]
    assert rates == pytest.approx(used[0, :, 0] / shown[0, :, 0], abs=1e-6)


def test_a_u_shaped_curve_is_fitted_as_it_is(tmp_path: Path) -> None:
    theta = [0.9, 0.6, 0.35, 0.25, 0.25, 0.35, 0.6, 0.8]
    simulate(tmp_path, 3000, theta, {"a": 0.5, "b": 0.5, "c": 0.5})
    found = usefulness(read_logs(tmp_path).answers, resamples=50)
    curve = found.curve[0]
    assert curve[3] < curve[0] and curve[3] < curve[7]  # falls, then rises again
    assert curve / curve[0] == pytest.approx(np.array(theta) / theta[0], abs=0.08)


def test_a_source_used_more_than_its_positions_predict(tmp_path: Path) -> None:
    simulate(tmp_path, 1500, [0.9, 0.5, 0.3, 0.3, 0.5, 0.8], {"a": 0.4, "b": 0.4, "good": 0.6})
    found = {s.source: s for s in usefulness(read_logs(tmp_path).answers, resamples=200).sources}
    assert found["good"].ratio == pytest.approx(1.5, abs=0.12)
    assert (
        found["good"].low > 1 and found["good"].p_holm is not None and found["good"].p_holm < 0.05
    )
    assert found["a"].low < 1 < found["a"].high


def test_the_bootstrap_is_deterministic(tmp_path: Path) -> None:
    simulate(tmp_path, 400, [0.8, 0.4, 0.3, 0.6], {"a": 0.5, "b": 0.3})
    answers = read_logs(tmp_path).answers
    first = usefulness(answers, resamples=100, seed=7)
    again = usefulness(answers, resamples=100, seed=7)
    other = usefulness(answers, resamples=100, seed=8)
    assert first.sources == again.sources
    assert [s.low for s in first.sources] != [s.low for s in other.sources]


def test_below_the_minimum_counts_is_not_enough_evidence(tmp_path: Path) -> None:
    simulate(tmp_path, 30, [0.8, 0.4, 0.3], {"a": 0.5, "b": 0.3})
    found = usefulness(read_logs(tmp_path).answers, resamples=50)
    assert not any(s.enough for s in found.sources)
    assert all(s.p_holm is None for s in found.sources)


def test_holm_adjusted_p_values() -> None:
    # sorted 0.01, 0.02, 0.04: 3 x 0.01, max(0.03, 2 x 0.02), max(0.04, 0.04)
    assert holm_adjusted([0.04, 0.01, 0.02]) == pytest.approx([0.04, 0.03, 0.04])
    assert holm_adjusted([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def _brute_force_draws(answers: list[Answer], resamples: int, seed: int) -> np.ndarray:
    """``[resample, source]``: each resample's answers listed out (an answer drawn twice is
    there twice), the model fitted from scratch, and each source's uses over those a row
    of that resample's median source would get at its positions."""
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(resamples):
        drawn = [answers[int(i)] for i in rng.integers(0, len(answers), len(answers))]
        shown, used = impressions(drawn).counts()
        fit = fit_pbm(shown[None], used[None])
        expected = np.einsum("pks,pk->s", shown, fit.theta[0]) * np.median(fit.gamma[0])
        draws.append(used.sum(axis=(0, 1)) / expected)
    return np.array(draws)


def test_the_interval_and_p_value_match_a_brute_force_bootstrap(tmp_path: Path) -> None:
    """The interval is the resampled ratios' percentiles and the p-value the ratio's
    distance from 1 over their spread, on the normal."""
    simulate(tmp_path, 600, [0.9, 0.5, 0.3, 0.6], {"a": 0.4, "b": 0.5, "c": 0.7})
    answers = read_logs(tmp_path).answers
    found = usefulness(answers, resamples=40, seed=3)
    draws = _brute_force_draws(answers, 40, 3)
    for j, row in enumerate(found.sources):
        assert [row.low, row.high] == pytest.approx(
            np.quantile(draws[:, j], [0.025, 0.975]), abs=1e-4
        )
        z = abs(row.ratio - 1) / np.std(draws[:, j], ddof=1)
        assert row.p_value == pytest.approx(math.erfc(z / math.sqrt(2)), rel=1e-3)


def test_a_ratio_as_far_below_1_as_another_is_above_is_as_clear() -> None:
    """The test reads the ratio on its own scale, where resampled ratios of counts are
    near symmetric: ``0.9 ± 0.04`` is as much evidence as ``1.1 ± 0.04``. On the log
    scale 0.9 would count for more and 1.1 for less."""
    spread = np.random.default_rng(0).normal(0.0, 0.04, 500)
    low, high = _p_value(0.9, 0.9 + spread), _p_value(1.1, 1.1 + spread)
    assert low == pytest.approx(high)
    assert low == pytest.approx(math.erfc(0.1 / np.std(spread, ddof=1) / math.sqrt(2)))
