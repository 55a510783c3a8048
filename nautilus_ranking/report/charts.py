"""The report's charts, each drawn from plain arrays into PNG bytes.

matplotlib is the ``report`` extra's; it is imported when a chart is drawn, never at
import, so a plain install imports this module and :func:`charts_available` says
whether charts can be drawn. Every chart is drawn on the Agg backend (no display) at a
fixed size and resolution, and its PNG carries no software tag: the same arrays give
the same bytes.
"""

from __future__ import annotations

import importlib
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nautilus_ranking.errors import NautilusError

#: What installs the charts (the page names it when they are missing).
REPORT_EXTRA = "pip install 'nautilus-ranking[report]'"
_DPI = 100
_SIZE = (6.4, 4.0)


class ChartsUnavailable(NautilusError, ImportError):
    """matplotlib is not installed: the report has its tables and no charts."""


@dataclass(frozen=True)
class Chart:
    """One drawn chart: ``name`` is its file name's part (``reliability``)."""

    name: str
    title: str
    png: bytes


def charts_available() -> bool:
    """Whether matplotlib (the ``report`` extra) is installed."""
    try:
        importlib.import_module("matplotlib")
    except ImportError:
        return False
    return True


def _pyplot() -> Any:
    try:
        matplotlib: Any = importlib.import_module("matplotlib")
    except ImportError as exc:
        raise ChartsUnavailable(f"the report's charts need matplotlib: {REPORT_EXTRA}") from exc
    matplotlib.use("Agg")
    return importlib.import_module("matplotlib.pyplot")


def _png(plt: Any, fig: Any) -> bytes:
    buffer = io.BytesIO()
    try:
        fig.tight_layout()
        fig.savefig(buffer, format="png", dpi=_DPI, metadata={"Software": None})
    finally:
        plt.close(fig)
    return buffer.getvalue()


def reliability_bins(
    predicted: Sequence[float], observed: Sequence[bool | float], bins: int = 10
) -> list[tuple[float, float, int]]:
    """(mean predicted, observed rate, count) of each non-empty equal-width bin of
    ``predicted`` over [0, 1]: what a reliability diagram plots."""
    p = np.clip(np.asarray(predicted, dtype=np.float64), 0.0, 1.0)
    o = np.asarray(observed, dtype=np.float64)
    at = np.minimum((p * bins).astype(int), bins - 1)
    out = []
    for b in range(bins):
        inside = at == b
        if inside.any():
            out.append((float(p[inside].mean()), float(o[inside].mean()), int(inside.sum())))
    return out


