"""A row too large for a token budget, handed over as its best passage.

A budget used to hand a long row over whole or not at all: past ``max_tokens`` alone it
was left out for good (rank 1 handed over whole, over the budget), and one that fitted
whole took the room of several answers. Under ``NAUTILUS_RANKING_BUDGET_PASSAGES`` (on
by default, only under a budget) a row too large for its page is handed over as the
part that answers: a row over the budget alone, or a row scored by a passage that costs
more than its share of the page's budget (:func:`page_share`; a budget with room for
every row whole hands them over whole). Handed over: its field cut to the passage that
scored (``RankedRow.passage``, a row past the model's window), else to the first window
of its longest text field. Its ranking entry says so: ``passage`` with the ``field``, its
``start`` and ``end`` (character offsets into the field's value), the value's
``length`` and a ``handle``.

The rest of a row: the same request again with ``whole: [handle]`` hands the rows named
over whole, through the same path as the request that found them (keys, profiles,
overrides). A handle names a row (its source, its id, its field's length), not a place,
so nothing is kept between requests.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from typing import Any

from nautilus_ranking.records import RankedRow
from nautilus_ranking.selection.tokens import count_tokens
from nautilus_ranking.text.passage_windows import windows

#: A handle's prefix: what it is, at a glance.
HANDLE_PREFIX = "row:"


def passage_handle(source_id: str, row: dict[str, Any], field: str) -> str:
    """The handle of a row handed over in part: its source, its id and the length of
    the field that was cut (a row edited since does not match)."""
    value = row.get(field)
    named = [source_id, str(row.get("id")), field, len(value) if isinstance(value, str) else 0]
    digest = hashlib.sha256(json.dumps(named, ensure_ascii=False).encode()).hexdigest()
    return HANDLE_PREFIX + digest[:24]


def passage_handle_of(ranked: RankedRow) -> str | None:
    """The handle a whole row is asked for by: its passage's (as handed over, or as it
    would be), None for a row with no part."""
    passage = ranked.passage if ranked.passage is not None else head_passage(ranked.row)
    if passage is None:
        return None
    handle = passage.get("handle")
    if isinstance(handle, str):
        return handle
    return passage_handle(ranked.source_id, ranked.row, passage["field"])


def head_passage(row: dict[str, Any]) -> dict[str, Any] | None:
    """The first window of the row's longest text field (a row no model scored in
    passages), or None when the row has no text field longer than one window."""
    texts = [(len(v), k) for k, v in row.items() if isinstance(v, str)]
    if not texts:
        return None
    length, field = max(texts)
    start, end = windows(row[field])[0]
    if end - start >= length:
        return None
    return {"field": field, "start": start, "end": end, "length": length}


def as_passage(ranked: RankedRow) -> RankedRow | None:
    """``ranked`` handed over as its passage: the field cut to it, ``passage`` saying
    which part it is and the handle of the whole row (None: the row has no part)."""
    passage = ranked.passage if ranked.passage is not None else head_passage(ranked.row)
    if passage is None or not isinstance(ranked.row.get(passage["field"]), str):
        return None
    field, start, end = passage["field"], passage["start"], passage["end"]
    row = {**ranked.row, field: ranked.row[field][start:end]}
    marked = {
        "field": field,
        "start": start,
        "end": end,
        "length": len(ranked.row[field]),
        "handle": passage_handle(ranked.source_id, ranked.row, field),
    }
    return replace(ranked, row=row, passage=marked)


def parts_that_fit(
    ranking: Sequence[RankedRow],
    counts: Sequence[int],
    max_tokens: int,
    text: Callable[[RankedRow], str],
    exact: bool | None = None,
    whole: Collection[str] = (),
    page: int | None = None,
) -> tuple[list[RankedRow], list[int]]:
    """The ranking with each row too large for its page replaced by its passage, and the
    rows' token counts (``text``: a row as it is counted). Too large: over ``max_tokens``
    alone, or, for a row scored by a passage, over its share of the budget
    (:func:`page_share`; ``page``: the rows a page holds, None: the whole ranking). A
    row named in ``whole`` (by the handle of its passage) is left whole."""
    out, costs = list(ranking), list(counts)
    share = page_share(max_tokens, page if page is not None else len(ranking))
    for i, (ranked, cost) in enumerate(zip(ranking, counts, strict=True)):
        if cost <= (max_tokens if ranked.passage is None else share):
            continue
        part = as_passage(ranked)
        if part is None or part.passage is None or part.passage["handle"] in whole:
            continue
        part_cost = count_tokens([text(part)], exact)[0]
        if part_cost < cost:
            out[i], costs[i] = part, part_cost
    return out, costs


def page_share(max_tokens: int, rows: int) -> int:
    """What a page's budget gives each of its ``rows``: a row scored by a passage that
    costs more whole is handed over as that passage, so one long row that fits whole
    does not take the room of several answers (a passage costs some 150-210 tokens as a
    JSON entry), and a budget with room for every row whole hands them over whole."""
    return max_tokens // max(rows, 1)


def asked_whole(ranking: Sequence[RankedRow], whole: Collection[str]) -> list[bool]:
    """Which rows ``whole`` names (by their passage's handle): handed over whatever they
    cost, so they fit as if free and their tokens are added to what was used."""
    return [bool(whole) and passage_handle_of(r) in whole for r in ranking]


def costs_to_fit(counts: Sequence[int], named: Sequence[bool]) -> list[int]:
    """The counts a budget fits: 0 for a row asked for whole."""
    return [0 if named and named[i] else c for i, c in enumerate(counts)]


def whole_tokens(counts: Sequence[int], named: Sequence[bool], kept: Sequence[int]) -> int:
    """The tokens of the kept rows asked for whole (left out of the fitting)."""
    return sum(counts[i] for i in kept if named and named[i])
