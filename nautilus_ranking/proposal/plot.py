"""``feedback propose --plot``: the position curve and each source's ratio with its
interval. A PNG through matplotlib when it is installed and the file ends in ``.png``;
otherwise one self-contained HTML page with inline SVG drawn here (no script, no
network), so the plot never needs an extra."""

from __future__ import annotations

import html
import importlib.util
from pathlib import Path

from nautilus_ranking.proposal.propose import Proposal
from nautilus_ranking.proposal.report import profile_label

_W, _H, _PAD = 520, 260, 40


def write_plot(proposal: Proposal, path: Path) -> Path:
    """Draw to ``path`` (a ``.png`` needs matplotlib: without it, ``path`` with
    ``.html``). Returns the file written."""
    if path.suffix.lower() == ".png" and importlib.util.find_spec("matplotlib") is not None:
        _png(proposal, path)
        return path
    out = path.with_suffix(".html")
    out.write_text(_html(proposal), encoding="utf-8")
    return out


def _png(proposal: Proposal, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    u = proposal.usefulness
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for i, profile in enumerate(u.impressions.profiles):
        xs = range(1, u.curve.shape[1] + 1)
        left.plot(xs, u.curve[i], marker="o", label=profile_label(profile))
    left.set(xlabel="position", ylabel="use rate (typical source)", title="Position curve")
    left.legend()
    rows = u.sources
    ys = range(len(rows))
    right.errorbar(
        [r.ratio for r in rows],
        ys,
        xerr=[[r.ratio - r.low for r in rows], [r.high - r.ratio for r in rows]],
        fmt="o",
    )
    right.axvline(1.0, color="grey", linestyle="--")
    right.set_yticks(list(ys), [r.source for r in rows])
    right.set(xlabel="uses / uses its positions predict (95% CI)", title="Usefulness by source")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _html(proposal: Proposal) -> str:
    return (
        "<!doctype html><meta charset='utf-8'><title>feedback proposal</title>"
        "<body style='font-family:sans-serif'>"
        f"<h2>Position curve</h2>{_curve_svg(proposal)}"
        f"<h2>Usefulness by source</h2>{_ratios_svg(proposal)}"
        f"<p>config hash {html.escape(proposal.config_hash)}, {proposal.answers} answers</p>"
        "</body>"
    )


def _curve_svg(proposal: Proposal) -> str:
    u = proposal.usefulness
    n = u.curve.shape[1]
    top = float(u.curve.max()) or 1.0
    parts = [_frame()]
    colours = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd")
    for i, profile in enumerate(u.impressions.profiles):
        points = " ".join(
            f"{_PAD + (_W - 2 * _PAD) * k / max(n - 1, 1):.1f},"
            f"{_H - _PAD - (_H - 2 * _PAD) * float(v) / top:.1f}"
            for k, v in enumerate(u.curve[i])
        )
        colour = colours[i % len(colours)]
        parts.append(
            f"<polyline fill='none' stroke='{colour}' stroke-width='2' points='{points}'/>"
        )
        parts.append(
            f"<text x='{_W - _PAD}' y='{20 + 14 * i}' fill='{colour}' text-anchor='end'>"
            f"{html.escape(profile_label(profile))}</text>"
        )
    parts.append(f"<text x='{_PAD}' y='{_H - 8}'>position 1</text>")
    parts.append(f"<text x='{_W - _PAD}' y='{_H - 8}' text-anchor='end'>{n}</text>")
    return _svg(parts)


def _ratios_svg(proposal: Proposal) -> str:
    rows = proposal.usefulness.sources
    high = max([2.0, *(r.high for r in rows)])
    scale = (_W - 2 * _PAD - 100) / high
    height = max(_H, 2 * _PAD + 20 + 24 * len(rows))
    parts = [_frame(height)]
    x1 = _PAD + 100 + scale
    parts.append(f"<line x1='{x1}' x2='{x1}' y1='{_PAD}' y2='{height - _PAD}' stroke='grey'/>")
    for i, r in enumerate(rows):
        y = _PAD + 20 + 24 * i
        lo, hi, mid = (_PAD + 100 + scale * v for v in (r.low, r.high, r.ratio))
        parts.append(f"<text x='{_PAD}' y='{y + 4}'>{html.escape(r.source)}</text>")
        parts.append(f"<line x1='{lo:.1f}' x2='{hi:.1f}' y1='{y}' y2='{y}' stroke='black'/>")
        parts.append(f"<circle cx='{mid:.1f}' cy='{y}' r='4'/>")
    parts.append(f"<text x='{x1}' y='{height - 8}' text-anchor='middle'>1</text>")
    return _svg(parts, height)


def _frame(height: int = _H) -> str:
    return f"<rect x='0' y='0' width='{_W}' height='{height}' fill='white' stroke='#ccc'/>"


def _svg(parts: list[str], height: int = _H) -> str:
    body = "".join(parts)
    return f"<svg xmlns='http://www.w3.org/2000/svg' width='{_W}' height='{height}'>{body}</svg>"