def reliability_diagram(
    predicted: Sequence[float],
    observed: Sequence[bool | float],
    bins: int = 10,
    title: str = "reliability: predicted confidence against what happened",
) -> Chart:
    """Binned predicted probability against the observed rate, the diagonal for a
    calibrated one, each bin's count beside its point."""
    plt = _pyplot()
    fig, axis = plt.subplots(figsize=_SIZE)
    axis.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="calibrated")
    points = reliability_bins(predicted, observed, bins)
    if points:
        xs, ys, _ = zip(*points, strict=True)
        axis.plot(xs, ys, marker="o", label="observed")
        for x, y, n in points:
            axis.annotate(str(n), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    axis.set(xlim=(0, 1), ylim=(0, 1), xlabel="predicted (mean of the bin)", ylabel="observed")
    axis.set_title(title, fontsize=10)
    axis.grid(alpha=0.3)
    axis.legend(loc="upper left")
    return Chart("reliability", title, _png(plt, fig))


def abstain_tradeoff(
    thresholds: Sequence[float],
    off_topic: Sequence[float] | None,
    false_abstain: Sequence[float] | None,
    chosen: float | None = None,
    title: str = "abstain: off-topic against false abstain, by threshold",
) -> Chart:
    """Each threshold's false-abstain rate (x) against its off-topic abstain rate (y),
    labelled by threshold, the chosen one marked; with one of the two rates only (no
    off-topic queries, or no judged ones), that rate against the threshold."""
    plt = _pyplot()
    fig, axis = plt.subplots(figsize=_SIZE)
    ps = list(thresholds)
    if off_topic is not None and false_abstain is None:
        _rate_by_threshold(axis, ps, off_topic, chosen, "off-topic abstain (null queries)")
    elif off_topic is not None and false_abstain is not None:
        axis.plot(false_abstain, off_topic, marker="o")
        for p, x, y in zip(ps, false_abstain, off_topic, strict=True):
            axis.annotate(f"{p:g}", (x, y), textcoords="offset points", xytext=(4, -10), fontsize=8)
        if chosen is not None and chosen in ps:
            at = ps.index(chosen)
            axis.scatter(
                [false_abstain[at]],
                [off_topic[at]],
                s=160,
                facecolors="none",
                edgecolors="red",
                linewidths=2,
                label=f"chosen: {chosen:g}",
                zorder=3,
            )
            axis.legend(loc="lower right")
        axis.set(xlabel="false abstain (judged queries)", ylabel="off-topic abstain")
        axis.set_ylim(-0.02, 1.02)
    elif false_abstain is not None:
        _rate_by_threshold(axis, ps, false_abstain, chosen, "false abstain (judged queries)")
    axis.set_xlim(left=-0.02)
    axis.set_title(title, fontsize=10)
    axis.grid(alpha=0.3)
    return Chart("abstain", title, _png(plt, fig))


def _rate_by_threshold(
    axis: Any, ps: list[float], rates: Sequence[float], chosen: float | None, label: str
) -> None:
    """One rate against the threshold, the chosen threshold marked."""
    axis.plot(ps, rates, marker="o")
    if chosen is not None and chosen in ps:
        axis.axvline(chosen, color="red", linewidth=1.5, label=f"chosen: {chosen:g}")
        axis.legend(loc="lower right")
    axis.set(xlabel="min_confidence", ylabel=label)


def values_with_intervals(
    names: Sequence[str],
    values: Sequence[float],
    lows: Sequence[float],
    highs: Sequence[float],
    baseline: float | None = None,
    label: str = "nDCG@10",
    title: str = "nDCG@10 per setting, with 95% intervals",
    name: str = "ndcg",
) -> Chart:
    """One horizontal bar per setting with its interval (the best at the top), and the
    baseline as a line."""
    plt = _pyplot()
    height = max(_SIZE[1], 0.28 * len(names) + 1.0)
    fig, axis = plt.subplots(figsize=(_SIZE[0] + 1.0, height))
    ys = np.arange(len(names))[::-1]
    value = np.asarray(values, dtype=np.float64)
    errors = [value - np.asarray(lows, dtype=np.float64), np.asarray(highs) - value]
    axis.barh(ys, value, xerr=np.clip(errors, 0.0, None), color="#4c78a8", capsize=2)
    axis.set_yticks(ys, list(names), fontsize=8)
    if baseline is not None:
        axis.axvline(baseline, color="grey", linestyle="--", linewidth=1, label="current")
        axis.legend(loc="lower right")
    axis.set_xlabel(label)
    axis.set_title(title, fontsize=10)
    axis.grid(alpha=0.3, axis="x")
    return Chart(name, title, _png(plt, fig))


def first_relevant_positions(
    series: Mapping[str, Sequence[int | None]],
    k: int = 10,
    title: str = "where the first relevant row is",
) -> Chart:
    """Per setting, how many queries have their first relevant row at each place 1..k,
    and below k or nowhere (``None`` or a place past k)."""
    plt = _pyplot()
    fig, axis = plt.subplots(figsize=_SIZE)
    places = np.arange(1, k + 2)
    width = 0.8 / max(len(series), 1)
    for i, (label, positions) in enumerate(series.items()):
        counts = np.zeros(k + 1)
        for place in positions:
            counts[(place - 1) if place is not None and place <= k else k] += 1
        axis.bar(places + (i - (len(series) - 1) / 2) * width, counts, width, label=label)
    axis.set_xticks(places, [str(p) for p in range(1, k + 1)] + [f">{k}"])
    axis.set(xlabel="place of the first relevant row", ylabel="queries")
    axis.set_title(title, fontsize=10)
    axis.grid(alpha=0.3, axis="y")
    axis.legend()
    return Chart("first-relevant", title, _png(plt, fig))
