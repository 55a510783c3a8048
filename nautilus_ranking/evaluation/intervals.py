"""Exact intervals and tests for a rate: Clopper–Pearson (the one the calibration quotes,
``selection/abstain_threshold.py``), and the one-sided binomial test.

An abstain rate is a count of a few queries out of tens: a normal approximation would
give intervals below 0 or above 1 there. Clopper–Pearson inverts the binomial test, so
its interval covers the true rate at least 95% of the time whatever ``n``; it is found
by bisection on the binomial tail, with no statistics package (one function for eval
and calibrate both).
"""

from __future__ import annotations

import math

from nautilus_ranking.selection.abstain_threshold import clopper_pearson

__all__ = ["at_most_p_value", "binomial_cdf", "clopper_pearson"]


def binomial_cdf(successes: int, n: int, rate: float) -> float:
    """``P(X <= successes)`` for ``X ~ Binomial(n, rate)``, summed in log space."""
    if successes < 0:
        return 0.0
    if successes >= n or rate <= 0.0:
        return 1.0
    if rate >= 1.0:
        return 0.0
    log_p, log_q = math.log(rate), math.log1p(-rate)
    terms = [
        math.lgamma(n + 1)
        - math.lgamma(i + 1)
        - math.lgamma(n - i + 1)
        + i * log_p
        + (n - i) * log_q
        for i in range(successes + 1)
    ]
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in terms))


def at_most_p_value(successes: int, n: int, bound: float) -> float:
    """One-sided p-value that the rate is at most ``bound``, having seen ``successes`` in
    ``n``: ``P(X <= successes)`` were the rate just above ``bound`` (small: the rate is
    measurably within it). 1 when ``n`` is 0."""
    return 1.0 if n <= 0 else binomial_cdf(successes, n, bound)
