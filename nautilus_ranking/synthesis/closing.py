"""The step that closes a ranking, shared by the broker and the upstream synthesizer:
decide the abstain from the confidence, hold the rows back when it abstains (they
become the nearest), then fit what is handed over into the token budget. An answer
abstains before its budget: it hands nothing over, so the budget counts nothing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from nautilus_ranking.records import RankedRow
from nautilus_ranking.selection import confidence
from nautilus_ranking.synthesis.ranking_result import Merged, RankingResult
from nautilus_ranking.tracing.facts import confidence_stage
from nautilus_ranking.tracing.spans import Stages

#: Fits ``(data, ranking)`` into a token budget: what is kept, and what the budget did.
Fit = Callable[[Merged, list[RankedRow]], tuple[Merged, list[RankedRow], dict[str, Any]]]


def close_ranking(
    result: RankingResult,
    min_confidence: float | None,
    errored: int,
    fit: Fit | None = None,
    stages: Stages | None = None,
) -> RankingResult:
    """``result`` with its abstain decided (``errored``: the sources that failed), the
    rows held back as ``nearest`` when it abstains, and ``fit`` (None: no budget)
    applied to what is handed over; ``stages``: the ranking span's, when traced."""
    embedding = result.embedding
    lexical = int(embedding["rows_lexical"]) if embedding is not None else 0
    abstain = confidence.decide(result.confidence, min_confidence, errored, lexical)
    data, ranking, nearest = result.data, result.ranking, list[RankedRow]()
    if stages is not None and result.confidence is not None:
        confidence_stage(stages, len(ranking), result.confidence.value, abstain)
    if abstain is not None and abstain["abstained"]:  # no rows handed over: data empty
        nearest, ranking = list(ranking), []
        data = {sid: [] for sid in data}
    budget = None
    if fit is not None:
        data, ranking, budget = fit(data, ranking)
    return replace(
        result, data=data, ranking=ranking, abstain=abstain, nearest=nearest, budget=budget
    )
