"""Passthrough: what the broker does when no ranking knob is set."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nautilus_ranking.records import AdapterResult
from nautilus_ranking.synthesis.base import passthrough_ranking
from nautilus_ranking.synthesis.ranking_result import RankingResult


class BasicSynthesizer:
    """``{source_id: rows}`` in routing order, errored results skipped, fresh lists."""

    ranking_enabled = False
    embedder = None
    max_candidates: int | None = None  # (a passthrough scores nothing: never capped)

    def ranker_values(self) -> Mapping[str, Any]:
        """No knob: a passthrough ranks under none."""
        return {}

    def merge(
        self, results: list[AdapterResult], context: Mapping[str, Any] | None = None
    ) -> dict[str, list[dict[str, Any]]]:
        merged: dict[str, list[dict[str, Any]]] = {}
        for result in results:
            if result.error is not None:
                continue
            rows = result.rows if isinstance(result.rows, list) else []  # None: no rows
            merged.setdefault(result.source_id, []).extend(rows)
        return merged

    def merge_ranked(
        self,
        results: list[AdapterResult],
        context: Mapping[str, Any] | None = None,
    ) -> RankingResult:
        """The merged rows, and their ranking: in order, unscored (nothing else found)."""
        data = self.merge(results, context)
        # a subclass's own ``merge`` may change the rows: only the stock one keeps them
        unchanged = type(self).merge is BasicSynthesizer.merge
        return RankingResult(data, passthrough_ranking(results, data), rows_unchanged=unchanged)
