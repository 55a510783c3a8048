"""Rows the model does not embed, scored by words: past the request's embedding
deadline, or past a large batch's best by words.

A large batch's rows are embedded only the best ``NAUTILUS_EMBEDDER_MAX_ROWS`` by their
lexical score (:func:`best_by_words`): the model reorders the rows a lexical stage found
promising, as a reranker does, and the rest keep their lexical score; measured in
docs/tuning-embedders.md ("The model on the best rows"). A query without words (``???``,
an emoji) has no lexical score: its rows are embedded the best ``NAUTILUS_EMBEDDER_MAX_ROWS``
by their sources' own order (:func:`best_by_source_rank`), never all of them.

``NAUTILUS_EMBEDDER_DEADLINE_MS`` bounds the time a request spends embedding its rows
with the model. A row not reached has no semantic score; it gets its lexical one (the
cosine every row has beside the model's), put on the model's scale by a least-squares
fit over the rows embedded in time, so those rows are neither buried nor lifted by the
scale of another score. Never an error: what happened is said in the answer's
``embedding`` field (the ranking's declared result carries it,
``synthesis/ranking_result.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nautilus_ranking.text.arrays import FloatArray, IntArray


def scored_by_words(
    similarity: FloatArray, late: IntArray, lexical: FloatArray | None
) -> FloatArray:
    """``similarity`` with the ``late`` rows' semantic score replaced by their lexical
    one, scaled to the model's by the rows embedded in time (0 without a lexical
    score: a query without words)."""
    out = similarity.copy()
    if lexical is None:
        out[late] = 0.0
        return out
    embedded = np.ones(len(similarity), dtype=bool)
    embedded[late] = False
    x, y = lexical[embedded], similarity[embedded]
    denominator = float(np.dot(x, x))
    scale = float(np.dot(x, y)) / denominator if denominator > 0 else 1.0
    out[late] = lexical[late] * (scale if scale > 0 else 1.0)
    return out


def best_by_words(lexical: FloatArray | None, count: int) -> IntArray:
    """The positions of the ``count`` rows with the best lexical score (ties by position),
    in order; the first ``count`` without one (a query without words)."""
    if lexical is None:
        return np.arange(count, dtype=np.intp)
    order = np.argsort(-lexical, kind="stable")[:count]
    return np.sort(order).astype(np.intp)


def best_by_source_rank(source_rank: IntArray, count: int) -> IntArray:
    """The positions of the ``count`` rows their sources ranked best (every source's
    first, then every second, …; ties by position), in order: what a query without
    words embeds, so that it is held to ``count`` rows like any other."""
    order = np.argsort(source_rank, kind="stable")[:count]
    return np.sort(order).astype(np.intp)


def scored_by_words_report(
    deadline_ms: int, rows_lexical: int, rows_embedded: int
) -> dict[str, Any]:
    """What the deadline did in this request's ranking (the answer's ``embedding``)."""
    return {
        "deadline_ms": deadline_ms,
        "rows_lexical": rows_lexical,
        "rows_embedded": rows_embedded,
    }
