"""The recommendation of ``eval --recommend``: comment lines and ``NAUTILUS_*=value``
lines that a ``.env`` file can take, with the part of a gain that is turning ranking on."""

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
    env_lines = [f"{name}={value}" for name, value in best.alternative.env]
    mean, low, high = best.delta
    out = [
        f"# recommendation: {best.alternative.name}: nDCG@{k} {mean:+.3f} "
        f"(95% CI {low:+.3f} to {high:+.3f}) over the current settings; {kept}."
    ]
    out += _attribution(result, best)
    if any(value == "" for _, value in best.alternative.env):
        out.append("# an empty value unsets the variable")
    out += env_lines
    others = [s.alternative.name for s in rec.qualifying if s is not best]
    if others:
        out.append(f"# also measured better and safe (smaller gain): {', '.join(others)}")
    return out


def _attribution(result: EvalResult, best: Scored) -> list[str]:
    """From passthrough, any knob turns ranking on: the part of a knob's gain that ranking
    on alone gives, and the knob's own (its nDCG against ranking on with no knob)."""
    on = result.ranking_on
    if on is None or on.delta is None or best.alternative.kind == "passthrough":
        return []
    knob = ", ".join(name for name, _ in best.alternative.env) or best.alternative.name
    own = bootstrap_ci(best.ndcg - on.ndcg)
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
