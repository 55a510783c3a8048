"""An operator's report: one static HTML page that works offline, with charts.

The page (:mod:`.page`) holds its CSS and every chart (a PNG as a ``data:`` URI)
inline, so it opens from a laptop, a ticket or an air-gapped host and fetches nothing;
each chart is also written as a PNG beside it. The charts (:mod:`.charts`) take plain
arrays, so ``eval`` and a calibration alike draw them, and need the ``report`` extra
(matplotlib); without it the page has its tables and names the extra.
"""

from __future__ import annotations

from nautilus_ranking.report.charts import (
    REPORT_EXTRA,
    Chart,
    ChartsUnavailable,
    abstain_tradeoff,
    charts_available,
    first_relevant_positions,
    reliability_bins,
    reliability_diagram,
    values_with_intervals,
)
from nautilus_ranking.report.page import Section, Table, Written, unwritable, write_report

__all__ = [
    "REPORT_EXTRA",
    "Chart",
    "ChartsUnavailable",
    "Section",
    "Table",
    "Written",
    "abstain_tradeoff",
    "charts_available",
    "first_relevant_positions",
    "reliability_bins",
    "reliability_diagram",
    "unwritable",
    "values_with_intervals",
    "write_report",
]
