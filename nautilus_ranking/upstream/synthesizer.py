"""``BrokerSynthesizer``: the broker's ``Synthesizer`` protocol, ranked by ours.

The Nautilus broker (nautilus-rkm 0.3) calls ``merge(results) -> {source_id: rows}``
on its own ``AdapterResult``s (``source_id``, ``rows``, ``error``, ...). This class
answers it with :class:`~nautilus_ranking.synthesis.ranking.RankingSynthesizer`:

- every knob unset (no ranker): the broker's own synthesizer answers, untouched, so
  ``data``, its hashes and its attestation are what the stock broker gives;
- otherwise the query is the request's intent (:mod:`.request_scope`), the sources'
  kinds come from the broker (:mod:`.source_kinds`), the rows are read through views
  (:mod:`.row_views`), and ``data`` holds the broker's own row objects: only the top
  K, each source's rows in global rank order, sources in the order of their best
  row, then the sources none of whose rows survived (an empty list: the key stays,
  as the stock broker keeps it);
- a failure anywhere in that hands back the broker's own answer with one
  ``upstream_ranking_failed`` warning: ranking never fails a request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, ClassVar, Protocol

from nautilus_ranking.errors import NautilusError
from nautilus_ranking.log import get_logger
from nautilus_ranking.records import AdapterResult
from nautilus_ranking.synthesis.ranking import RankingSynthesizer
from nautilus_ranking.upstream.agent_profiles import AgentRankers
from nautilus_ranking.upstream.outcome import RequestRanking
from nautilus_ranking.upstream.request_scope import RequestScope, current_scope
from nautilus_ranking.upstream.row_views import row_view
from nautilus_ranking.upstream.source_kinds import UNKNOWN, SourceKind

logger = get_logger("nautilus_ranking.upstream")

Merged = dict[str, list[dict[str, Any]]]


class BrokerMerge(Protocol):
    """The broker's ``Synthesizer`` protocol (``nautilus.synthesis.base``)."""

    def merge(self, results: list[Any]) -> Merged: ...


class NoRequestScopeError(NautilusError, RuntimeError):
    """``merge`` ran outside the wrapped ``arequest``: there is no query to rank by."""


class BrokerSynthesizer:
    """Ranks the broker's results by the request's intent; see the module docstring."""

    #: The broker tells synthesizers apart by ``kind`` (its ``BasicSynthesizer``: "basic").
    kind: ClassVar[str] = "nautilus_ranking"

    def __init__(
        self,
        ranker: RankingSynthesizer | None,
        passthrough: BrokerMerge,
        source_kinds: Callable[[], Mapping[str, SourceKind]],
        agents: AgentRankers | None = None,
    ) -> None:
        #: Our ranker; None when every ranking knob is unset (the broker's answer as is).
        self.ranker = ranker
        #: The synthesizer the broker was built with (its ``BasicSynthesizer``).
        self.passthrough = passthrough
        self._source_kinds = source_kinds
        #: Each listed agent's ranking profile (``agent_profiles.py``); none: the knobs.
        self.agents = agents or AgentRankers()

    def merge(self, results: list[Any]) -> Merged:
        """``{source_id: rows}`` for the broker's response; never raises."""
        scope = current_scope()
        profile = self.agents.profile_of(scope.agent_id) if scope is not None else None
        ranker = self.agents.rankers[profile] if profile is not None else self.ranker
        if ranker is None:
            return self.passthrough.merge(results)
        try:
            if scope is None:
                raise NoRequestScopeError(
                    "merge ran outside the wrapped arequest (attach_ranking wraps it)"
                )
            merged, outcome = self._ranked(ranker, results, scope)
        except Exception as exc:
            logger.warning(
                "upstream_ranking_failed",
                error_type=type(exc).__name__,
                error=str(exc)[:200],
                action="the broker's passthrough answer is returned",
            )
            if scope is not None:
                scope.outcome = RequestRanking("", scope.intent, (), {}, type(exc).__name__)
            return self.passthrough.merge(results)
        scope.outcome = replace(outcome, profile=profile) if profile is not None else outcome
        return merged

    def _ranked(
        self, ranker: RankingSynthesizer, results: list[Any], scope: RequestScope
    ) -> tuple[Merged, RequestRanking]:
        kinds = self._source_kinds()
        answered = [r for r in results if getattr(r, "error", None) is None]
        ours: list[AdapterResult] = []
        originals: dict[int, dict[str, Any]] = {}
        for result in answered:
            kind = kinds.get(result.source_id, UNKNOWN)
            rows = list(result.rows)
            views = [row_view(row, kind) if isinstance(row, dict) else row for row in rows]
            for view, row in zip(views, rows, strict=True):
                originals[id(view)] = row
            ours.append(AdapterResult(result.source_id, views, ranked=kind.ranked))
        _, ranked_views = ranker.merge_ranked(ours, {"query": scope.intent})
        ranking = tuple(replace(r, row=originals[id(r.row)]) for r in ranked_views)
        merged: Merged = {}
        for ranked_row in ranking:  # a source first appears at its best row
            merged.setdefault(ranked_row.source_id, []).append(ranked_row.row)
        kept = {id(r.row) for r in ranking}
        dropped: Merged = {}
        for result in answered:
            merged.setdefault(result.source_id, [])
            lost = [row for row in result.rows if id(row) not in kept]
            if lost:
                dropped[result.source_id] = lost
        source_rows = {result.source_id: list(result.rows) for result in answered}
        return merged, RequestRanking("", scope.intent, ranking, dropped, None, source_rows)
