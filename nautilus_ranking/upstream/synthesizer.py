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
- the query is the intent without the words that only routed it (:mod:`.routing_words`);
- ``NAUTILUS_RANKING_MAX_TOKENS`` keeps the best rows that fit, counted as each row's
  compact JSON (what ``data`` carries, so the attestation covers the budgeted rows):
  the lowest-ranked rows leave first, across sources. A row too large for the budget
  alone is counted and handed over as its passage (``NAUTILUS_RANKING_BUDGET_PASSAGES``,
  selection/passage_parts.py) in the ranking only, which the ranked route and tool
  answer with; ``data`` keeps the row as its source returned it. A ranked call's
  ``whole`` handles hand the rows they name over whole;
- the order handed over gets its hash (``ranking_hash``: the rows' sources and ids in
  rank order, the reference time, the profile), which the broker's attestation does not
  cover, signed with the cursor keys under a purpose of its own;
- a failure anywhere in that hands back the broker's own answer with one
  ``upstream_ranking_failed`` warning: ranking never fails a request.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol

from nautilus_ranking.errors import NautilusError
from nautilus_ranking.log import get_logger
from nautilus_ranking.ranking_hash import ranking_hash
from nautilus_ranking.records import AdapterResult, RankedRow
from nautilus_ranking.request.cursor_keys import CursorKeys
from nautilus_ranking.selection.budget import apply_budget, fit_counts
from nautilus_ranking.selection.tokens import count_tokens
from nautilus_ranking.synthesis.closing import close_ranking
from nautilus_ranking.synthesis.ranking import RankingSynthesizer
from nautilus_ranking.tracing import ranking_begin, ranking_end
from nautilus_ranking.upstream.agent_profiles import AgentRankers
from nautilus_ranking.upstream.outcome import RequestRanking
from nautilus_ranking.upstream.request_scope import RequestScope, current_call, current_scope
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
        *,
        query_of: Callable[[str], str] = str,
        max_tokens: int | None = None,
        min_confidence: float | None = None,
        keys: CursorKeys | None = None,
        budget_passages: bool = True,
    ) -> None:
        #: Our ranker; None when every ranking knob is unset (the broker's answer as is).
        self.ranker = ranker
        #: The synthesizer the broker was built with (its ``BasicSynthesizer``).
        self.passthrough = passthrough
        self._source_kinds = source_kinds
        #: Each listed agent's ranking profile (``agent_profiles.py``); none: the knobs.
        self.agents = agents or AgentRankers()
        #: The ranking's query for an intent (its routing words left out).
        self.query_of = query_of
        #: ``NAUTILUS_RANKING_MAX_TOKENS``: the rows handed over fit in it (None: no budget).
        self.max_tokens = max_tokens
        #: ``NAUTILUS_RANKING_MIN_CONFIDENCE``: below it ``data`` is empty (None: never).
        self.min_confidence = min_confidence
        #: The keys that sign each ranking's hash (None: hashed, not signed).
        self.keys = keys
        #: ``NAUTILUS_RANKING_BUDGET_PASSAGES``: under a budget, a row too large for it
        #: is handed over as its passage in the ranking (``data`` keeps it whole).
        self.budget_passages = budget_passages

    def merge(self, results: list[Any]) -> Merged:
        """``{source_id: rows}`` for the broker's response; never raises."""
        scope = current_scope()
        profile = self.agents.profile_of(scope.agent_id) if scope is not None else None
        ranker = self.agents.rankers[profile] if profile is not None else self.ranker
        max_tokens = self.agents.budget_of(profile, self.max_tokens)
        if ranker is None and max_tokens is None:
            return self.passthrough.merge(results)
        try:
            if ranker is None:
                return self._budgeted_passthrough(results, max_tokens or 0)
            if scope is None:
                raise NoRequestScopeError(
                    "merge ran outside the wrapped arequest (attach_ranking wraps it)"
                )
            min_confidence = self.agents.min_confidence_of(profile, self.min_confidence)
            budget = None
            if max_tokens is not None:
                call = current_call()
                passages = self.agents.passages_of(profile, self.budget_passages)
                budget = Budget(max_tokens, passages, call.whole if call is not None else ())
            merged, outcome = self._ranked(ranker, results, scope, budget, min_confidence)
            outcome = self._hashed(replace(outcome, profile=profile))
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
        scope.outcome = outcome
        return merged

    def _hashed(self, outcome: RequestRanking) -> RequestRanking:
        """``outcome`` with the hash of the order it hands over, and its signature."""
        time = outcome.time
        hashed = ranking_hash(
            ((r.source_id, r.row) for r in outcome.ranking),
            reference=time.get("reference") if time is not None else None,
            profile=outcome.profile,
        )
        signature = self.keys.sign_ranking_hash(hashed) if self.keys is not None else None
        return replace(outcome, ranking_hash=hashed, ranking_signature=signature)

    def _ranked(
        self,
        ranker: RankingSynthesizer,
        results: list[Any],
        scope: RequestScope,
        budget: Budget | None,
        min_confidence: float | None = None,
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
        query = self.query_of(scope.intent)
        traced = ranking_begin()  # the ranking span, under the broker's synthesis span
        try:
            found = ranker.merge_ranked(ours, {"query": query})
            # the sources' own rows again, in the order the views ranked
            found = replace(
                found, ranking=[replace(r, row=originals[id(r.row)]) for r in found.ranking]
            )
            fit = None
            if budget is not None:
                given = budget

                def fit(
                    data: Merged, rows: list[RankedRow]
                ) -> tuple[Merged, list[RankedRow], dict[str, Any]]:
                    fitted, done = self._budgeted(tuple(rows), given)
                    return data, list(fitted), done

            # In merge: an abstained answer's data is empty, so the broker's hash and
            # attestation are the abstained answer's; the rows held back are in the
            # outcome only.
            stages = traced.stages if traced is not None else None
            closed = close_ranking(found, min_confidence, len(results) - len(answered), fit, stages)
        finally:
            ranking_end(traced, True)
        ranking = tuple(closed.ranking)
        # a row handed over as its passage is in data whole, as its source returned it
        whole = {(r.source_id, r.rank): r.row for r in found.ranking}
        merged: Merged = {}
        for ranked_row in ranking:  # a source first appears at its best row
            row = whole.get((ranked_row.source_id, ranked_row.rank), ranked_row.row)
            merged.setdefault(ranked_row.source_id, []).append(row)
        kept = {id(row) for rows in merged.values() for row in rows}
        dropped: Merged = {}
        for result in answered:
            merged.setdefault(result.source_id, [])
            lost = [row for row in result.rows if id(row) not in kept]
            if lost:
                dropped[result.source_id] = lost
        source_rows = {result.source_id: list(result.rows) for result in answered}
        outcome = RequestRanking(
            "",
            scope.intent,
            ranking,
            dropped,
            None,
            source_rows,
            ranked_by=query,
            budget=closed.budget,
            confidence=closed.confidence.as_dict() if closed.confidence is not None else None,
            abstain=closed.abstain,
            nearest=tuple(closed.nearest),
            time=closed.time,
        )
        return merged, outcome

    @staticmethod
    def _budgeted(
        ranking: tuple[RankedRow, ...], budget: Budget
    ) -> tuple[tuple[RankedRow, ...], dict[str, Any]]:
        """The ranked rows that fit in the budget, each counted as its compact JSON
        (the lowest-ranked leave first; a row without relevance never takes the place of
        a relevant one that did not fit; with passages, a row too large for the budget
        alone as its passage, unless ``whole`` names it), and what the budget did."""
        _, kept, fitted = apply_budget(
            {},
            ranking,
            budget.max_tokens,
            lambda r: compact_json(r.row),
            passages=budget.passages,
            whole=budget.whole,
        )
        return tuple(kept), fitted.as_dict()

    def _budgeted_passthrough(self, results: list[Any], max_tokens: int) -> Merged:
        """The broker's own answer cut to what fits in the budget, in its own order
        (source by source): with no ranking knob set there is no rank to cut by."""
        merged = self.passthrough.merge(results)
        rows = [(sid, row) for sid, source_rows in merged.items() for row in source_rows]
        fitted = fit_counts(count_tokens([compact_json(row) for _, row in rows]), max_tokens)
        out: Merged = {sid: [] for sid in merged}
        for i in fitted.kept:
            out[rows[i][0]].append(rows[i][1])
        return out


@dataclass(frozen=True)
class Budget:
    """One request's token budget: ``max_tokens``, whether a row too large for it goes
    as its passage, and the rows its ranked call asks for whole (passage handles)."""

    max_tokens: int
    passages: bool
    whole: tuple[str, ...] = ()


def compact_json(row: Any) -> str:
    """A row as the broker's JSON answer carries it, compact: what a budget counts."""
    return json.dumps(row, separators=(",", ":"), ensure_ascii=False, default=str)
