"""A token budget: the ranked rows, in rank order, that fit in ``max_tokens``.

Each row is counted as the caller receives it — the text a transport hands over
for it (a JSON object, an MCP text block, a retriever document), not one of its
fields — with :func:`nautilus_ranking.selection.tokens.count_tokens`. Rows are taken in rank
order while they fit; a row that does not fit is skipped and the next one tried (a
long row never hides the short ones below it); the first row is always handed over,
flagged when it alone is over the budget (an agent gets the best row whole rather
than nothing). What frames the rows (brackets, separators, the response's other
fields) is not counted.

Skip-and-continue was measured against stopping at the first row that does not fit on
the shared collections (``python -m benchmarks.quality.budget_rule``): it hands over at least
as many relevant rows at every budget, and the same or a better nDCG@10 (its list is
the other's with rows after it). But a row with no relevance (no content match and no
source vote: ``relevance`` 0) never takes the place of a relevant row the budget
skipped: once a relevant row has been skipped, rows without relevance are left out too.

:func:`entry_text` is the default text of one ranked row: its ranking entry as the
response carries it (lean: source, id, rank, score and copies; every score component
only with ``explain``) with the row under ``row``, as canonical JSON.

Whether a count is exact (``o200k_base``, the ``tokens`` extra) or the over-estimate
is said in the budget's ``tokenizer``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from nautilus_ranking.records import SCORE_FIELDS, VECTOR_FIELDS, RankedRow
from nautilus_ranking.selection.passage_parts import (
    asked_whole,
    costs_to_fit,
    parts_that_fit,
    whole_tokens,
)
from nautilus_ranking.selection.tokens import ESTIMATE, count_tokens, tokenizer_name


@dataclass(frozen=True, slots=True)
class BudgetResult:
    """What a budget kept of a ranked list.

    ``kept``: the indices of the rows handed over, increasing (a subsequence of the
    ranking); ``tokens_used``: their tokens; ``left_out``: how many rows were not
    handed over; ``over_budget_first``: the first row alone is over ``max_tokens``
    (it is handed over anyway, and nothing else is); ``tokenizer``: what the counts
    are, ``o200k_base`` (exact) or ``estimate`` (an over-estimate).
    """

    max_tokens: int
    kept: tuple[int, ...]
    tokens_used: int
    left_out: int
    over_budget_first: bool
    tokenizer: str = ESTIMATE

    def as_dict(self) -> dict[str, Any]:
        """The budget as a response reports it."""
        return {
            "max_tokens": self.max_tokens,
            "tokens_used": self.tokens_used,
            "rows_left_out": self.left_out,
            "first_row_over_budget": self.over_budget_first,
            "tokenizer": self.tokenizer,
        }


def fit_counts(
    counts: Sequence[int],
    max_tokens: int,
    relevant: Sequence[bool] | None = None,
    hand_first: bool = True,
) -> BudgetResult:
    """:func:`fit_budget` on the rows' token counts. ``relevant`` says which rows have
    any relevance (None: all of them); after a relevant row is skipped, a row without
    relevance is never handed over in its place. ``hand_first``: the first row is
    handed over whatever it costs (False: a later page's, skipped like any other row
    that does not fit)."""
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be an integer >= 1, got {max_tokens!r}")
    if not counts:
        return BudgetResult(max_tokens, (), 0, 0, False)
    first = counts[0]
    if hand_first and first > max_tokens:
        return BudgetResult(max_tokens, (0,), first, len(counts) - 1, True)
    kept: list[int] = []
    used = 0
    skipped_relevant = False
    for i, cost in enumerate(counts):
        has_relevance = relevant is None or relevant[i]
        if used + cost <= max_tokens and (has_relevance or not skipped_relevant):
            kept.append(i)
            used += cost
        elif has_relevance:
            skipped_relevant = True
    return BudgetResult(max_tokens, tuple(kept), used, len(counts) - len(kept), False)


def fit_budget(
    rows_as_text: Sequence[str], max_tokens: int, exact: bool | None = None
) -> BudgetResult:
    """The rows (each as the text the caller receives) that fit in ``max_tokens``, in
    rank order; see the module docstring. ``exact`` as in :func:`count_tokens`."""
    fitted = fit_counts(count_tokens(rows_as_text, exact), max_tokens)
    return replace(fitted, tokenizer=counted_by(exact))


def counted_by(exact: bool | None) -> str:
    """What :func:`count_tokens` with ``exact`` counts with: the label a budget carries
    (:func:`fit_counts` knows only the counts, so its callers set it)."""
    return ESTIMATE if exact is False else tokenizer_name()


def ranking_entry(
    ranked: RankedRow, vectors: bool = False, scored: bool = True, explain: bool = False
) -> dict[str, Any]:
    """One ranked row as a response carries it: its ranking entry
    (:meth:`RankedRow.entry`: lean, every score component with ``explain``; the score
    ``null`` when not ``scored``, as a passthrough's response writes it) and the row
    under ``row`` (its vector fields left out unless ``vectors``; the row itself is
    never changed)."""
    row = ranked.row
    if not vectors and not VECTOR_FIELDS.isdisjoint(row):
        row = {k: v for k, v in row.items() if k not in VECTOR_FIELDS}
    entry = {**ranked.entry(explain), "row": row}
    if not scored:
        entry.update(dict.fromkeys(SCORE_FIELDS if explain else ("score",)))
    return entry


def entry_text(
    ranked: RankedRow, vectors: bool = False, scored: bool = True, explain: bool = False
) -> str:
    """:func:`ranking_entry` as canonical JSON: the default text a row is counted as."""
    return json.dumps(
        ranking_entry(ranked, vectors, scored, explain),
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )


def apply_budget(
    data: Mapping[str, list[dict[str, Any]]],
    ranking: Sequence[RankedRow],
    max_tokens: int,
    text: Callable[[RankedRow], str] = entry_text,
    exact: bool | None = None,
    passages: bool = False,
    whole: Collection[str] = (),
) -> tuple[dict[str, list[dict[str, Any]]], list[RankedRow], BudgetResult]:
    """The response's ``data`` and ``ranking`` cut to the rows that fit in ``max_tokens``,
    each row counted as ``text(row)`` (default :func:`entry_text`; a transport passes
    the text it hands over), and what the budget did.

    A row without relevance is not handed over in place of a relevant row that did not
    fit (a passthrough's rows all count alike). Every source keeps its key in ``data``
    (an empty list when none of its rows fit),
    its rows in rank order; the kept rows keep their ``rank``, so a gap shows where a
    row was skipped (and the text counted is the text handed over).

    ``passages``: a row too large for the budget alone is handed over as its passage
    (:mod:`nautilus_ranking.selection.passage_parts`); the rows ``whole`` names by
    their passage's handle are handed over whole, whatever they cost, in their place.
    """
    counts = count_tokens([text(r) for r in ranking], exact)
    named: list[bool] = []  # the rows asked for whole: handed over whatever they cost
    if passages:
        ranking, counts = parts_that_fit(ranking, counts, max_tokens, text, exact, whole)
        named = asked_whole(ranking, whole)
    fitted = fit_counts(costs_to_fit(counts, named), max_tokens, [r.relevance > 0 for r in ranking])
    used = fitted.tokens_used + whole_tokens(counts, named, fitted.kept)
    result = replace(fitted, tokens_used=used, tokenizer=counted_by(exact))
    kept = [ranking[i] for i in result.kept]
    out: dict[str, list[dict[str, Any]]] = {sid: [] for sid in data}
    for ranked in kept:
        out.setdefault(ranked.source_id, []).append(ranked.row)
    return out, kept, result
