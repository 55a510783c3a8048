"""The shipped confidence fit: it says how it was made, and the hashing setups refit from
the shared collections reproduce it (the benchmark fits with the library's fitter)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from eval_support import DATASETS, dataset

from nautilus_ranking.selection import confidence


def _shipped() -> dict[str, Any]:
    text = resources.files("nautilus_ranking.selection").joinpath(confidence.FIT_FILE)
    document: dict[str, Any] = json.loads(text.read_text("utf-8"))
    return document


def test_the_shipped_fit_carries_its_provenance() -> None:
    provenance = _shipped()["provenance"]
    assert provenance["fitted_by"].startswith("python -m benchmarks.quality.confidence_fit")
    assert provenance["fitted_on"] == ["cranfield", "cisi", "cacm", "adi"]
    assert provenance["calibrated_on_your_sources"] is False
    assert set(provenance["held_out_ece"]["own and off-topic queries"]) == {"hashing", "onnx"}


def test_refitting_the_hashing_setups_reproduces_the_shipped_file(tmp_path: Path) -> None:
    for name in ("cranfield", "cisi", "cacm", "adi"):
        dataset(name)  # skips, saying where the collections go, when they are absent
    from benchmarks.quality.confidence_fit import collect, report

    records = collect(DATASETS, tmp_path, ["hashing"])
    _, fits, _ = report(records)
    shipped = _shipped()["setups"]
    assert sorted(fits) == ["hashing/bm25/idf-off", "hashing/bm25/idf-on"]
    for setup, fit in fits.items():
        for key in ("features", "mean", "scale", "coef", "intercept", "knots", "bounds"):
            if key == "features":
                assert fit[key] == shipped[setup][key]
            else:
                np.testing.assert_allclose(
                    np.asarray(fit[key], dtype=float),
                    np.asarray(shipped[setup][key], dtype=float),
                    rtol=1e-9,
                    atol=1e-9,
                    err_msg=f"{setup} {key}",
                )
