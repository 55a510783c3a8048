"""Fitting the confidence: a logistic score turned into a probability by an isotonic map.

One function, :func:`fit_setup`, makes one scoring setup's entry of a fit file (the
shape :func:`nautilus_ranking.selection.confidence.parse_fits` reads) from the signals
of ranked queries and whether each held a relevant row in its top 10. The shipped fit
(``python -m benchmarks.quality.confidence_fit``) and ``nautilus-ranking calibrate``
both fit with it, so a local fit is the shipped one's method on the operator's data.

The parts are plain numpy so a test can hold each against a brute-force reference:
an L2-penalised logistic regression by Newton's method on standardised features, and
pool-adjacent-violators for the isotonic map, its thinnest blocks pooled so no end of
the map is read from a handful of queries. :func:`ece` is the expected calibration
error the reports quote.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nautilus_ranking.selection import confidence
from nautilus_ranking.text.arrays import FloatArray

#: The L2 penalty on the standardised coefficients (the intercept is not penalised).
L2 = 1.0
#: The least share of the queries one step of the isotonic map is read from.
MIN_BLOCK = 0.1
#: The signals each embedder's fits read (of ``confidence.FEATURES``): with a model, its
#: cosine and the lexical cosine beside it; with words only, BM25 and the batch's shape.
#: Left out: the margin and the agreement (fitted with negative weights, an artefact of
#: three sources of 30 rows that a batch of another shape would extrapolate).
FEATURES_OF: dict[str, tuple[str, ...]] = {
    "onnx": ("top_similarity", "top_lexical"),
    "hashing": ("top_similarity", "similarity_z", "query_words"),
}
#: The features of an embedder not named above (another model: a cosine like onnx's).
MODEL_FEATURES = FEATURES_OF["onnx"]


def features_for(setup: str) -> tuple[str, ...]:
    """The features a fit of ``setup`` (``embedder/lexical/idf-…``) reads."""
    return FEATURES_OF.get(setup.split("/")[0], MODEL_FEATURES)


def fit_logistic(x: FloatArray, y: FloatArray, l2: float = L2) -> dict[str, Any]:
    """Standardised features, an L2-penalised logistic regression by Newton's method:
    ``mean``, ``scale``, ``coef`` (on the standardised features) and ``intercept``."""
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale = np.where(scale > 1e-12, scale, 1.0)
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], l2)
    penalty[-1] = 0.0  # the intercept is not penalised
    for _ in range(100):
        p = 1 / (1 + np.exp(-np.clip(z @ w, -50, 50)))
        gradient = z.T @ (p - y) + penalty * w
        hessian = (z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if float(np.abs(step).max()) < 1e-10:
            break
    return {
        "mean": mean.tolist(),
        "scale": scale.tolist(),
        "coef": w[:-1].tolist(),
        "intercept": float(w[-1]),
    }


def logistic_score(fit: dict[str, Any], x: FloatArray) -> FloatArray:
    """The fit's linear score (before the isotonic map) of each row of ``x``."""
    mean, scale = np.asarray(fit["mean"]), np.asarray(fit["scale"])
    out: FloatArray = ((x - mean) / scale) @ np.asarray(fit["coef"]) + float(fit["intercept"])
    return out


def isotonic(
    z: FloatArray, y: FloatArray, min_share: float = 0.0
) -> tuple[list[float], list[float]]:
    """Pool-adjacent-violators: the non-decreasing map from score to the share of label
    1, as knots at each block's middle score; a block holding less than ``min_share``
    of the queries is pooled with its neighbour nearer in share (an end of the map
    read from a few queries would be read as certainty)."""
    order = np.argsort(z, kind="stable")
    blocks: list[list[float]] = []  # [mean label, weight, first score, last score]
    for zi, yi in zip(z[order].tolist(), y[order].tolist(), strict=True):
        blocks.append([yi, 1.0, zi, zi])
        while len(blocks) > 1 and blocks[-2][0] >= blocks[-1][0]:
            _pool(blocks, len(blocks) - 2)
    least = min_share * len(z)
    while len(blocks) > 1 and min(b[1] for b in blocks) < least:
        i = min(range(len(blocks)), key=lambda k: blocks[k][1])
        j = i - 1 if i == len(blocks) - 1 else i + 1
        if 0 < i < len(blocks) - 1 and abs(blocks[i - 1][0] - blocks[i][0]) < abs(
            blocks[i + 1][0] - blocks[i][0]
        ):
            j = i - 1
        _pool(blocks, min(i, j))
    return [round((b[2] + b[3]) / 2, 6) for b in blocks], [round(b[0], 6) for b in blocks]


def _pool(blocks: list[list[float]], i: int) -> None:
    """Merge block ``i + 1`` into block ``i``."""
    a, b = blocks[i], blocks.pop(i + 1)
    a[0] = (a[0] * a[1] + b[0] * b[1]) / (a[1] + b[1])
    a[1] += b[1]
    a[3] = b[3]


def fit_setup(
    features: tuple[str, ...], x: FloatArray, y: FloatArray, min_block: float = MIN_BLOCK
) -> dict[str, Any]:
    """One setup's fit as a fit file stores it: ``x`` holds ``features`` (as
    ``Signals.vector`` reads them) of each query, ``y`` whether it held a relevant row."""
    fit = fit_logistic(x, y)
    return {
        "features": list(features),
        **fit,
        "knots": list(isotonic(logistic_score(fit, x), y, min_block)),
        "bounds": [x.min(axis=0).tolist(), x.max(axis=0).tolist()],
    }


def predict(fit: dict[str, Any], x: FloatArray) -> FloatArray:
    """The probability a stored fit gives each row of ``x``, as the ranking reads it
    (rounded as ``confidence.estimate`` rounds)."""
    parsed = confidence.parse_fits({"setups": {"fit": fit}})["fit"]
    return np.array([round(parsed.probability(row), 4) for row in x], dtype=np.float64)


def ece(p: FloatArray, y: FloatArray, bins: int = 10) -> float:
    """Expected calibration error over ``bins`` equal-width bins."""
    which = np.minimum((p * bins).astype(int), bins - 1)
    total = 0.0
    for b in range(bins):
        at = which == b
        if at.any():
            total += at.sum() / len(p) * abs(float(p[at].mean()) - float(y[at].mean()))
    return total


def ece_interval(
    p: FloatArray, y: FloatArray, resamples: int = 1000, seed: int = 59
) -> tuple[float, float]:
    """A 95% bootstrap interval of :func:`ece` over the queries (fixed seed)."""
    rng = np.random.default_rng(seed)
    values = [
        ece(p[at], y[at]) for at in (rng.integers(0, len(p), len(p)) for _ in range(resamples))
    ]
    low, high = np.percentile(values, [2.5, 97.5])
    return float(low), float(high)
