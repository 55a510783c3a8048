"""Which alternative ``eval --sweep`` recommends: a gain that survives a familywise
correction across every alternative of the run, and keeps the other sources' recall.

A sweep compares some 20 to 40 alternatives with the current settings. Each with its
own 95% interval, the best of 20 that change nothing clears zero by chance in about
``1 - 0.975^20`` = 40% of runs: a lower bound just above zero on the best of many is
what a winner's curse looks like. So the family is corrected with Holm's step-down
(Holm, 1979) over the one-sided paired sign-flip p-values (``sweep.paired_test``, which
says why sign flips and not the bootstrap):
sort the ``m`` p-values ascending; the i-th smallest (i = 1, 2, …) is rejected while
``p_(i) <= alpha / (m - i + 1)``; at the first that is not, it and every larger one
stand. ``alpha`` is :data:`FAMILYWISE_ALPHA`, 0.025 one-sided: the level of the
uncorrected rule's 95% interval. ``m`` counts every
alternative of the run compared with the current settings: the sweep's rows, the
reference, the relevance-cut settings and, with unanswerable queries, the abstain
thresholds (:mod:`.abstain`: each one's hypothesis is a false-abstain rate above the
target). docs/eval.md has a worked example.

With fewer judged queries than :data:`ENOUGH_QUERIES` (docs/eval.md, step 1) the
recommended line is printed commented out, and :func:`queries_needed` says how many
queries the gain seen needs to clear the first Holm bar with 80% power:
``n = ((z(1 - alpha/m) + z(0.8)) * s / d)^2``, ``d`` the mean per-query gain and ``s``
the standard deviation of the per-query differences.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from nautilus_ranking.evaluation.metrics import DEFAULT_K
from nautilus_ranking.evaluation.sweep import (
    HIJACK_FLOOR,
    FloatArray,
    Scored,
    sign_flip_p_value,
)

__all__ = [
    "ENOUGH_QUERIES",
    "FAMILYWISE_ALPHA",
    "POWER",
    "Recommendation",
    "holm",
    "queries_needed",
    "recommend",
    "sign_flip_p_value",
]

#: One-sided familywise error rate: the level of a 95% interval's lower end.
FAMILYWISE_ALPHA = 0.025
#: How many judged queries docs/eval.md asks for, at least (30–50).
ENOUGH_QUERIES = 30
#: The chance :func:`queries_needed`'s count gives of clearing the bar, if the gain is real.
POWER = 0.8


@dataclass
class Recommendation:
    """The best alternative that survives the correction and is safe, or None and why."""

    best: Scored | None
    qualifying: list[Scored]
    reason: str
    family: int = 0  # m: the alternatives compared in this run
    best_seen: Scored | None = None  # the largest mean gain, survived or not
    #: The alternatives (by name; the reference too) whose gain passes the correction,
    #: safe or not: what the sweep table marks.
    passed: frozenset[str] = frozenset()
    #: Per abstain threshold tested (:attr:`.abstain.AbstainTable.tested`, in order):
    #: whether the correction rejects its false-abstain hypothesis.
    abstain_rejected: tuple[bool, ...] = ()


def holm(p_values: Sequence[float] | FloatArray, alpha: float = FAMILYWISE_ALPHA) -> np.ndarray:
    """Which hypotheses Holm's step-down rejects at familywise ``alpha`` (in input order)."""
    p = np.asarray(p_values, dtype=np.float64)
    m = len(p)
    rejected = np.zeros(m, dtype=bool)
    for i, at in enumerate(np.argsort(p, kind="stable")):
        if p[at] > alpha / (m - i):
            break
        rejected[at] = True
    return rejected


def queries_needed(
    diffs: Sequence[float] | FloatArray,
    family: int,
    alpha: float = FAMILYWISE_ALPHA,
    power: float = POWER,
) -> int | None:
    """Judged queries for a gain like this one (its mean and spread) to clear the first
    Holm bar of a family of ``family`` with probability ``power``; None without a gain."""
    values = np.asarray(diffs, dtype=np.float64)
    if len(values) < 2 or values.mean() <= 0:
        return None
    normal = NormalDist()
    z = normal.inv_cdf(1 - alpha / max(family, 1)) + normal.inv_cdf(power)
    spread = float(np.std(values, ddof=1))
    return max(2, math.ceil((z * spread / float(values.mean())) ** 2))


def recommend(
    scored: list[Scored],
    k: int = DEFAULT_K,
    extra_p_values: Sequence[float] = (),
    alpha: float = FAMILYWISE_ALPHA,
    reference: Scored | None = None,
    abstain_p_values: Sequence[float] = (),
) -> Recommendation:
    """The alternative with the largest nDCG@k gain among those Holm rejects (across
    ``scored[1:]``, ``extra_p_values``, ``reference`` and ``abstain_p_values``, the
    family's other members) under which every other source keeps ``HIJACK_FLOOR`` of
    its recall@k; and which abstain thresholds' hypotheses the same correction rejects."""
    candidates = [s for s in scored[1:] if not s.alternative.same_as_current]
    p_values = [s.p_value for s in candidates] + list(extra_p_values)
    p_values += [reference.p_value] if reference is not None else []
    p_values += list(abstain_p_values)
    family = len(p_values)
    every = holm(p_values, alpha)
    rejected = every[: len(candidates)]
    abstain_rejected = tuple(bool(r) for r in every[len(every) - len(abstain_p_values) :])
    passed = {s.alternative.name for s, r in zip(candidates, rejected, strict=True) if r}
    if reference is not None and every[len(every) - len(abstain_p_values) - 1]:
        passed.add(reference.alternative.name)
    gaining = [s for s in candidates if s.delta is not None and s.delta[0] > 0]
    best_seen = max(gaining, key=lambda s: s.delta[0] if s.delta else 0.0, default=None)
    survived = [s for s, r in zip(candidates, rejected, strict=True) if r and s.improves]
    qualifying = [s for s in survived if s.safe]
    if qualifying:
        best = max(qualifying, key=lambda s: s.delta[0] if s.delta else 0.0)
        return Recommendation(
            best, qualifying, "", family, best_seen, frozenset(passed), abstain_rejected
        )
    if survived:
        reason = (
            f"{len(survived)} alternative(s) improve nDCG@{k} but take another source "
            f"below {HIJACK_FLOOR:g} of its recall@{k}: "
            + ", ".join(s.alternative.name for s in survived)
        )
    elif any(s.improves for s in candidates):
        reason = (
            f"{sum(s.improves for s in candidates)} alternative(s) improve nDCG@{k} with "
            f"their own 95% CI above zero, but none survives the correction for {family} "
            f"alternatives (Holm, familywise {alpha:g} one-sided; docs/eval.md)"
        )
    else:
        reason = f"no alternative improves nDCG@{k} with a 95% CI above zero"
    return Recommendation(None, [], reason, family, best_seen, frozenset(passed), abstain_rejected)
