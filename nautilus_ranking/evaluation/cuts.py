"""``nautilus-ranking eval --sweep``'s relevance-cut table: each ``NAUTILUS_RANKING_CUT`` setting
on the same rows, so an operator can choose one on their own judgments.

The ranking is the current settings' without a cut (ranking on with its defaults when
the current settings pass rows through: a cut turns ranking on); each setting is
applied to it as the ranker applies it, to the top K. Per setting, the mean per query
of the rows handed over, of the irrelevant ones among them (no judgment of grade >= 1,
or no id), recall@k and nDCG@k. The off row is the baseline every setting is read
against; docs/tuning-selection.md has what the shared collections showed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from nautilus_ranking.embedders import Embedder
from nautilus_ranking.evaluation.metrics import DEFAULT_K, ndcg_at, recall_at, relevant
from nautilus_ranking.evaluation.sweep import Fetched, FloatArray, row_id
from nautilus_ranking.selection.cut import CUT_SETTINGS, RelevanceCut, parse_cut, relevance_cut
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.synthesis.ranking import RankingSynthesizer


@dataclass
class CutScored:
    """One cut setting's per-query values."""

    setting: str  # "off" or METHOD:VALUE, as NAUTILUS_RANKING_CUT takes it
    current: bool  # the setting the current settings deploy
    handed: FloatArray  # rows handed over
    irrelevant: FloatArray  # of those, not judged relevant
    recall: FloatArray
    ndcg: FloatArray


def cut_settings(current: str | None) -> list[RelevanceCut | None]:
    """Off, the documented settings, and the current one when it is none of them."""
    cuts: list[RelevanceCut | None] = [None]
    for setting in (*CUT_SETTINGS[1:], current):
        cut = parse_cut("NAUTILUS_RANKING_CUT", setting)[0]
        if cut is not None and cut not in cuts:
            cuts.append(cut)
    return cuts


def score_cuts(
    settings: NautilusSettings,
    embedder: Embedder,
    runs: Sequence[Fetched],
    id_field: str,
    k: int = DEFAULT_K,
    step: Callable[[], None] | None = None,
) -> list[CutScored]:
    """Every setting of :func:`cut_settings` on one ranking per query (see the module)."""
    ranker = RankingSynthesizer.from_settings(
        # (no embedding deadline: eval measures the ranking, every row embedded)
        settings.model_copy(update={"ranking_cut": None, "embedder_deadline_ms": 0}),
        embedder=embedder,
    )
    cuts = cut_settings(settings.ranking_cut)
    shape = (len(cuts), len(runs))
    handed, irrelevant, recall, ndcg = (np.zeros(shape) for _ in range(4))
    for q, run in enumerate(runs):
        ranked = ranker.rank(run.results, run.context())
        ids = [row_id(r.row, id_field) for r in ranked]
        wanted = relevant(run.grades)
        for c, cut in enumerate(cuts):
            kept = ids[: relevance_cut(ranked, cut)]
            handed[c, q] = len(kept)
            irrelevant[c, q] = sum(1 for doc in kept if doc is None or doc not in wanted)
            recall[c, q] = recall_at(kept, run.grades, k)
            ndcg[c, q] = ndcg_at(kept, run.grades, k)
        if step is not None:
            step()
    now = parse_cut("NAUTILUS_RANKING_CUT", settings.ranking_cut)[0]
    return [
        CutScored(
            str(cut) if cut is not None else "off",
            cut == now,
            handed[c],
            irrelevant[c],
            recall[c],
            ndcg[c],
        )
        for c, cut in enumerate(cuts)
    ]
