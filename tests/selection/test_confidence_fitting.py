"""The confidence's fitter and the abstain threshold's picker, each held against a
brute-force reference on small arrays."""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import numpy as np
import pytest

from nautilus_ranking.selection import confidence
from nautilus_ranking.selection.abstain_threshold import (
    clopper_pearson,
    conformal_threshold,
)
from nautilus_ranking.selection.confidence_fitting import (
    ece,
    fit_logistic,
    fit_setup,
    isotonic,
    predict,
)


def _penalised_loss(w: np.ndarray, z: np.ndarray, y: np.ndarray, l2: float) -> float:
    s = z @ w
    nll = float(np.sum(np.logaddexp(0, s) - y * s))
    return nll + 0.5 * l2 * float(np.sum(w[:-1] ** 2))


@pytest.mark.parametrize("seed", range(4))
def test_the_logistic_fit_is_the_penalised_likelihoods_minimum(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(12, 2)) * [3.0, 0.5] + [10.0, -1.0]
    y = (rng.random(12) < 1 / (1 + np.exp(-(x[:, 0] - 10)))).astype(float)
    y[:2] = [0.0, 1.0]  # both labels present
    fit = fit_logistic(x, y, l2=1.0)
    z = np.hstack([(x - fit["mean"]) / fit["scale"], np.ones((12, 1))])
    w = np.array([*fit["coef"], fit["intercept"]])
    best = _penalised_loss(w, z, y, 1.0)
    # brute force: no point of a grid around the fit, nor any random nudge, does better
    for step in itertools.product((-0.05, 0.0, 0.05), repeat=3):
        assert _penalised_loss(w + np.array(step), z, y, 1.0) >= best - 1e-9
    for _ in range(200):
        assert _penalised_loss(w + rng.normal(scale=0.3, size=3), z, y, 1.0) >= best - 1e-9


def _best_monotone_blocks(y: list[float]) -> list[float]:
    """Brute force: over every split into contiguous blocks whose means never fall, the
    one with the least squared error (the isotonic regression), as fitted values."""
    n = len(y)
    best: tuple[float, list[float]] | None = None
    for cuts in itertools.product((False, True), repeat=n - 1):
        bounds = [0, *[i + 1 for i, c in enumerate(cuts) if c], n]
        means = [Fraction(sum(y[a:b])) / (b - a) for a, b in itertools.pairwise(bounds)]
        if any(m2 < m1 for m1, m2 in itertools.pairwise(means)):
            continue
        fitted = [
            float(m)
            for (a, b), m in zip(itertools.pairwise(bounds), means, strict=True)
            for _ in range(b - a)
        ]
        err = sum((f - v) ** 2 for f, v in zip(fitted, y, strict=True))
        if best is None or err < best[0] - 1e-12:
            best = (err, fitted)
    assert best is not None
    return best[1]


@pytest.mark.parametrize("seed", range(30))
def test_the_isotonic_map_is_the_least_squares_monotone_fit(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(2, 9)
    y = [float(rng.random() < 0.5) for _ in range(n)]
    z = np.arange(n, dtype=float)  # distinct, sorted scores: score i is query i
    knots, values = isotonic(z, np.array(y))
    # the brute force's fitted values, as runs of one value: a knot at each run's middle
    expected = _best_monotone_blocks(y)
    runs = [list(g) for _, g in itertools.groupby(range(n), key=lambda i: expected[i])]
    assert knots == pytest.approx([(r[0] + r[-1]) / 2 for r in runs])
    assert values == pytest.approx([expected[r[0]] for r in runs], abs=1e-6)


def test_thin_blocks_are_pooled_so_no_end_rests_on_a_few_queries() -> None:
    z = np.arange(20, dtype=float)
    y = np.array([0.0] * 9 + [1.0] + [0.0] * 9 + [1.0])
    knots, values = isotonic(z, y, min_share=0.25)
    # every block holds at least 5 of the 20 queries: at most 4 blocks
    assert len(knots) <= 4 and values == sorted(values)


def test_a_fit_reads_back_as_the_ranking_reads_it() -> None:
    rng = np.random.default_rng(3)
    x = np.column_stack([rng.uniform(0, 1, 200), rng.uniform(0, 1, 200)])
    y = (rng.random(200) < x[:, 0]).astype(float)
    fit = fit_setup(("top_similarity", "top_lexical"), x, y)
    parsed = confidence.parse_fits({"setups": {"s": fit}})["s"]
    p = predict(fit, x)
    assert p[0] == round(parsed.probability(x[0]), 4)
    assert np.all((p >= 0) & (p <= 1))
    # on its own data, read between the knots, it stays near calibrated
    assert ece(p, y) < 0.1


def test_ece_is_the_weighted_gap_per_bin() -> None:
    p = np.array([0.05, 0.05, 0.95, 0.95])
    y = np.array([0.0, 1.0, 1.0, 1.0])
    assert ece(p, y) == pytest.approx(0.5 * abs(0.05 - 0.5) + 0.5 * abs(0.95 - 1.0))


# --- the threshold --------------------------------------------------------------------


def _exact_false_abstain(n: int, k: int) -> Fraction:
    """Brute force over the (n + 1)! orders of n calibration scores and a new one (all
    distinct, exchangeable: every order equally likely): how often the new score falls
    strictly below the k-th smallest calibration score."""
    below = total = 0
    for order in itertools.permutations(range(n + 1)):
        new, calibration = order[0], sorted(order[1:])
        total += 1
        below += new < calibration[k - 1]
    return Fraction(below, total)


@pytest.mark.parametrize(("n", "alpha"), [(3, 0.25), (4, 0.2), (5, 0.34), (6, 0.3), (4, 0.5)])
def test_the_conformal_threshold_keeps_false_abstain_under_alpha(n: int, alpha: float) -> None:
    scores = [0.1 * (i + 1) for i in range(n)]
    chosen = conformal_threshold(scores, alpha)
    assert chosen is not None
    exact = _exact_false_abstain(n, chosen.k)
    assert exact == Fraction(chosen.k, n + 1) and float(exact) <= alpha
    # and it is the largest: the next order statistic breaks the bound
    if chosen.k < n:
        assert float(_exact_false_abstain(n, chosen.k + 1)) > alpha
    assert chosen.p == sorted(scores)[chosen.k - 1]


def test_too_few_answerable_queries_give_no_threshold() -> None:
    # alpha = 0.02 needs n >= 1/alpha - 1 = 49
    assert conformal_threshold([0.5] * 48, 0.02) is None
    found = conformal_threshold([0.5] * 49, 0.02)
    assert found is not None and found.k == 1 and found.bound == pytest.approx(0.02)


def _binomial_tail(k: int, n: int, q: float, upper: bool) -> float:
    terms = range(k, n + 1) if upper else range(k + 1)
    return sum(math.comb(n, i) * q**i * (1 - q) ** (n - i) for i in terms)


@pytest.mark.parametrize(("k", "n"), [(0, 10), (3, 10), (10, 10), (45, 50), (1, 7)])
def test_clopper_pearson_matches_the_binomial_tails(k: int, n: int) -> None:
    low, high = clopper_pearson(k, n)
    # brute force over a grid of q: the interval is where neither tail is below 2.5%
    grid = [i / 2000 for i in range(2001)]
    inside = [q for q in grid if _binomial_tail(k, n, q, True) > 0.025 or k == 0]
    inside = [q for q in inside if _binomial_tail(k, n, q, False) > 0.025 or k == n]
    assert low == pytest.approx(min(inside), abs=1e-3)
    assert high == pytest.approx(max(inside), abs=1e-3)
