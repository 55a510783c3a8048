"""The synthesizer protocol: per-source results in, ``{source_id: rows}`` and a ranking out.

What the broker, the CLI, the service and ``nautilus-ranking eval`` use of a synthesizer is
declared here, so none of them asks which class it is: ``merge_ranked`` (the merged
rows, their ranking and what the pass found, one declared ``RankingResult``,
``synthesis/ranking_result.py``), ``ranking_enabled`` (whether rows are scored, which a
response reports), ``embedder`` (the one it scores with, which per-request
variants reuse; None when it embeds nothing) and ``max_candidates`` (the most rows it
scores, which a server lowers to its ceiling; None: no cap) and ``ranker_values`` (the
knobs it ranks under, for settings that describe it).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from nautilus_ranking.records import AdapterResult, RankedRow
from nautilus_ranking.synthesis.ranking_result import Merged, RankingResult

if TYPE_CHECKING:
    from nautilus_ranking.embedders import Embedder

__all__ = ["Merged", "RankingResult", "Synthesizer", "passthrough_ranking"]


@runtime_checkable
class Synthesizer(Protocol):
    @property
    def ranking_enabled(self) -> bool: ...

    @property
    def embedder(self) -> Embedder | None: ...

    #: The most rows a ranking scores (None: no cap; a server lowers it to its ceiling).
    max_candidates: int | None

    def ranker_values(self) -> Mapping[str, Any]:
        """The knobs it ranks under that a settings object can state, by ranker
        argument (empty: a passthrough); what an engine built around a broker without
        settings describes it by."""
        ...

    def merge(
        self, results: list[AdapterResult], context: Mapping[str, Any] | None = None
    ) -> Merged: ...

    def merge_ranked(
        self,
        results: list[AdapterResult],
        context: Mapping[str, Any] | None = None,
    ) -> RankingResult: ...


def passthrough_ranking(results: list[AdapterResult], data: Merged) -> list[RankedRow]:
    """The merged rows in order, unscored, each at its position in its source's own
    answer (``AdapterResult.source_ranks``: rows after a dropped one keep their place);
    a synthesizer that did not keep a source's rows as given numbers them in ``data``."""
    given: dict[str, tuple[list[dict[str, Any]], list[int]]] = {}
    for result in results:
        if result.error is None:
            rows, ranks = given.setdefault(result.source_id, ([], []))
            start = ranks[-1] if ranks else 0  # a source id twice: its ranks continue
            ranks.extend(
                start + rank for rank in (result.source_ranks or range(1, len(result.rows) + 1))
            )
            rows.extend(result.rows)
    ranking: list[RankedRow] = []
    for sid, rows in data.items():
        kept, ranks = given.get(sid, ([], []))
        as_given = len(kept) == len(rows) and all(map(operator.is_, kept, rows))
        for i, row in enumerate(rows):
            ranking.append(
                RankedRow(sid, row, 0.0, len(ranking) + 1, ranks[i] if as_given else i + 1)
            )
    return ranking
