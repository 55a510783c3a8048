"""``calibrate --report``: the calibration as one static HTML page (:mod:`nautilus_ranking.report`).

The page has what the terminal report has — what was run, what the fit was made for
and its provenance, the recommended ``p``, what it promises and the rates it gives —
and two charts, both from the cross-fitted probabilities (each query's from a fit that
did not see it, the ones ``p`` is chosen on): the reliability of the confidence against
the labels, and the abstain trade-off over a grid of ``p`` with the recommended one
marked.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from nautilus_ranking.calibration.fit import CalibrationFit, Observations
from nautilus_ranking.report import (
    Section,
    Table,
    Written,
    abstain_tradeoff,
    reliability_diagram,
    write_report,
)
from nautilus_ranking.selection.abstain_threshold import abstain_rate, clopper_pearson

#: The thresholds the trade-off is measured at (and the recommended one).
GRID = (0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)


def write_calibration_report(
    document: dict[str, Any], seen: Observations, fitted: CalibrationFit, path: Path
) -> Written:
    """Write the calibration's page at ``path`` (and its charts' PNGs beside it)."""
    made = document["made_for"]
    sections = [
        Section(
            "The run",
            [
                f"Calibrated {made['setup']} on {made['sources_file']} "
                f"(config hash {made['config_hash']}).",
            ],
            [
                Table(["made for", "value"], _pairs(made)),
                Table(["provenance", "value"], _pairs(document["provenance"])),
            ],
        ),
        _threshold_section(document["threshold"]),
        _reliability_section(seen, fitted),
        _tradeoff_section(seen, fitted),
    ]
    return write_report(path, f"nautilus-ranking calibrate: {made['setup']}", sections)


def _pairs(mapping: dict[str, Any]) -> list[list[str]]:
    return [[key, "-" if value is None else str(value)] for key, value in mapping.items()]


def _threshold_section(chosen: dict[str, Any]) -> Section:
    p = chosen["recommended_p"]
    answerable = "answerable" if chosen["false_abstain_guaranteed"] else "answerable (no guarantee)"
    side = {"answerable": "false-abstain cap", "null": "off-topic target"}.get(
        chosen["chosen_on"], "-"
    )
    rows = []
    for name, key in (("off-topic", "off_topic_abstain"), (answerable, "false_abstain")):
        rate = chosen[key]
        if rate is not None:
            shown = f"{rate['rate']:.4f}" if rate["rate"] is not None else "-"
            low, high = rate["ci95"]
            rows.append(
                [name, str(rate["abstained"]), str(rate["of"]), shown, f"[{low:.4f}, {high:.4f}]"]
            )
    return Section(
        "The threshold (NAUTILUS_RANKING_MIN_CONFIDENCE)",
        [
            f"Recommended p: {p if p is not None else 'none'} (set by the {side}; "
            f"alpha {chosen['alpha']:g}, null rate {chosen['null_rate']:g} held with "
            f"probability {chosen['null_confidence']:g}).",
            f"Promise: {chosen['promise']}.",
        ],
        [
            Table(
                ["at p (cross-fitted)", "abstained", "of", "rate", "95% CI (Clopper-Pearson)"],
                rows,
            )
        ],
    )


def _reliability_section(seen: Observations, fitted: CalibrationFit) -> Section:
    labels = [bool(label) for label in seen.label.tolist()]
    note = (
        "Each query's cross-fitted confidence against whether a relevant row was in its "
        "top 10 (an off-topic query never has one)."
    )
    if not seen.judged.any():
        note += " Without judged queries every label is 0: the chart shows the off-topic side."
    chart = partial(
        reliability_diagram,
        fitted.crossfit.tolist(),
        labels,
        title="reliability: cross-fitted confidence against a relevant row in the top 10",
    )
    return Section("The reliability of the confidence", [note], charts=[chart])


def _tradeoff_section(seen: Observations, fitted: CalibrationFit) -> Section:
    null = fitted.crossfit[~seen.judged].tolist()
    answerable = fitted.crossfit[seen.judged & (seen.label == 1)].tolist()
    chosen = fitted.threshold["recommended_p"]
    grid = sorted({*GRID, *([chosen] if chosen is not None else [])})
    off_topic = [_measured(null, p) for p in grid]
    false = [_measured(answerable, p) for p in grid] if answerable else None
    rows = [
        [
            f"{p:g}" + (" (recommended)" if p == chosen else ""),
            off[0],
            off[1],
            *(false[i][:2] if false is not None else ("-", "-")),
        ]
        for i, (p, off) in enumerate(zip(grid, off_topic, strict=True))
    ]
    chart = partial(
        abstain_tradeoff,
        grid,
        [off[2] for off in off_topic] if null else None,
        [f[2] for f in false] if false is not None else None,
        chosen,
        title="abstain: off-topic against false abstain, by p (cross-fitted)"
        if answerable and null
        else "abstain: the off-topic abstain rate by p (cross-fitted; no answerable query)",
    )
    return Section(
        "The abstain trade-off",
        [
            f"Each p measured on the cross-fitted confidence: the off-topic abstain rate over "
            f"the {len(null)} off-topic queries and the false abstain over the "
            f"{len(answerable)} answerable judged queries (95% Clopper-Pearson intervals)."
            + ("" if answerable else " Without answerable judged queries: the off-topic side.")
        ],
        [Table(["p", "off-topic abstain", "95% CI", "false abstain", "95% CI"], rows)],
        [chart] if null or answerable else [],
    )


def _measured(scores: list[float], p: float) -> tuple[str, str, float]:
    """``k/n (rate)``, its interval, and the rate, of ``scores`` abstaining under ``p``."""
    k, n = abstain_rate(scores, p)
    low, high = clopper_pearson(k, n)
    rate = k / n if n else 0.0
    return f"{k}/{n} ({rate:.4f})", f"[{low:.4f}, {high:.4f}]", rate
