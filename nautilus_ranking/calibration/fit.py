"""Fitting the confidence on one deployment's scored queries, and choosing its ``p``.

The queries are of two kinds: **null** (off-topic: label 0) and **judged** (label 1 when
a relevant row was in the top 10). With answerable judged queries the logistic and
isotonic map of ``selection/confidence_fitting.py`` is fitted on both kinds; without,
the probability stays the shipped fit's (the null side alone cannot fit one).

``p`` is chosen on the queries' **cross-fitted** scores (each from a fit that did not
see the query: ``FOLDS`` folds) by ``abstain_threshold.choose_p``: the least ``p`` that
abstains on at least ``null_rate`` of new off-topic queries like these (with
probability ``NULL_CONFIDENCE`` over their draw), capped by the conformal quantile for
the target false-abstain rate ``alpha``. Every ``p`` under the cap keeps a new
answerable query's false abstain at most ``k / (n + 1) <= alpha``; the lowest that
reaches the off-topic target drops the fewest answers, so the least nDCG. With too few
answerable queries for ``alpha`` (``n < 1/alpha - 1``) no ``p`` carries that
guarantee: the off-topic target alone sets ``p``, and the bound ``(c + 1) / (n + 1)``
it still carries is stated.

Every rate reported is measured on cross-fitted scores, with a Clopper-Pearson interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nautilus_ranking.selection import confidence
from nautilus_ranking.selection.abstain_threshold import (
    NULL_CONFIDENCE,
    Choice,
    abstain_rate,
    choose_p,
    clopper_pearson,
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
    chosen = choose_p(answerable, null, alpha, null_rate)
    guaranteed = chosen.conformal is not None
    if chosen.chosen_on == "answerable" and chosen.conformal is not None:
        guarantee: float | None = chosen.conformal.bound
    else:
        guarantee = null_rate if chosen.p is not None else None
    return {
        "recommended_p": chosen.p,
        "chosen_on": chosen.chosen_on,
        "alpha": alpha,
        "null_rate": null_rate,
        "null_confidence": NULL_CONFIDENCE,
        "guarantee": guarantee,
        "false_abstain_bound": _rounded(chosen.false_abstain_bound),
        "false_abstain_guaranteed": guaranteed,
        "promise": _promise(chosen, len(answerable), len(null), alpha, null_rate),
        "off_topic_abstain": _rate(null, chosen.p),
        "false_abstain": _rate(answerable, chosen.p) if answerable else None,
    }


def _promise(chosen: Choice, n: int, m: int, alpha: float, null_rate: float) -> str:
    """What ``chosen`` promises, in words, on each side."""
    sure = f"with probability {NULL_CONFIDENCE:g} over the draw of these {m}"
    if chosen.p is None:
        return (
            f"{m} off-topic queries are too few for an off-topic abstain rate of "
            f"{null_rate:g} {sure}, and no judged query sets a p: no p recommended"
        )
    if chosen.chosen_on == "null":
        off_topic = (
            f"off-topic abstain at least {null_rate:g} on new off-topic queries like these, {sure}"
        )
    elif chosen.null is None:
        off_topic = f"{m} off-topic queries are too few to promise a rate of {null_rate:g}"
    else:
        off_topic = (
            f"the off-topic target {null_rate:g} is not reached under that cap (the "
            "measured rate is below)"
        )
    if chosen.conformal is not None:
        bound = chosen.false_abstain_bound or 0.0
        cap = "" if chosen.chosen_on == "null" else ", the cap reached"
        return (
            f"false abstain at most {bound:.4f} (<= alpha {alpha:g}{cap}) on a new "
            f"answerable query exchangeable with the {n} answerable judged ones (split "
            f"conformal over cross-fitted scores); {off_topic}"
        )
    if n == 0:
        return f"no judged queries: nothing is promised about answerable queries; {off_topic}"
    bound = chosen.false_abstain_bound or 0.0
    return (
        f"{n} answerable judged queries are fewer than 1/alpha - 1 = {1 / alpha - 1:g}, so "
        f"no p carries a false-abstain guarantee at alpha {alpha:g}; p is set on the "
        f"off-topic side alone: {off_topic}; at this p a new answerable query like the "
        f"{n} judged is abstained on with probability at most {bound:.4f}"
    )


def _rounded(value: float | None) -> float | None:
    return round(value, 4) if value is not None else None


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
