"""Which sources are ranked: the weight of each source's votes, from its word or its rows.

A source may declare it (``ranked`` on its result,
from the sources file or the source class): declared ranked weighs 1, declared
unranked 0. Otherwise it is detected per batch. A source whose rows are sorted by
one of their own identifier fields (``key_ordered``: strictly monotone integers or
strings, at least ``MIN_ROWS_FOR_KEY_ORDER`` rows) is a table in key order:
unranked, as if declared so; where content is lexical, one whose rows come in the
order of a float score they carry (``score_ordered``: a BM25 score, a cosine, a
distance) is ranked, whatever the score measures — a semantic index is not judged by
a lexical content it may disagree with. The others by up to three tests of the source's
order, each a z-score (``rho * sqrt(n - 1)``, Spearman's ``rho`` over its ``n``
rows, about standard normal when the order is unrelated to what it is tested
against): against **content** similarity; against the **other sources** (the
votes the other sources, bar those found unranked, give each of its rows'
documents — two indexes over one corpus put the same documents near their tops;
a table in id order agrees with neither; only where sources share documents); and
against the rows' match with the query's **words** (the IDF coverage, where
content is a model's vectors: a keyword index agrees with its words where a
semantic similarity may not). The weight ramps from 0 at ``z = 1`` to 1 at
``z = 2`` on the largest: an order that agrees with none of them better than one
standard deviation of chance counts for nothing, two standard deviations fully.

Everything here is deterministic, never raises on finite input, and is a pure
function of its arguments.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from nautilus_ranking.synthesis.fusion import every_row_its_document, source_evidence
from nautilus_ranking.synthesis.ranking_boost import RRF_K
from nautilus_ranking.text.arrays import FloatArray, IntArray

#: Fewer rows than this in a batch and an undeclared source's order cannot be judged: weight 0.
MIN_ROWS_TO_DETECT = 3
#: Detection: a source's weight ramps from 0 at this z-score of its order's agreement...
DETECT_FROM_Z = 1.0
#: ...to 1 at this one (one and two standard deviations of chance).
DETECT_FULL_Z = 2.0
#: Fewer rows than this and a source's rows sorted by one of their fields prove nothing:
#: a relevance order sorts an unrelated field by chance with probability 2 / n!, which
#: over a dozen fields is 0.5% at 7 rows and 0.06% at 8 (and 20% at 5).
MIN_ROWS_FOR_KEY_ORDER = 8


def average_ranks(values: FloatArray) -> FloatArray:
    """1-based ranks of ``values`` ascending, ties sharing their average rank."""
    n = len(values)
    order = np.argsort(values)  # ties share one rank: their order does not matter (SIMD sort)
    ordered = values[order]
    distinct = ordered[1:] != ordered[:-1]
    ranks = np.empty(n, dtype=np.float64)
    if distinct.all():  # no ties (similarities, mostly): each rank is its place
        ranks[order] = np.arange(1, n + 1, dtype=np.float64)
        return ranks
    starts = np.flatnonzero(np.concatenate(([True], distinct)))
    ends = np.concatenate((starts[1:], [n]))
    mean_rank = (starts + ends + 1) / 2.0  # ranks start..end-1 (0-based) averaged, 1-based
    ranks[order] = np.repeat(mean_rank, ends - starts)
    return ranks


def spearman(x: FloatArray, y: FloatArray) -> float:
    """Spearman's rank correlation (ties averaged); 0 when either side is constant."""
    if len(x) < 2:
        return 0.0
    return _rank_correlation(average_ranks(x), average_ranks(y))


def _rank_correlation(rx: FloatArray, ry: FloatArray) -> float:
    """Pearson's correlation of two rank vectors (consumed): Spearman's rho. Ranks
    1..n, ties averaged, have the mean ``(n + 1) / 2`` exactly (their sum is exact)."""
    center = (len(rx) + 1) / 2.0
    rx -= center
    ry -= center
    denominator = math.sqrt(float(rx @ rx) * float(ry @ ry))
    return float(rx @ ry) / denominator if denominator > 0 else 0.0


