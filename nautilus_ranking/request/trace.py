"""What the request span and the ranking span say about one request (``request/answer.py``).

Only numbers, settings and names an operator chose: never the query (its length only,
unless ``NAUTILUS_TRACE_QUERY_TEXT=true``), a row, a cursor or a boost a caller typed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from nautilus_ranking.tracing.facts import rows_in_part
from nautilus_ranking.tracing.spans import PREFIX, RequestTrace, request_trace, tracer

if TYPE_CHECKING:
    from nautilus_ranking.records import BrokerResponse, RankedRow
    from nautilus_ranking.request.model import QueryRequest
    from nautilus_ranking.selection.budget import BudgetResult


class Answered(Protocol):
    """What the request span reads of an answer (``request.answer.Answer``)."""

    @property
    def ranked(self) -> bool: ...
    @property
    def synthesizer(self) -> str: ...

    response: BrokerResponse
    broker_request_id: str
    next_cursor: str | None
    profile: str | None


def trace_request(request: QueryRequest, request_id: str | None) -> RequestTrace | None:
    """The request's span, current until :meth:`RequestTrace.close`; None (and nothing
    built) when tracing is off."""
    if tracer() is None:
        return None
    return request_trace(request_attributes(request, request_id), request.query)


def request_attributes(request: QueryRequest, request_id: str | None) -> dict[str, Any]:
    """The request span's attributes known before it runs (None values are left out)."""
    return {
        f"{PREFIX}request.id": request_id,
        f"{PREFIX}query.chars": len(request.query),
        f"{PREFIX}request.top_k": request.override("top_k"),
        f"{PREFIX}request.page": request.page,
        f"{PREFIX}request.cursor": request.cursor is not None or None,
        f"{PREFIX}request.max_tokens": request.override("max_tokens"),
        f"{PREFIX}request.explain": request.explain,
    }


def rows_of(response: BrokerResponse) -> int:
    return sum(len(rows) for rows in response.data.values())


def page_stage(
    traced: RequestTrace,
    page: dict[str, Any],
    whole: BrokerResponse,
    cut: BrokerResponse,
    window: int | None = None,
) -> None:
    """The page's stage: the rows of its window (``window`` under a budget, which cuts the
    page and its fit together; the budget stage says what of it fits)."""
    rows_out = rows_of(cut) if window is None else window
    traced.stages.add(
        "page", rows_of(whole), rows_out, number=page.get("number"), size=page.get("size")
    )


def budget_stage(
    traced: RequestTrace, fitted: BudgetResult, rows_in: int, kept: Sequence[RankedRow]
) -> None:
    traced.stages.add(
        "budget",
        rows_in,
        len(fitted.kept),
        max_tokens=fitted.max_tokens,
        tokens_used=fitted.tokens_used,
        rows_left_out=fitted.left_out,
        first_row_over_budget=fitted.over_budget_first,
        tokenizer=fitted.tokenizer,
        rows_in_part=rows_in_part(kept) or None,
    )


def finish_request(traced: RequestTrace, result: Answered) -> None:
    """Write the ranking span (its last stage is done) and the request's outcome."""
    traced.ranking_done(result.ranked)
    response = result.response
    traced.finish(
        {
            f"{PREFIX}broker_request_id": result.broker_request_id,
            f"{PREFIX}synthesizer": result.synthesizer,
            # the ranking profile that ranked it: an operator's name, never a caller's text
            # (a name no profile has is refused before anything runs)
            f"{PREFIX}profile": result.profile,
            f"{PREFIX}ranked": result.ranked,
            f"{PREFIX}sources.queried": len(response.sources_queried),
            f"{PREFIX}sources.errored": sorted(e.source_id for e in response.sources_errored),
            f"{PREFIX}response.rows": rows_of(response),
            f"{PREFIX}response.has_next_page": result.next_cursor is not None,
        }
    )
