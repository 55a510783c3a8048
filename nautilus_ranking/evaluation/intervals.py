"""Exact intervals and tests for a rate: Clopper–Pearson, and the one-sided binomial test.

An abstain rate is a count of a few queries out of tens: a normal approximation would
give intervals below 0 or above 1 there. Clopper–Pearson inverts the binomial test, so
its interval covers the true rate at least 95% of the time whatever ``n``; it is found
here by bisection on the binomial tail, with no statistics package.
"""

from __future__ import annotations

import math
from collections.abc import Callable

#: Bisection steps: 2^-60 of [0, 1] is far below a printed digit.
_STEPS = 60


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


def clopper_pearson(successes: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact two-sided ``level`` interval of a rate seen ``successes`` times in ``n``
    (``(0, 1)`` when ``n`` is 0: nothing is known)."""
    if n <= 0:
        return 0.0, 1.0
    tail = (1.0 - level) / 2
    low = (
        0.0 if successes == 0 else _bisect(lambda r: 1.0 - binomial_cdf(successes - 1, n, r), tail)
    )
    high = (
        1.0
        if successes == n
        else _bisect(lambda r: binomial_cdf(successes, n, r), tail, falling=True)
    )
    return low, high


def at_most_p_value(successes: int, n: int, bound: float) -> float:
    """One-sided p-value that the rate is at most ``bound``, having seen ``successes`` in
    ``n``: ``P(X <= successes)`` were the rate just above ``bound`` (small: the rate is
    measurably within it). 1 when ``n`` is 0."""
    return 1.0 if n <= 0 else binomial_cdf(successes, n, bound)


def _bisect(tail: Callable[[float], float], target: float, falling: bool = False) -> float:
    """The rate where the monotone ``tail(rate)`` crosses ``target`` (``falling``: it
    falls as the rate grows)."""
    low, high = 0.0, 1.0
    for _ in range(_STEPS):
        middle = (low + high) / 2
        above = tail(middle) > target
        if above != falling:
            high = middle
        else:
            low = middle
    return (low + high) / 2
