"""The recommendation of ``eval --recommend``: comment lines and ``NAUTILUS_*=value``
lines that a ``.env`` file can take, with the part of a gain that is turning ranking on.

Which alternative is recommended, and why, is :mod:`.familywise`'s. With fewer judged
queries than it asks for (:data:`~.familywise.ENOUGH_QUERIES`), the ``NAUTILUS_*`` lines
are printed commented out, with the reason and how many more queries the gain seen needs,
so a script piping the output into a manifest never takes them blindly.

From passthrough, every knob turns ranking on, so a knob's gain includes ranking on's.
When the knob's own part (its nDCG against ranking on with no knob) has a 95% interval
that reaches 0, the knob is unproven and the lines recommend turning ranking on instead,
with ``NAUTILUS_RANKING_TOP_K`` at the evaluated depth: it ranks exactly as the
measured "ranking on" did for nDCG@k (a top K trims, it does not reorder).

With ``--profile NAME`` the lines are that profile's variables
(``NAUTILUS_PROFILES__NAME__…``): a change measured against the profile's knobs is
deployed in the profile. A knob that is one per process (the embedder) cannot be: then
every line is a comment, after one that says why.
"""

from __future__ import annotations

import re

import numpy as np

from nautilus_ranking.evaluation.evaluate import EvalResult
from nautilus_ranking.evaluation.familywise import ENOUGH_QUERIES, queries_needed
from nautilus_ranking.evaluation.sweep import Scored, bootstrap_ci
from nautilus_ranking.profiles.read import PREFIX
from nautilus_ranking.settings.knobs import KNOBS

_ASSIGNMENT = re.compile(r"^(# )?NAUTILUS_\w+=")


def recommendation_lines(result: EvalResult) -> list[str]:
    """Comment lines and ``NAUTILUS_*=value`` lines: a fragment a ``.env`` file can take
    (every line a comment below the documented minimum of judged queries)."""
    lines = _lines(result)
    if result.profile is not None:
        lines = as_profile_lines(lines, result.profile)
    rec = result.recommendation
    evaluated = result.coverage.evaluated
    if rec is None or rec.best is None or evaluated >= ENOUGH_QUERIES:
        return lines
    gain = _line_gain(result, rec.best)
    needed = max(ENOUGH_QUERIES, queries_needed(gain, rec.family) or 0)
    out = [line if line.startswith("#") else f"# {line}" for line in lines]
    power = (
        f": what a gain like this one (+{gain.mean():.3f}) needs to pass the correction "
        f"again with 80% power"
        if needed > ENOUGH_QUERIES
        else ""
    )
    out.insert(
        1,
        f"# not for pasting yet: {evaluated} judged queries, fewer than the "
        f"{ENOUGH_QUERIES} docs/eval.md asks for before a setting is deployed (the gain "
        f"passed the correction, on too few queries to rely on); about "
        f"{needed - evaluated} more judged queries ({needed} in all{power}; docs/eval.md).",
    )
    return out


def as_profile_lines(lines: list[str], profile: str) -> list[str]:
    """``lines`` with each ``NAUTILUS_*=value`` line (commented out or not) written as
    ``profile``'s variable. When one of them is a knob no profile may set (the
    embedder), the measured change cannot be deployed in the profile: every line is
    then a comment, after one saying why."""
    per_profile = {k.variable for k in KNOBS if k.per_profile}
    out: list[str] = []
    blocked: list[str] = []
    for line in lines:
        comment = "# " if line.startswith("# NAUTILUS_") else ""
        name, sep, value = line.removeprefix(comment).partition("=")
        if not sep or not name.startswith("NAUTILUS_") or " " in name:
            out.append(line)
        elif name in per_profile:
            knob = name.removeprefix("NAUTILUS_")
            out.append(f"{comment}{PREFIX}{profile.upper()}__{knob}={value}")
        else:
            blocked.append(name)
            out.append(f"# {name}={value}")
    if not blocked:
        return out
    first = next(i for i, line in enumerate(out) if _ASSIGNMENT.match(line))
    why = (
        f"# not for profile {profile}: {', '.join(blocked)} is one per process, not per "
        "profile (it would change every profile's ranking), and the lines below measured "
        "only together"
    )
    return [*out[:first], why, *(f"# {x}" if x.startswith("NAUTILUS_") else x for x in out[first:])]


def _line_gain(result: EvalResult, best: Scored) -> np.ndarray:
    """The per-query gain over the current settings of what the lines deploy: turning
    ranking on when the knob is unproven, else the knob."""
    current = result.scored[0]
    if _unproven(result, best) and result.reference is not None:
        return result.reference.ndcg - current.ndcg
    return best.ndcg - current.ndcg


