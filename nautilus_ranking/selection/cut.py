"""A relevance cut: stop the ranked list where relevance falls away (opt-in).

``NAUTILUS_RANKING_CUT`` is ``METHOD:VALUE``, one of:

* ``relative:A`` (0 < A <= 1) — keep the rows whose fused relevance is at least ``A``
  times the best relevance in the list (a cut relative to the top score);
* ``floor:T`` (0 < T <= 1) — keep the rows whose normalised content score ``ŝ``
  (the content similarity normalised over the batch, 0 to 1; ``RankedRow.content``
  divided by ``content_weight / 61``) is at least ``T`` (a floor on content);
* ``gap:G`` (0 < G <= 1) — cut at the largest drop of relevance down the list, when
  that drop is at least ``G`` times the best relevance (autocut-like; a list with no
  such drop is kept whole).

Every method is a pure function of the ranked rows' components and returns a
*prefix*: the list runs to the last row that passes, so a row is never dropped while
one ranked below it is kept, and a row that passes is never dropped. The first row is
always kept. The methods read ``relevance`` (content and the sources' votes), never the
boosted ``score``: a boost changes where a row sits, not whether it is relevant. The
strong-match guarantee holds: the row with the best relevance passes ``relative`` and
``gap`` by construction, so it and every row above it are kept.

Measured on the shared collections (benchmarks/quality/relevance_cut.py, docs/tuning-
selection.md): no setting reaches 30 % fewer irrelevant rows in the top 10 at <= 5 %
relative loss of recall@10 in every collection, so the cut is off by default;
``nautilus-ranking eval`` reports each setting's rows handed over, irrelevant rows,
recall@k and nDCG@k so an operator can choose on their own judgments.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from nautilus_ranking.errors import Problem
from nautilus_ranking.errors import cut as cut_text
from nautilus_ranking.records import RankedRow

#: The methods, in the order the docs list them.
METHODS: tuple[str, ...] = ("relative", "floor", "gap")
#: The settings the benchmark and ``nautilus-ranking eval`` measure (``off`` first).
CUT_SETTINGS: tuple[str, ...] = (
    "off",
    "relative:0.5",
    "relative:0.6",
    "relative:0.7",
    "relative:0.8",
    "relative:0.9",
    "floor:0.5",
    "floor:0.6",
    "floor:0.7",
    "gap:0.05",
    "gap:0.1",
    "gap:0.2",
)
#: The content vote's scale: a normalised similarity of 1 is worth ``weight / 61``.
_VOTE = 61.0
_VALID = "relative:A, floor:T or gap:G with a number in (0, 1], e.g. relative:0.8; or off"
#: Linear on any text: no two quantifiers can share a run of characters (``[0-9]*\.?[0-9]+``
#: could, and took seconds to refuse a run of 16,000 digits).
_SETTING = re.compile(r"([a-z]+)\s*:\s*\+?([0-9]+(?:\.[0-9]+)?|\.[0-9]+)")


@dataclass(frozen=True, slots=True)
class RelevanceCut:
    """One cut setting: its method and its number."""

    method: str
    value: float

    def __str__(self) -> str:
        return f"{self.method}:{self.value:g}"


def parse_cut(var: str, raw: object) -> tuple[RelevanceCut | None, Problem | None]:
    """``METHOD:VALUE`` (any case, spaces tolerated); blank, unset or ``off``: None."""
    if raw is None or isinstance(raw, RelevanceCut):
        return raw, None
    if isinstance(raw, str) and raw.strip().lower() in ("", "off", "none"):
        return None, None
    match = _SETTING.fullmatch(raw.strip().lower()) if isinstance(raw, str) else None
    if match is None or match.group(1) not in METHODS:
        return None, Problem(var, cut_text(raw), "not a cut setting", _VALID)
    value = float(match.group(2))
    if not 0.0 < value <= 1.0:
        return None, Problem(var, cut_text(raw), "the number is not in (0, 1]", _VALID)
    return RelevanceCut(match.group(1), value), None


def normalised_content(row: RankedRow) -> float:
    """The row's normalised content similarity ``ŝ`` (0 to 1) from its content vote."""
    return row.content * _VOTE / row.content_weight if row.content_weight > 0 else 0.0


def relevance_cut(rows: Sequence[RankedRow], cut: RelevanceCut | None) -> int:
    """How many of ``rows`` (best first) the cut keeps: a prefix, at least 1 when there
    are rows, all of them when ``cut`` is None."""
    n = len(rows)
    if cut is None or n <= 1:
        return n
    if cut.method == "floor":
        return _last_passing([normalised_content(r) >= cut.value for r in rows])
    relevance = [r.relevance for r in rows]
    best = max(relevance)
    if cut.method == "relative":
        return _last_passing([r >= cut.value * best for r in relevance])
    return _at_largest_drop(relevance, cut.value * best)


def _last_passing(passes: list[bool]) -> int:
    for i in range(len(passes) - 1, 0, -1):
        if passes[i]:
            return i + 1
    return 1


def _at_largest_drop(relevance: list[float], least: float) -> int:
    """The cut after row ``i`` where the lowest relevance kept (rows 0..i) most exceeds
    the best left out (rows i+1..); the whole list when no such drop reaches ``least``.
    (Without boosts the list is sorted by relevance, and that drop is ``r[i] - r[i+1]``.)"""
    n = len(relevance)
    below = [0.0] * n  # below[i]: the best relevance of rows i..n-1
    running = float("-inf")
    for i in range(n - 1, -1, -1):
        running = max(running, relevance[i])
        below[i] = running
    best_drop, at = float("-inf"), n
    lowest = float("inf")
    for i in range(n - 1):
        lowest = min(lowest, relevance[i])
        drop = lowest - below[i + 1]
        if drop > best_drop:
            best_drop, at = drop, i + 1
    return at if best_drop >= least and best_drop > 0 else n
