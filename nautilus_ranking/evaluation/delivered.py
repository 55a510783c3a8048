"""What an agent is handed under a token budget, as ``eval`` scores it.

A budget (``NAUTILUS_RANKING_MAX_TOKENS``, a profile's, or ``eval --max-tokens``) keeps
the ranked rows that fit, each counted as the way in hands it over: a JSON answer
(``POST /v1/query``, ``query --json``, the retrievers) counts a row's ranking entry,
MCP the result's text line, which is shorter, so the same budget hands an MCP agent
more rows. ``eval`` scores what is delivered, so it counts rows as one of them does
(``--budget-counts``): the same rule and the same texts as
:mod:`nautilus_ranking.request.answer` applies to page 1 of the top K.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nautilus_ranking.records import RankedRow
from nautilus_ranking.selection.budget import apply_budget, entry_text

#: How ``eval`` may count a row, and what each stands for.
COUNTINGS: dict[str, str] = {
    "json": "JSON entries, as POST /v1/query and query --json hand them over",
    "mcp": "MCP result lines, as the search tool's text hands them over",
}


@dataclass(frozen=True)
class Delivery:
    """A budget and how a row is counted under it."""

    max_tokens: int
    counting: str = "json"

    @property
    def described(self) -> str:
        """The header's words: what was scored."""
        return (
            f"{self.max_tokens} tokens a query, counted as {COUNTINGS[self.counting]}; "
            "every row of the table is scored on the rows that fit"
        )

    def deliver(self, ranking: list[RankedRow], query: str, ranked: bool) -> list[RankedRow]:
        """The rows of ``ranking`` (page 1: the top K) an agent is handed."""
        text = _row_text(self.counting, query, ranked)
        data: dict[str, list[dict[str, Any]]] = {}
        return apply_budget(data, ranking, self.max_tokens, text)[1]


def _row_text(counting: str, query: str, ranked: bool) -> Callable[[RankedRow], str]:
    if counting == "mcp":
        try:
            from nautilus_ranking.mcp.results import row_text
            from nautilus_ranking.request.model import QueryRequest
        except ImportError as exc:
            raise ImportError(
                "--budget-counts mcp needs the mcp extra: pip install 'nautilus-ranking[mcp]'"
            ) from exc
        request = QueryRequest(query=query)
        return lambda r: row_text(r, request, ranked)
    return lambda r: entry_text(r, scored=ranked)