def _unseen_gain(result: EvalResult) -> list[str]:
    """With nothing recommended: how many judged queries the largest gain seen would need."""
    rec = result.recommendation
    seen = rec.best_seen if rec is not None else None
    if rec is None or seen is None or seen.delta is None:
        return []
    needed = queries_needed(seen.ndcg - result.scored[0].ndcg, rec.family)
    if needed is None or needed <= result.coverage.evaluated:
        return []
    return [
        f"# the largest gain seen, {seen.alternative.name} ({seen.delta[0]:+.3f}), would "
        f"need about {needed} judged queries to clear the correction for {rec.family} "
        f"alternatives with 80% power (docs/eval.md)."
    ]


def _lines(result: EvalResult) -> list[str]:
    rec = result.recommendation
    if rec is None:
        return []
    return [*_ranking_lines(result), *_abstain_lines(result)]


def _abstain_lines(result: EvalResult) -> list[str]:
    """The abstain threshold chosen under the same correction (:mod:`.abstain`), or why
    none is; nothing without unanswerable queries to weigh it against."""
    table = result.abstain
    if table is None or not table.tested:
        return []
    best = table.recommended
    if best is None or best.p is None:
        return [f"# abstain: keep NAUTILUS_RANKING_MIN_CONFIDENCE as it is — {table.reason}."]
    off = best.off_topic_rate
    rate, _, high = best.false_rate
    line = f"NAUTILUS_RANKING_MIN_CONFIDENCE={best.p:g}"
    return [
        f"# abstain: min_confidence {best.p:g} abstains on {best.off_topic_abstains} of "
        f"{best.unanswerable} unanswerable queries"
        + (f" (95% CI {off[1]:.0%} to {off[2]:.0%})" if off is not None else "")
        + f", falsely on {best.false_abstains} of {best.judged} judged ({rate:.1%}, at most "
        f"{high:.1%}), nDCG@{result.k} lost {best.lost[0]:.3f}: its false abstain is within "
        f"{table.target:.0%} under Holm's correction.",
        *([] if best.current else [line]),
    ]


def _ranking_lines(result: EvalResult) -> list[str]:
    rec = result.recommendation
    if rec is None:
        return []
    k = result.k
    best = rec.best
    if best is None or best.delta is None:
        return [
            f"# recommendation: keep the current settings — {rec.reason}.",
            *_unseen_gain(result),
        ]
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
        f"(95% CI {low:+.3f} to {high:+.3f}) over the current settings, p {best.p_value:.4f}: "
        f"passes Holm's correction for {rec.family} alternatives"
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
    out += _reload(result, best)
    if best.alternative.kind == "as_of":
        out.append(
            "# as_of is a request's, not a NAUTILUS_* setting: rank these queries without "
            "the time their judgments hold at (no line to paste)"
        )
    out += [f"{name}={value}" for name, value in best.alternative.env]
    also = [s.alternative.name for s in others if not _unproven(result, s)]
    if also:
        out.append(f"# also measured better and safe (smaller gain): {', '.join(also)}")
    return out


def _reload(result: EvalResult, best: Scored) -> list[str]:
    """What an embedder's change needs first where vectors are stored: eval re-ran only
    the ranking, and a table's vectors are never compared with another model's."""
    settings = best.alternative.settings
    if best.alternative.kind != "embedder" or settings is None or not result.stored_vectors:
        return []
    if settings.vector_embedder == result.stored_by:
        return []
    config = f" --config {result.config}" if result.config else ""
    return [
        f"# first reload {', '.join(result.stored_vectors)} with the new embedder set "
        f"(their stored vectors were made by {result.stored_by}; until then every request "
        f"fails with VectorModelMismatchError): nautilus-ranking load --replace{config}"
    ]


def _knob(best: Scored) -> str:
    """The variables the alternative changes (a scorer's or an embedder's own, not the
    top K added to turn ranking on from passthrough)."""
    env = best.alternative.env
    if best.alternative.kind in ("lexical", "embedder"):
        env = env[:1]
    return ", ".join(name for name, _ in env) or best.alternative.name


def _own(result: EvalResult, entry: Scored) -> tuple[float, float, float] | None:
    """The knob's own part: its nDCG against ranking on with no knob (None when the
    current settings rank already, or the entry is passthrough)."""
    on = _ranking_on(result)
    if on is None or on.delta is None or entry.alternative.kind == "passthrough":
        return None
    return bootstrap_ci(entry.ndcg - on.ndcg)


def _ranking_on(result: EvalResult) -> Scored | None:
    """From passthrough, the reference: what turning ranking on alone gives."""
    return None if result.ranking_enabled else result.reference


def _unproven(result: EvalResult, entry: Scored) -> bool:
    """Whether the entry's own part (beyond turning ranking on) has a CI reaching 0."""
    own = _own(result, entry)
    return own is not None and own[1] <= 0.0


def _attribution(result: EvalResult, best: Scored) -> list[str]:
    """From passthrough, any knob turns ranking on: the part of a knob's gain that ranking
    on alone gives, and the knob's own (its nDCG against ranking on with no knob)."""
    on = _ranking_on(result)
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
