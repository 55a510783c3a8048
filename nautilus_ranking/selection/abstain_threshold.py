"""Choosing the abstain threshold ``p`` from scored queries, with what each choice promises.

Two sides of a deployment's queries can be scored: the **answerable** ones (judged
queries whose top 10 held a relevant row) and the **null** ones (off-topic queries:
nothing relevant is there). An answer abstains when its confidence is below ``p``.

- :func:`conformal_threshold`: the largest ``p`` whose false-abstain rate on a new
  answerable query, exchangeable with the ``n`` scored, is at most ``alpha``. It is the
  ``k``-th smallest answerable score, ``k = floor(alpha * (n + 1))``: a new query falls
  strictly below it with probability at most ``k / (n + 1)``, whatever the scores'
  distribution (split conformal prediction). With ``n < 1 / alpha - 1`` no ``p`` above
  0 carries the guarantee: ``k`` is 0 and the answer is ``None``.
- :func:`null_threshold`: without judgments, the least ``p`` that abstains on a new
  null query with probability at least ``rate``: just above the ``j``-th smallest null
  score, ``j = ceil(rate * (m + 1))``. It promises nothing about answerable queries.
- :func:`clopper_pearson`: the exact binomial interval the measured rates are quoted
  with.

Confidences are rounded to 4 decimals (``confidence.estimate``), so a ``p`` on that grid
compares with them exactly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: The step confidences are rounded to.
GRID = 1e-4


@dataclass(frozen=True)
class Threshold:
    """A chosen ``p`` and what it promises: ``bound``, the guaranteed rate (false
    abstain at most ``bound``; or, for the null side, off-topic abstain at least
    ``bound``), over ``n`` scored queries, the ``k``-th order statistic."""

    p: float
    bound: float
    n: int
    k: int


def conformal_threshold(answerable: Sequence[float], alpha: float) -> Threshold | None:
    """The largest ``p`` with false abstain at most ``alpha`` on a new answerable query
    (module docstring); None when ``n`` is too small for any (``n < 1/alpha - 1``)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    scores = sorted(answerable)
    n = len(scores)
    k = math.floor(alpha * (n + 1) + 1e-12)
    if k < 1:
        return None
    return Threshold(p=scores[k - 1], bound=k / (n + 1), n=n, k=k)


def null_threshold(null: Sequence[float], rate: float) -> Threshold | None:
    """The least grid ``p`` abstaining on a new null query with probability at least
    ``rate`` (module docstring); None when ``m`` is too small (``ceil(rate(m+1)) > m``)."""
    if not 0 < rate < 1:
        raise ValueError(f"rate must be in (0, 1), got {rate}")
    scores = sorted(null)
    m = len(scores)
    j = math.ceil(rate * (m + 1) - 1e-12)
    if j > m or j < 1:
        return None
    p = round(math.floor(scores[j - 1] / GRID + 1e-6) * GRID + GRID, 4)
    return Threshold(p=p, bound=j / (m + 1), n=m, k=j)


def abstain_rate(scores: Sequence[float], p: float) -> tuple[int, int]:
    """How many of ``scores`` abstain under ``p`` (below it), and of how many."""
    return sum(1 for s in scores if s < p), len(scores)


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) ``level`` interval of a rate seen ``k`` times in ``n``."""
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= k <= n:
        raise ValueError(f"k must be in [0, n], got k={k}, n={n}")
    tail = (1 - level) / 2
    low = 0.0 if k == 0 else _solve(lambda q: _upper_tail(k, n, q) - tail)
    high = 1.0 if k == n else _solve(lambda q: tail - _lower_tail(k, n, q))
    return low, high


def _lower_tail(k: int, n: int, q: float) -> float:
    """P(X <= k) for X ~ Binomial(n, q)."""
    return sum(_pmf(i, n, q) for i in range(k + 1))


def _upper_tail(k: int, n: int, q: float) -> float:
    """P(X >= k) for X ~ Binomial(n, q)."""
    return sum(_pmf(i, n, q) for i in range(k, n + 1))


def _pmf(i: int, n: int, q: float) -> float:
    if q <= 0.0:
        return 1.0 if i == 0 else 0.0
    if q >= 1.0:
        return 1.0 if i == n else 0.0
    log = (
        math.lgamma(n + 1)
        - math.lgamma(i + 1)
        - math.lgamma(n - i + 1)
        + i * math.log(q)
        + (n - i) * math.log1p(-q)
    )
    return math.exp(log)


def _solve(increasing: Callable[[float], float]) -> float:
    """The root in [0, 1] of an increasing function, by bisection (60 halvings)."""
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        if increasing(mid) < 0:
            low = mid
        else:
            high = mid
    return (low + high) / 2
