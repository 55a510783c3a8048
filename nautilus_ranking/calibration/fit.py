"""Fitting the confidence on one deployment's scored queries, and choosing its ``p``.

The queries are of two kinds: **null** (off-topic: label 0) and **judged** (label 1 when
a relevant row was in the top 10). What the fit can promise depends on what it has:

- With answerable judged queries, the logistic and isotonic map of
  ``selection/confidence_fitting.py`` is fitted on both kinds, and ``p`` is the conformal
  quantile for the target false-abstain rate ``alpha`` over the answerable queries'
  **cross-fitted** scores (each from a fit that did not see the query: ``FOLDS`` folds):
  a new answerable query like them is wrongly abstained on with probability at most
  ``k / (n + 1) <= alpha``.
- With too few of them for ``alpha`` (``n < 1/alpha - 1``), or none, nothing is promised
  about answerable queries: ``p`` is set for a target off-topic abstain rate on the null
  side alone (at least that rate on a new off-topic query like these), and without
  judgments the probability stays the shipped fit's (the null side alone cannot fit one).

Every rate reported is measured on cross-fitted scores, with a Clopper-Pearson interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nautilus_ranking.selection import confidence
from nautilus_ranking.selection.abstain_threshold import (
    Threshold,
    abstain_rate,
    clopper_pearson,
    conformal_threshold,
    null_threshold,
)
from nautilus_ranking.selection.confidence_fitting import features_for, fit_setup, predict
from nautilus_ranking.text.arrays import FloatArray, IntArray

#: The folds the scores behind ``p`` and the reported rates are cross-fitted over.
FOLDS = 5
#: The defaults: at most 2% of answerable queries abstained on; at least 90% of
#: off-topic ones when only the null side is known.
ALPHA = 0.02
NULL_RATE = 0.9
_SEED = 68
#: The least share of the queries one step of a local fit's isotonic map holds: finer
#: than the shipped fit's (the off-topic queries outnumber the judged ones here, and a
#: coarse step would hold most answerable queries and many off-topic ones at one value).
MIN_BLOCK = 0.02


@dataclass
class Observations:
    """Scored queries: ``x`` every signal (``Signals.vector()``, ``confidence.FEATURES``),
    ``judged`` whether each is a judged query (else null), ``label`` whether its top 10
    held a relevant row (0 for a null query)."""

    setup: str
    x: FloatArray
    judged: np.ndarray
    label: IntArray

    def columns(self, features: tuple[str, ...]) -> FloatArray:
        at = [confidence.FEATURES.index(name) for name in features]
        out: FloatArray = self.x[:, at]
        return out


@dataclass
class CalibrationFit:
    """The fit's entry (the shape ``confidence_fit.json`` stores), where its probability
    comes from (``local`` or ``shipped``), the cross-fitted probabilities of the queries,
    and the threshold with what it promises."""

    entry: dict[str, Any]
    probability_from: str
    crossfit: FloatArray
    threshold: dict[str, Any]


def fold_of(n: int, folds: int = FOLDS, seed: int = _SEED) -> IntArray:
    """Each of ``n`` queries' fold: a fixed shuffle, so a rerun picks the same ``p``."""
    order = np.random.default_rng(seed).permutation(n)
    out: IntArray = np.empty(n, dtype=np.intp)
    out[order] = np.arange(n) % folds
    return out


