"""The position-based model (PBM) of what agents use: ``P(use) = θ[profile, position] ×
γ[source]``, fitted by expectation-maximisation (Chuklin, Markov and de Rijke, *Click
Models for Web Search*, 2015, ch. 4).

Why a free θ per position: an agent's attention over a list is not top-down. Language
models read the start and the end of a long context best ("lost in the middle", Liu et
al., 2023), so the use rate can rise again at the bottom of a list. A cascade, or any
curve forced to fall, reads the uses at the bottom as rows more useful than their
place, and proposes boosting whatever sits there. θ here is one free number per
position, so a U shape is fitted as it is.

Why γ per source and not per row: a log rarely shows one row at several positions for
one query, so a row's own attractiveness and its position's cannot be told apart; a
source's rows do appear at every position, so a source's can. θ then also carries how
useful the rows the ranking puts at a position are on average: what "the uses its
positions predict" means.

The fit works on counts, ``shown[b, profile, position, source]`` and ``used[...]``,
for ``B`` weightings of the impressions at once (the bootstrap's resamples), so one
vectorised EM fits every resample.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: EM stops when no use rate θγ moved more than this, or after MAX_ITERATIONS (θ and γ
#: alone drift along the scale they share, which no data pin down).
TOLERANCE = 1e-8
MAX_ITERATIONS = 2000
_EPS = 1e-12


@dataclass(frozen=True)
class PbmFit:
    """θ (``[..., profile, position]``) and γ (``[..., source]``), for each weighting.

    The product θγ is what the data determine (θ·c and γ/c fit equally well)."""

    theta: FloatArray
    gamma: FloatArray
    iterations: int


def fit_pbm(
    shown: FloatArray,
    used: FloatArray,
    start: PbmFit | None = None,
    tolerance: float = TOLERANCE,
) -> PbmFit:
    """The maximum-likelihood θ and γ for counts shaped ``[B, profile, position, source]``.

    E-step: a shown row that was not used was either not examined or not attractive;
    with ``e = θγ`` its posterior of examination is ``θ(1-γ)/(1-e)`` and of
    attractiveness ``γ(1-θ)/(1-e)``; a used row was both. M-step: θ is the expected
    examinations over the impressions at its position, γ the expected attractions over
    its source's impressions."""
    n = np.asarray(shown, dtype=np.float64)
    c = np.minimum(np.asarray(used, dtype=np.float64), n)
    if start is None:
        theta = np.full(n.shape[:3], 0.5)
        gamma = np.full((n.shape[0], n.shape[3]), 0.5)
    else:
        theta = np.broadcast_to(start.theta, n.shape[:3]).copy()
        gamma = np.broadcast_to(start.gamma, (n.shape[0], n.shape[3])).copy()
    at_position = n.sum(axis=3)
    of_source = n.sum(axis=(1, 2))
    not_used = n - c
    iterations = 0
    for iterations in range(1, MAX_ITERATIONS + 1):  # noqa: B007 - reported in the fit
        t = np.clip(theta[..., None], _EPS, 1 - _EPS)
        g = np.clip(gamma[:, None, None, :], _EPS, 1 - _EPS)
        missed = 1 - t * g
        examined = c + not_used * t * (1 - g) / missed
        attractive = c + not_used * g * (1 - t) / missed
        new_theta = np.where(
            at_position > 0, examined.sum(axis=3) / np.maximum(at_position, _EPS), theta
        )
        new_gamma = np.where(
            of_source > 0, attractive.sum(axis=(1, 2)) / np.maximum(of_source, _EPS), gamma
        )
        rate = new_theta[..., None] * new_gamma[:, None, None, :]
        moved = float(np.abs(rate - t * g).max())  # θγ: what the data determine
        theta, gamma = new_theta, new_gamma
        if moved < tolerance:
            break
    return PbmFit(theta, gamma, iterations)


def log_likelihood(
    shown: FloatArray, used: FloatArray, theta: FloatArray, gamma: FloatArray
) -> float:
    """The Bernoulli log-likelihood of one weighting's counts (``[profile, position,
    source]``) under θ (``[profile, position]``) and γ (``[source]``)."""
    p = np.clip(theta[..., None] * gamma[None, None, :], _EPS, 1 - _EPS)
    return float((used * np.log(p) + (shown - used) * np.log(1 - p)).sum())


def reference_gamma(gamma: FloatArray, present: npt.NDArray[np.bool_]) -> FloatArray:
    """The attractiveness a typical source has: the median γ of the sources shown
    (``[B]``). A median, not a mean, so one source with a bias does not move the bar
    every other source is measured against."""
    masked = np.where(present[None, :], gamma, np.nan)
    out: FloatArray = np.nanmedian(masked, axis=1)
    return out
