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
- :func:`null_threshold`: the least ``p`` that abstains on at least ``rate`` of new null
  queries, with probability ``confidence`` over the draw of the ``m`` scored (not only
  on average, so a deployment's measured rate is not a coin flip around the target):
  just above the ``j``-th smallest null score, the least ``j`` with
  ``P(Binomial(m, rate) <= j - 1) >= confidence`` (the ``j``-th of ``m`` uniform order
  statistics is ``Beta(j, m + 1 - j)``). It promises nothing about answerable queries.
- :func:`choose_p`: both at once. The off-topic target sets ``p`` (the least ``p``
  reaching it abstains on the fewest answers); the false-abstain quantile caps it. Any
  ``p`` between the two keeps both promises, and the lowest loses the least nDCG.
- :func:`false_abstain_bound`: what any ``p`` promises on the answerable side:
  ``(c + 1) / (n + 1)`` with ``c`` of the ``n`` answerable scores below it.
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
#: How sure the null side's rate is: over draws of the off-topic queries, at least
#: ``rate`` of new ones abstain with this probability.
NULL_CONFIDENCE = 0.95


@dataclass(frozen=True)
class Threshold:
    """A chosen ``p`` and what it promises: ``bound``, the guaranteed rate (false
    abstain at most ``bound``; or, for the null side, off-topic abstain at least
    ``bound`` with ``NULL_CONFIDENCE``), over ``n`` scored queries, the ``k``-th order
    statistic."""

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


def null_threshold(
    null: Sequence[float], rate: float, confidence: float = NULL_CONFIDENCE
) -> Threshold | None:
    """The least grid ``p`` abstaining on at least ``rate`` of new null queries with
    probability ``confidence`` (module docstring); None when ``m`` is too small for it.
    ``bound`` is ``rate``."""
    if not 0 < rate < 1:
        raise ValueError(f"rate must be in (0, 1), got {rate}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    scores = sorted(null)
    m = len(scores)
    j, held = 0, 0.0  # held: P(Binomial(m, rate) <= j - 1), grown a term at a time
    while held < confidence and j < m:
        held += _pmf(j, m, rate)
        j += 1
    if held < confidence:
        return None
    p = round(math.floor(scores[j - 1] / GRID + 1e-6) * GRID + GRID, 4)
    return Threshold(p=p, bound=rate, n=m, k=j)


@dataclass(frozen=True)
class Choice:
    """The recommended ``p`` (None: neither side can set one) and the side that set
    it: ``null`` (the least ``p`` reaching the off-topic rate) or ``answerable`` (the
    false-abstain quantile, lower, capped it); each side's threshold, and the
    false-abstain bound at ``p`` (None without answerable scores)."""

    p: float | None
    chosen_on: str | None
    null: Threshold | None
    conformal: Threshold | None
    false_abstain_bound: float | None


def choose_p(
    answerable: Sequence[float],
    null: Sequence[float],
    alpha: float,
    rate: float,
    confidence: float = NULL_CONFIDENCE,
) -> Choice:
    """The least ``p`` abstaining on ``rate`` of off-topic queries, never above the
    largest ``p`` with false abstain at most ``alpha`` (module docstring). With too few
    answerable scores for ``alpha`` the off-topic side alone sets it, and the bound at
    ``p`` says what is left of a promise on the answerable side."""
    conformal = conformal_threshold(answerable, alpha) if answerable else None
    off_topic = null_threshold(null, rate, confidence) if null else None
    p: float | None = None
    side: str | None = None
    if conformal is not None and (off_topic is None or conformal.p < off_topic.p):
        p, side = conformal.p, "answerable"
    elif off_topic is not None:
        p, side = off_topic.p, "null"
    bound = false_abstain_bound(answerable, p) if answerable and p is not None else None
    return Choice(p, side, off_topic, conformal, bound)


def false_abstain_bound(answerable: Sequence[float], p: float) -> float:
    """At most this share of new answerable queries, exchangeable with ``answerable``,
    falls below ``p``: ``(c + 1) / (n + 1)``, ``c`` of the ``n`` scores below ``p`` (a
    new score is below the ``(c + 1)``-th smallest with that probability)."""
    below = sum(1 for s in answerable if s < p)
    return min(1.0, (below + 1) / (len(answerable) + 1))


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
