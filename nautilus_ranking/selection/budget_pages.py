"""Pages under a token budget: each starts at the first ranked row the budget left out.

Without a budget page ``n`` is ranks ``(n-1)·K+1 … n·K``. With one, the budget keeps
what fits of a page's K rows and skips the rest (skip-and-continue:
:func:`~nautilus_ranking.selection.budget.fit_counts`); a skipped row is not lost, it
is the next page's first. So page ``n``'s window is the first K ranked rows that no
earlier page handed over, and the budget keeps what fits of it. A row too large to fit
any page alone (over ``max_tokens`` by itself) is left out for good and reported by the
page whose window holds it — except the ranking's first row, which is handed over
flagged, as the budget always does (an agent gets the best row rather than nothing).

The cursor stays stateless: page ``n`` is recomputed from pages ``1 … n-1`` of the
same ranking, counts and budget (:func:`budget_page`), which a cursor pins (the ranking
key and the sources' answers). The windows of pages ``1 … n`` cover at most the top
``n·K`` rows (each earlier page handed over or reported at least one), so the ranking
the unbudgeted pages rank, the top ``n·K + 1``, is deep enough, and its extra row says
whether a next page exists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nautilus_ranking.selection.budget import BudgetResult, fit_counts


@dataclass(frozen=True, slots=True)
class BudgetPage:
    """One page under a budget, as indices into the ranking (in rank order).

    ``window``: the rows the page considered (the first ``size`` not handed over nor
    reported before); ``fitted``: what the budget kept of it, indices into ``window``;
    ``kept``: the rows handed over; ``too_large``: the rows of the window over the
    budget alone, left out for good; ``more``: whether a later page has a row to show;
    ``earlier``: the rows pages ``1 … n-1`` handed over or reported, in order (what a
    cursor checks it was made under).
    """

    window: tuple[int, ...]
    fitted: BudgetResult
    kept: tuple[int, ...]
    too_large: tuple[int, ...]
    more: bool
    earlier: tuple[int, ...] = ()


def budget_page(
    counts: Sequence[int],
    relevant: Sequence[bool],
    size: int,
    max_tokens: int,
    number: int,
) -> BudgetPage:
    """Page ``number`` (1-based) of ``size`` rows of a ranking whose rows cost
    ``counts`` tokens (``relevant``: which have any relevance), under ``max_tokens``:
    pages ``1 … number-1`` are recomputed to know what they handed over."""
    if number < 1 or size < 1:
        raise ValueError(f"page {number} of size {size}: both must be >= 1")
    done = [False] * len(counts)  # handed over, or reported too large
    earlier: list[int] = []
    start = 0  # every row above it is done
    page: BudgetPage | None = None
    for current in range(1, number + 1):
        if page is not None:
            earlier += (*page.kept, *page.too_large)
        window: list[int] = []
        i = start
        while i < len(counts) and len(window) < size:
            if not done[i]:
                window.append(i)
            i += 1
        fitted = fit_counts(
            [counts[j] for j in window],
            max_tokens,
            [relevant[j] for j in window],
            hand_first=bool(window) and window[0] == 0,  # only the ranking's first row
        )
        kept = tuple(window[k] for k in fitted.kept)
        too_large = tuple(j for j in window if counts[j] > max_tokens and j not in kept)
        for j in (*kept, *too_large):
            done[j] = True
        while start < len(counts) and done[start]:
            start += 1
        more = start < len(counts)
        page = BudgetPage(tuple(window), fitted, kept, too_large, more, tuple(earlier))
        if current < number and not page.more:  # past the last page: nothing left
            earlier += (*kept, *too_large)
            return BudgetPage((), fit_counts([], max_tokens), (), (), False, tuple(earlier))
    assert page is not None  # number >= 1
    return page


def too_large_note(budget: Mapping[str, Any]) -> str:
    """What a page's text says of the rows too large to fit any page alone (empty when
    none): they are left out for good, so the reader is told which."""
    ranks = budget.get("too_large_ranks") or []
    if not ranks:
        return ""
    return f"; rank(s) {', '.join(map(str, ranks))} too large to fit a page alone, left out"