def source_weights(
    source_index: IntArray,
    source_rank: IntArray,
    similarity: FloatArray,
    declared: Sequence[bool | None],
    doc: IntArray | None = None,
    lexical: FloatArray | None = None,
) -> tuple[FloatArray, FloatArray]:
    """(weight of each source's votes, the detected agreement with content ``rho`` or NaN
    if declared).

    ``source_index``/``source_rank``/``similarity``/``doc`` describe the rows the
    detection looks at; ``declared[j]`` is source ``j``'s own word, if any (False too
    for a source found in key order, :func:`orders_from_fields`: its votes are
    left out of the other sources' agreement test). Without ``doc`` (or where no two
    rows are copies) no source shares a document with another and that test is not
    made. ``lexical`` (optional): each row's match with the query's words (the IDF
    coverage, when content is a model's vectors): a third test, so a keyword index is
    recognised by the words it matched when a semantic content disagrees with it.
    """
    n_sources = len(declared)
    weights = np.zeros(n_sources, dtype=np.float64)
    agreement = np.full(n_sources, np.nan)
    # Each source's rows: a slice when they come source by source (as flattened).
    together = bool((source_index[1:] >= source_index[:-1]).all())
    ends = np.cumsum(np.bincount(source_index, minlength=n_sources)).tolist() if together else []
    others: FloatArray | None = None  # each row's votes from the other sources
    if (
        doc is not None
        and any(said is None for said in declared)
        and not (every_row_its_document(doc))
    ):
        # (a source declared or found unranked votes for nothing here either)
        voting = np.array([said is not False for said in declared], dtype=np.float64)
        every, _ = source_evidence(doc, source_index, source_rank, voting)
        others = every - voting[source_index] / (RRF_K + source_rank.astype(np.float64))
    for j, said in enumerate(declared):
        if said is not None:
            weights[j] = 1.0 if said else 0.0
            continue
        mine: slice | npt.NDArray[np.bool_] = (
            slice(ends[j - 1] if j else 0, ends[j]) if together else source_index == j
        )
        ranks = source_rank[mine]
        n = len(ranks)
        if n < MIN_ROWS_TO_DETECT:
            agreement[j] = 0.0
            continue
        if bool((ranks[1:] > ranks[:-1]).all()):  # rows in the source's order (as given):
            order_ranks = np.arange(n, 0, -1, dtype=np.float64)  # what average_ranks gives
        else:
            order_ranks = average_ranks(-ranks.astype(np.float64))
        # The order against content, the other sources' votes (where it shares documents
        # with them) and the query's words (where they tell its rows apart).
        tests = [similarity[mine]]
        if others is not None:
            tests.append(others[mine])
        if lexical is not None:
            tests.append(lexical[mine])
        rhos = [
            _rank_correlation(order_ranks.copy(), average_ranks(t))
            for t in tests
            if len(tests) == 1 or t is tests[0] or t.max() > t.min()
        ]
        agreement[j] = rhos[0]
        z = max(rhos) * math.sqrt(n - 1)
        weights[j] = min(max((z - DETECT_FROM_Z) / (DETECT_FULL_Z - DETECT_FROM_Z), 0.0), 1.0)
    return weights, agreement


def orders_from_fields(
    declared: Sequence[bool | None],
    rows: Sequence[Mapping[str, Any]],
    source_index: IntArray,
    scores: bool = True,
) -> list[bool | None]:
    """``declared``, with every undeclared source whose rows are in key order
    (:func:`key_ordered`) now unranked (False), and, when ``scores``, every other
    undeclared source whose rows are in the order of a score they carry
    (:func:`score_ordered`) now ranked (True). ``rows``/``source_index``: every
    candidate, each source's rows in its order.

    The ranker asks for ``scores`` when content is lexical: its tests then judge an
    order by the words it matches, which a semantic index's order need not follow.
    A model's content has a semantic test and a words test beside it, which judge
    both kinds of index (docs/tuning-sources.md measured the score order there too)."""
    out = list(declared)
    if all(said is not None for said in out):
        return out
    counts = np.bincount(source_index, minlength=len(out)).tolist()
    together = bool((source_index[1:] >= source_index[:-1]).all())
    start = 0
    for j, said in enumerate(out):
        if said is None and counts[j] >= MIN_ROWS_FOR_KEY_ORDER:
            mine = (
                rows[start : start + counts[j]]
                if together
                else [rows[i] for i in np.flatnonzero(source_index == j).tolist()]
            )
            if key_ordered(mine):
                out[j] = False
            elif scores and score_ordered(mine):
                out[j] = True
        start += counts[j]
    return out


#: Fields that are an engine's score by name (the HTTP sources' ``engine_score``, a
#: vector index's ``distance``): never a key, and a score of any numeric form — an
#: integer past 2**53 comes as its digits, a string (docs/sources.md).
ENGINE_SCORES = frozenset({"engine_score", "distance"})


