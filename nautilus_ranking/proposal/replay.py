"""The replay: the logged lists re-scored from their logged components under other
levels, and the uses they would get.

Re-scoring follows the boost stage (``synthesis/ranking_boost.py``, ``stage2_bumps``):
a row's score is its score without the bump (``score - boost_bump``: relevance, and
recency where a decay is set) plus the new level's bump, ``bump × spread ×
rank_decay(place)`` for a boost and ``bump × spread`` for a demotion, 0 for a row with
no relevance. ``place`` is the row's place among its source's rows by relevance. The
batch's relevance ``spread`` is read back from a row the current levels bumped (exact
for a demotion, through its place for a boost); when nothing was bumped it is
re-measured from the shown rows' relevance, which is the batch's when the list reaches
the spread's depth (15) and an approximation below it.

What it cannot see: rows the answer did not hand over stay out, so a promotion's
replay counts only the rows it reorders among those shown. The uses are estimated
under the fitted position model: a used row moved from position ``k`` to ``k'`` counts
``θ[k'] / θ[k]`` uses (inverse propensity weighting), so a row nobody used adds none
wherever it goes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from nautilus_ranking.proposal.logs import REPLAY_COMPONENTS, Answer, Shown
from nautilus_ranking.proposal.position_model import FloatArray
from nautilus_ranking.synthesis.ranking_boost import (
    MAX_SPREAD,
    rank_decay,
    relevance_spread,
    weights_for,
)


@dataclass(frozen=True)
class Replay:
    """The uses the logged answers got, and those estimated under other levels."""

    uses: float
    estimated: float
    replayed: int  # answers re-scored
    not_replayable: int  # answers without the components to re-score (kept as logged)

    @property
    def gain(self) -> float:
        """The relative change of uses (0 with none logged)."""
        return self.estimated / self.uses - 1 if self.uses else 0.0


def _bump(level: str | None) -> float:
    return weights_for(level).bump if level is not None else 0.0


def _places(shown: Sequence[Shown]) -> list[int]:
    """Each row's 1-based place among its source's shown rows by relevance."""
    return [
        1
        + sum(
            1
            for o in shown
            if o.source == s.source and o.components["relevance"] > s.components["relevance"]
        )
        for s in shown
    ]


def answer_spread(shown: Sequence[Shown], levels: Mapping[str, str | None]) -> float:
    """The relevance spread the answer's boosts were measured in (see the module)."""
    places = _places(shown)
    exact, through_place = [], []
    for row, place in zip(shown, places, strict=True):
        bump, share = row.components["boost_bump"], _bump(levels.get(row.source))
        if bump == 0 or share == 0 or row.components["relevance"] <= 0:
            continue
        if share < 0:  # a demotion is undecayed: bump = share x spread
            exact.append(bump / share)
        else:
            through_place.append(bump / (share * float(rank_decay(float(place)))))
    if exact or through_place:
        return min(float(np.median(exact or through_place)), MAX_SPREAD)
    relevance = np.array([s.components["relevance"] for s in shown], dtype=np.float64)
    return relevance_spread(relevance, np.arange(len(shown)))


def reorder(answer: Answer, levels: Mapping[str, str | None]) -> list[int] | None:
    """The answer's positions in their order under ``levels`` (None: not replayable)."""
    shown = answer.shown
    if any(any(k not in s.components for k in REPLAY_COMPONENTS) for s in shown):
        return None
    current: dict[str, str | None] = dict(answer.levels)
    spread = answer_spread(shown, current)
    places = _places(shown)
    scores = []
    for row, place in zip(shown, places, strict=True):
        share = _bump(levels.get(row.source))
        if row.components["relevance"] <= 0 or share == 0:
            bump = 0.0
        else:
            bump = share * spread * (float(rank_decay(float(place))) if share > 0 else 1.0)
        scores.append(row.components["score"] - row.components["boost_bump"] + bump)
    order = sorted(range(len(shown)), key=lambda i: (-scores[i], shown[i].position))
    return [shown[i].position for i in order]


def replay(
    answers: Sequence[Answer],
    change: Mapping[str, str | None],
    curve: FloatArray,
    profiles: Sequence[str | None],
) -> Replay:
    """The uses the answers would get with ``change`` applied over their own levels;
    ``curve[profile, position - 1]`` is the fitted use rate by position."""
    profile_index = {p: i for i, p in enumerate(profiles)}
    deepest = curve.shape[1]
    uses = estimated = 0.0
    replayed = skipped = 0
    for answer in answers:
        logged = float(len(answer.used))
        uses += logged
        levels: dict[str, str | None] = {**answer.levels, **change}
        order = reorder(answer, levels) if answer.used else None
        if order is None:
            estimated += logged
            skipped += bool(answer.used)
            continue
        replayed += 1
        theta = curve[profile_index[answer.profile]]
        for new, old in enumerate(order, start=1):
            if old in answer.used:
                was = theta[min(old, deepest) - 1]
                estimated += float(theta[min(new, deepest) - 1] / was) if was > 0 else 1.0
    return Replay(uses, estimated, replayed, skipped)