def fit_observations(
    seen: Observations,
    shipped: dict[str, Any] | None,
    folds: int = FOLDS,
    min_block: float = MIN_BLOCK,
) -> tuple[dict[str, Any], str, FloatArray]:
    """The entry fitted on every query, where its probability comes from, and each
    query's cross-fitted probability. Without an answerable judged query the
    probability is ``shipped``'s (None: no fit for this setup, an error)."""
    features = features_for(seen.setup)
    x = seen.columns(features)
    y = seen.label.astype(np.float64)
    if int(seen.label.sum()) == 0 or int((seen.label == 0).sum()) == 0:
        if shipped is None:
            raise ValueError(
                f"no shipped fit for the setup {seen.setup}, and no judged query with a "
                "relevant row in its top 10 to fit one: give --queries and --judgments"
            )
        return shipped, "shipped", predict(shipped, seen.columns(tuple(shipped["features"])))
    fold = fold_of(len(y), folds)
    crossfit = np.zeros(len(y))
    for f in range(folds):
        train, test = fold != f, fold == f
        if test.any() and len(set(y[train].tolist())) == 2:
            crossfit[test] = predict(fit_setup(features, x[train], y[train], min_block), x[test])
        elif test.any():  # a fold whose rest holds one label only: the full fit
            crossfit[test] = predict(fit_setup(features, x, y, min_block), x[test])
    return fit_setup(features, x, y, min_block), "local", crossfit


def choose_threshold(
    seen: Observations, crossfit: FloatArray, alpha: float, null_rate: float
) -> dict[str, Any]:
    """The recommended ``p`` from the cross-fitted probabilities, what it promises, and
    the rates it gives with their intervals (module docstring)."""
    null = crossfit[~seen.judged].tolist()
    answerable = crossfit[seen.judged & (seen.label == 1)].tolist()
    conformal = conformal_threshold(answerable, alpha) if answerable else None
    if conformal is not None:
        chosen: Threshold | None = conformal
        promise = (
            f"false abstain at most {conformal.bound:.4f} (<= alpha {alpha:g}) on a new "
            f"answerable query exchangeable with the {conformal.n} judged ones "
            "(split conformal over cross-fitted scores)"
        )
        side = "answerable"
    else:
        chosen = null_threshold(null, null_rate) if null else None
        side = "null"
        too_few = (
            f"{len(answerable)} answerable judged queries are fewer than 1/alpha - 1 = "
            f"{1 / alpha - 1:g}, so no p carries a false-abstain guarantee at alpha {alpha:g}"
            if answerable
            else "no judged queries: nothing is promised about answerable queries"
        )
        promise = (
            f"{too_few}; p is set on the off-topic side alone: off-topic abstain at least "
            f"{chosen.bound:.4f} on a new off-topic query like these {chosen.n}"
            if chosen is not None
            else f"{too_few}; and {len(null)} off-topic queries are too few for an "
            f"off-topic abstain rate of {null_rate:g}: no p recommended"
        )
    p = chosen.p if chosen is not None else None
    return {
        "recommended_p": p,
        "chosen_on": side if chosen is not None else None,
        "alpha": alpha,
        "null_rate": null_rate,
        "guarantee": chosen.bound if chosen is not None else None,
        "promise": promise,
        "off_topic_abstain": _rate(null, p),
        "false_abstain": _rate(answerable, p) if answerable else None,
    }


def _rate(scores: list[float], p: float | None) -> dict[str, Any]:
    """How many of ``scores`` abstain under ``p``, their share and its 95% interval."""
    k, n = abstain_rate(scores, p) if p is not None else (0, len(scores))
    low, high = clopper_pearson(k, n)
    return {
        "abstained": k,
        "of": n,
        "rate": round(k / n, 4) if n else None,
        "ci95": [round(low, 4), round(high, 4)],
    }


def calibrate_fit(
    seen: Observations,
    shipped: dict[str, Any] | None,
    alpha: float = ALPHA,
    null_rate: float = NULL_RATE,
    folds: int = FOLDS,
    min_block: float = MIN_BLOCK,
) -> CalibrationFit:
    """Fit ``seen`` and choose its ``p`` (the module docstring)."""
    entry, source, crossfit = fit_observations(seen, shipped, folds, min_block)
    threshold = choose_threshold(seen, crossfit, alpha, null_rate)
    return CalibrationFit(
        {**entry, "recommended_p": threshold["recommended_p"]}, source, crossfit, threshold
    )
