"""The proposal: at most one step on the boost ladder per source, and by default none.

A source moves one level up when agents used its rows clearly more than their places
predict (its ratio's Holm-corrected p at most ``alpha`` and the ratio at least
``1 + min_effect``), one level down when clearly less (at most ``1 / (1 + min_effect)``).
One step only: the logs were made under the current levels, so they say which way a
source is off, not how far; the next proposal, from logs made under the new level, says
whether to go on. The ladder is ``BOOST_LEVELS``' with no boost in its middle.
"""

from __future__ import annotations

from dataclasses import dataclass

from nautilus_ranking.proposal.usefulness import MIN_SHARED, SourceUsefulness
from nautilus_ranking.settings.boost_entries import VALID_LEVELS

#: The ladder, lowest first; ``None`` is no boost.
LADDER: tuple[str | None, ...] = (*VALID_LEVELS[:3], None, *VALID_LEVELS[3:])
#: Familywise error rate across the sources (two-sided).
ALPHA = 0.05
#: The smallest change of the use ratio worth a step: 5% more or fewer uses than the
#: source's positions predict. In the simulation (benchmarks/quality/feedback_proposal.py)
#: a source two steps off moved its ratio by 8-20%; 15% missed most planted boosts.
MIN_EFFECT = 0.05


@dataclass(frozen=True)
class Step:
    """One source's proposal: ``current`` → ``proposed`` (equal: no change) and why."""

    source: str
    current: str | None
    proposed: str | None
    reason: str

    @property
    def changes(self) -> bool:
        return self.current != self.proposed


def level_name(level: str | None) -> str:
    return "none" if level is None else level


def propose_step(
    row: SourceUsefulness,
    current: str | None,
    alpha: float = ALPHA,
    min_effect: float = MIN_EFFECT,
) -> Step:
    """The step ``row``'s evidence supports from ``current``."""
    if current not in LADDER:
        return Step(row.source, current, current, f"level {current!r} is not on the ladder")
    if not row.enough and row.shared < MIN_SHARED:
        why = f"not enough evidence: {row.shared:.0%} of its rows at positions others share"
        return Step(row.source, current, current, why)
    if not row.enough:
        return Step(row.source, current, current, "not enough evidence")
    assert row.p_holm is not None  # every source with enough evidence is tested
    if row.p_holm > alpha:
        why = f"no clear difference (Holm p {row.p_holm:.3g} > {alpha:g})"
        return Step(row.source, current, current, why)
    if 1 / (1 + min_effect) < row.ratio < 1 + min_effect:
        return Step(
            row.source,
            current,
            current,
            f"ratio {row.ratio:.2f} within the smallest change worth a step (±{min_effect:.0%})",
        )
    here = LADDER.index(current)
    there = here + (1 if row.ratio > 1 else -1)
    if not 0 <= there < len(LADDER):
        return Step(row.source, current, current, "already at the end of the ladder")
    way = "more" if row.ratio > 1 else "less"
    return Step(
        row.source,
        current,
        LADDER[there],
        f"its rows were used {way} than their positions predict",
    )


def boosts_line(levels: dict[str, str | None], order: list[str]) -> str:
    """``NAUTILUS_SOURCE_BOOSTS=a:high,b:-low``: the sources with a level, in ``order``."""
    entries = [f"{s}:{levels[s]}" for s in order if levels.get(s) is not None]
    entries += [f"{s}:{v}" for s, v in sorted(levels.items()) if s not in order and v is not None]
    return "NAUTILUS_SOURCE_BOOSTS=" + ",".join(entries)


@dataclass(frozen=True)
class Record:
    """One source's proposal record, with the evidence and the checks behind it."""

    step: Step
    evidence: SourceUsefulness
    replay_gain: float | None = None  # the step alone, replayed (None: no change)
    eval_delta: tuple[float, float, float] | None = None  # nDCG@k mean, 95% CI
    eval_safe: bool | None = None  # the hijack check (None: not run)
    eval_note: str = ""

    @property
    def replay_passes(self) -> bool:
        return self.replay_gain is not None and self.replay_gain >= 0

    @property
    def eval_passes(self) -> bool:
        """Judgments decide: not worse on them, and no other source hijacked."""
        return self.eval_delta is not None and self.eval_delta[0] >= 0 and bool(self.eval_safe)
