"""``calibrate``'s parts without the broker: the shipped off-topic queries, an operator's
file, and the fit and threshold on scored queries."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import numpy as np
import pytest

from nautilus_ranking.calibration.fit import Observations, calibrate_fit, fold_of
from nautilus_ranking.calibration.null_queries import (
    SHIPPED,
    NullQueriesError,
    read_null_queries,
    shipped_null_queries,
)
from nautilus_ranking.selection import confidence
from nautilus_ranking.selection.confidence_fitting import predict

ROOT = Path(__file__).resolve().parents[2]


def test_several_hundred_off_topic_queries_ship_from_many_domains() -> None:
    queries = shipped_null_queries()
    assert len(queries) >= 300 and len(set(queries)) == len(queries)
    text = (ROOT / "nautilus_ranking" / "calibration" / SHIPPED).read_text(encoding="utf-8")
    domains = [line for line in text.splitlines() if line.startswith("# ") and len(line) < 60]
    assert len(domains) >= 30
    assert "Apache-2.0" in text  # licensed with the package
    package = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    data = package["tool"]["setuptools"]["package-data"]["nautilus_ranking"]
    assert f"calibration/{SHIPPED}" in data


def test_an_operators_file_is_read_line_by_line(tmp_path: Path) -> None:
    mine = tmp_path / "mine.txt"
    mine.write_text("# comment\n\n  how to knit socks  \nhow to knit socks\nbest tea\n")
    assert read_null_queries(mine) == ["how to knit socks", "best tea"]
    with pytest.raises(NullQueriesError, match="no such file"):
        read_null_queries(tmp_path / "gone.txt")
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe bad")
    with pytest.raises(NullQueriesError, match="UTF-8"):
        read_null_queries(tmp_path / "bad.txt")


def _observations(n_null: int, n_judged: int, seed: int = 1, overlap: bool = False) -> Observations:
    """Hashing-like signals: answerable queries score higher on top_similarity (by
    less, with ``overlap``)."""
    rng = np.random.default_rng(seed)
    judged = np.array([False] * n_null + [True] * n_judged)
    label = np.array([0] * n_null + [int(rng.random() < 0.9) for _ in range(n_judged)])
    x = np.zeros((len(label), len(confidence.FEATURES)))
    high = rng.normal(22, 10, len(label)) if overlap else rng.normal(50, 8, len(label))
    x[:, 0] = np.where(label == 1, high, rng.normal(15, 6, len(label)))
    x[:, 1] = rng.normal(2.5, 0.7, len(label))
    x[:, 6] = np.log1p(rng.integers(2, 9, len(label)))
    return Observations("hashing/bm25/idf-off", x, judged, label)


def _reference_p(fitted_crossfit: np.ndarray, seen: Observations, alpha: float) -> float:
    """The least grid p abstaining on 90% of new off-topic queries with probability 0.95
    (the j-th smallest null score, the least j with P(Binomial(m, 0.9) <= j - 1) >= 0.95),
    never above the k-th smallest answerable score, k = floor(alpha (n + 1))."""
    null = np.sort(fitted_crossfit[~seen.judged])
    answerable = np.sort(fitted_crossfit[seen.judged & (seen.label == 1)])
    m = len(null)
    j = next(
        j
        for j in range(1, m + 1)
        if sum(math.comb(m, i) * 0.9**i * 0.1 ** (m - i) for i in range(j)) >= 0.95
    )
    null_p = round(math.floor(null[j - 1] * 10_000 + 1e-6) / 10_000 + 0.0001, 4)
    k = math.floor(alpha * (len(answerable) + 1))
    return min(null_p, float(answerable[k - 1]))


def test_with_enough_judged_queries_p_reaches_the_off_topic_rate_under_the_cap() -> None:
    seen = _observations(300, 200)
    fitted = calibrate_fit(seen, None, alpha=0.05)
    answerable = np.sort(fitted.crossfit[seen.judged & (seen.label == 1)])
    n = len(answerable)
    k = math.floor(0.05 * (n + 1))
    chosen = fitted.threshold
    assert fitted.probability_from == "local"
    # well apart, the off-topic target is reached below the false-abstain quantile
    assert chosen["chosen_on"] == "null" and chosen["recommended_p"] < answerable[k - 1]
    assert chosen["recommended_p"] == _reference_p(fitted.crossfit, seen, 0.05)
    assert chosen["false_abstain_guaranteed"] and chosen["guarantee"] == 0.9
    below = int((answerable < chosen["recommended_p"]).sum())
    assert chosen["false_abstain_bound"] == pytest.approx((below + 1) / (n + 1), abs=1e-4)
    assert chosen["false_abstain_bound"] <= 0.05
    assert "false abstain at most" in chosen["promise"]
    assert "off-topic abstain at least 0.9" in chosen["promise"]
    assert fitted.entry["recommended_p"] == chosen["recommended_p"]
    # the cross-fitted scores are not the full fit's: each query came from a fit without it
    full = predict(fitted.entry, seen.columns(tuple(fitted.entry["features"])))
    assert not np.array_equal(full, fitted.crossfit)


def test_where_the_sides_overlap_the_false_abstain_quantile_caps_p() -> None:
    seen = _observations(300, 200, overlap=True)
    fitted = calibrate_fit(seen, None, alpha=0.05)
    answerable = np.sort(fitted.crossfit[seen.judged & (seen.label == 1)])
    n = len(answerable)
    k = math.floor(0.05 * (n + 1))
    chosen = fitted.threshold
    assert chosen["chosen_on"] == "answerable"
    assert chosen["recommended_p"] == answerable[k - 1]
    assert chosen["recommended_p"] == _reference_p(fitted.crossfit, seen, 0.05)
    assert chosen["guarantee"] == pytest.approx(k / (n + 1))
    assert chosen["false_abstain"]["abstained"] <= k - 1  # strictly below the k-th smallest
    assert "the off-topic target 0.9 is not reached" in chosen["promise"]
    assert chosen["off_topic_abstain"]["rate"] < 0.9


def test_with_too_few_answerable_queries_the_bound_left_is_stated() -> None:
    seen = _observations(300, 30)
    fitted = calibrate_fit(seen, None, alpha=0.02)
    answerable = fitted.crossfit[seen.judged & (seen.label == 1)]
    chosen = fitted.threshold
    assert chosen["chosen_on"] == "null" and not chosen["false_abstain_guaranteed"]
    below = int((answerable < chosen["recommended_p"]).sum())
    bound = (below + 1) / (len(answerable) + 1)
    assert chosen["false_abstain_bound"] == pytest.approx(bound, abs=1e-4) and bound > 0.02
    assert f"probability at most {bound:.4f}" in chosen["promise"]
    assert "no p carries a false-abstain guarantee at alpha 0.02" in chosen["promise"]


def test_without_judgments_p_is_set_on_the_null_side_with_the_shipped_probability() -> None:
    seen = _observations(200, 0)
    shipped = {
        "features": ["top_similarity"],
        "mean": [20.0],
        "scale": [5.0],
        "coef": [1.0],
        "intercept": 0.0,
        "knots": [[-2.0, 2.0], [0.05, 0.6]],
        "bounds": [[0.0], [100.0]],
    }
    fitted = calibrate_fit(seen, shipped, null_rate=0.9)
    chosen = fitted.threshold
    assert fitted.probability_from == "shipped" and chosen["chosen_on"] == "null"
    assert chosen["false_abstain"] is None
    assert "nothing is promised about answerable queries" in chosen["promise"]
    assert chosen["off_topic_abstain"]["rate"] >= 0.9
    with pytest.raises(ValueError, match="give --queries and --judgments"):
        calibrate_fit(seen, None)


def test_the_folds_are_fixed_and_balanced() -> None:
    folds = fold_of(23)
    assert np.array_equal(folds, fold_of(23))
    assert sorted(np.bincount(folds).tolist()) == [4, 4, 5, 5, 5]