def key_ordered(rows: Sequence[Mapping[str, Any]]) -> bool:
    """Whether ``rows`` (one source's answer, in its order) come sorted by one of their
    own identifier fields: strictly ascending or descending values of one field that
    every row has, integers or strings (a string of digits compared as its number) —
    the order of ``ORDER BY id`` / ``rowid`` / a name or a date, a table's key order,
    not relevance. Floats do not count (a score is a float: a source sorted by one is
    ranked), nor booleans, nor a field that only numbers the rows' positions (0 or 1
    upwards, step 1: a rank field). Under a relevance order an unrelated field is
    strictly monotone with probability ``2 / n!``: never decided below
    ``MIN_ROWS_FOR_KEY_ORDER`` rows. Cheap: a field out of order is given up at the
    first pair that breaks it (after two or three rows for all but the key)."""
    n = len(rows)
    if n < MIN_ROWS_FOR_KEY_ORDER:
        return False
    first, second = rows[0], rows[1]
    if not isinstance(first, Mapping) or not isinstance(second, Mapping):
        return False
    for name, value in first.items():
        if name in ENGINE_SCORES:
            continue
        a = _identifier(value)
        b = _identifier(second.get(name)) if a is not None else None
        if b is None or type(a) is not type(b) or a == b:
            continue
        ascending = b > a  # type: ignore[operator]
        step_one = isinstance(a, int) and a in (0, 1) and b == a + 1
        previous = b
        for row in rows[2:]:
            current = _identifier(row.get(name)) if isinstance(row, Mapping) else None
            if (
                current is None
                or type(current) is not type(previous)
                or current == previous
                or (current > previous) != ascending  # type: ignore[operator]
            ):
                break
            step_one = step_one and current == previous + 1  # type: ignore[operator]
            previous = current
        else:
            if not step_one:
                return True
    return False


def score_ordered(rows: Sequence[Mapping[str, Any]]) -> bool:
    """Whether ``rows`` (one source's answer, in its order) come in the order of a score
    they carry: one field that every row has as a finite float (an engine's score by name,
    :data:`ENGINE_SCORES`, as any number, its digits included), never rising or never
    falling down the rows, with at least ``MIN_ROWS_FOR_KEY_ORDER`` distinct values —
    a BM25 score, a cosine, a distance. An order by a score is relevance whatever the
    score measures (words or meaning), so it needs no test against content. Under an
    order unrelated to the field it is monotone with probability at most ``2 / d!``
    (``d`` distinct values). Cheap: a field out of order is given up at the first
    pair that breaks it."""
    n = len(rows)
    if n < MIN_ROWS_FOR_KEY_ORDER:
        return False
    first = rows[0]
    if not isinstance(first, Mapping):
        return False
    for name, raw in first.items():
        read = _engine_score if name in ENGINE_SCORES else _finite_float
        value = read(raw)
        if value is None:
            continue
        direction = 0  # +1 rising, -1 falling, 0 not yet known
        previous = value
        distinct = 1
        for row in rows[1:]:
            current = read(row.get(name)) if isinstance(row, Mapping) else None
            if current is None:
                break
            if current != previous:
                step = 1 if current > previous else -1
                if direction and step != direction:
                    break
                direction = step
                distinct += 1
            previous = current
        else:
            if distinct >= MIN_ROWS_FOR_KEY_ORDER:
                return True
    return False


def _finite_float(value: Any) -> float | None:
    return value if type(value) is float and math.isfinite(value) else None


def _engine_score(value: Any) -> float | int | None:
    """An engine's score as a number: a finite float, an int, or an int's digits (how
    one past 2**53 is carried); Python compares them exactly, whatever their size."""
    kind = type(value)
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is int:
        return value  # type: ignore[no-any-return]
    if kind is str and value.lstrip("-").isascii() and value.lstrip("-").isdigit():
        return int(value) if len(value) <= 4300 else None  # int()'s own limit on digits
    return None


def _identifier(value: Any) -> int | str | None:
    """A field value as an identifier's sort key: an int (a string of ASCII digits as its
    number), another string as itself; None for anything else (floats, booleans…)."""
    kind = type(value)
    if kind is int:
        return value  # type: ignore[no-any-return]
    if kind is str:
        # (at most 18 digits: an int64's, and far below int()'s limit on digits)
        return int(value) if len(value) <= 18 and value.isascii() and value.isdigit() else value
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, str):
        return str(value)
    return None
