"""The recommendation of ``eval --recommend``: comment lines and ``NAUTILUS_*=value``
lines that a ``.env`` file can take, with the part of a gain that is turning ranking on.

From passthrough, every knob turns ranking on, so a knob's gain includes ranking on's.
When the knob's own part (its nDCG against ranking on with no knob) has a 95% interval
that reaches 0, the knob is unproven and the lines recommend turning ranking on instead,
with ``NAUTILUS_RANKING_TOP_K`` at the evaluated depth: it ranks exactly as the
measured "ranking on" did for nDCG@k (a top K trims, it does not reorder).
"""

from __future__ import annotations

from nautilus_ranking.evaluation.evaluate import EvalResult
from nautilus_ranking.evaluation.sweep import Scored, bootstrap_ci


def recommendation_lines(result: EvalResult) -> list[str]:
    """Comment lines and ``NAUTILUS_*=value`` lines: a fragment a ``.env`` file can take."""
    rec = result.recommendation
    if rec is None:
        return []
    k = result.k
    best = rec.best
    if best is None or best.delta is None:
        return [f"# recommendation: keep the current settings — {rec.reason}."]
    worst = best.worst_kept
    if best.alternative.kind != "boost":
        kept = "not a boost, so no hijack check"
    elif worst is not None:
        kept = (
            f"every other source keeps >= {worst[1]:.2f} of its recall@{k} ({worst[0]} the least)"
        )
    else:
        kept = "no other source had relevant rows in the top to lose"
    mean, low, high = best.delta
    measured = (
        f"{best.alternative.name}: nDCG@{k} {mean:+.3f} "
        f"(95% CI {low:+.3f} to {high:+.3f}) over the current settings"
    )
    others = [s for s in rec.qualifying if s is not best]
    if _unproven(result, best):
        knob = _knob(best)
        name = best.alternative.name
        out = [
            f"# recommendation: turn ranking on, with NAUTILUS_RANKING_TOP_K={k} (any "
            f"NAUTILUS_RANKING_* knob or a boost turns it on; a top K of {k} changes "
            f"nothing else nDCG@{k} sees).",
            f"# {name} ({knob}) is unproven: its nDCG@{k} {mean:+.3f} (95% CI {low:+.3f} "
            f"to {high:+.3f}) over the current settings is turning ranking on's; its own "
            f"part's 95% CI reaches 0.",
            *_attribution(result, best),
            f"NAUTILUS_RANKING_TOP_K={k}",
        ]
        proven = [s.alternative.name for s in others if not _unproven(result, s)]
        if proven:
            out.append(f"# also measured better than ranking on alone: {', '.join(proven)}")
        return out
    out = [f"# recommendation: {measured}; {kept}."]
    out += _attribution(result, best)
    if any(value == "" for _, value in best.alternative.env):
        out.append("# an empty value unsets the variable")
    out += [f"{name}={value}" for name, value in best.alternative.env]
    also = [s.alternative.name for s in others if not _unproven(result, s)]
    if also:
        out.append(f"# also measured better and safe (smaller gain): {', '.join(also)}")
    return out


def _knob(best: Scored) -> str:
    return ", ".join(name for name, _ in best.alternative.env) or best.alternative.name


def _own(result: EvalResult, entry: Scored) -> tuple[float, float, float] | None:
    """The knob's own part: its nDCG against ranking on with no knob (None when the
    current settings rank already, or the entry is passthrough)."""
    on = result.ranking_on
    if on is None or on.delta is None or entry.alternative.kind == "passthrough":
        return None
    return bootstrap_ci(entry.ndcg - on.ndcg)


def _unproven(result: EvalResult, entry: Scored) -> bool:
    """Whether the entry's own part (beyond turning ranking on) has a CI reaching 0."""
    own = _own(result, entry)
    return own is not None and own[1] <= 0.0


def _attribution(result: EvalResult, best: Scored) -> list[str]:
    """From passthrough, any knob turns ranking on: the part of a knob's gain that ranking
    on alone gives, and the knob's own (its nDCG against ranking on with no knob)."""
    on = result.ranking_on
    own = _own(result, best)
    if on is None or on.delta is None or own is None:
        return []
    knob = _knob(best)
    verdict = (
        "the gain is turning ranking on, not this knob"
        if own[1] <= 0.0
        else f"{knob} adds to turning ranking on"
    )
    return [
        f"# of it, turning ranking on (any NAUTILUS_RANKING_* knob or a boost does) "
        f"gives {on.delta[0]:+.3f} (95% CI {on.delta[1]:+.3f} to {on.delta[2]:+.3f}), "
        f"{knob} itself {own[0]:+.3f} (95% CI {own[1]:+.3f} to {own[2]:+.3f}): {verdict}."
    ]
