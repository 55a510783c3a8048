"""The passage stage: a row past the model's window scored by its best passage.

A sentence model reads a row's first 128 word pieces; a long row's answer further on
did not exist for its content score. A row past two windows' worth of words (252:
:data:`~nautilus_ranking.text.passage_windows.PASSAGE_WORDS`; a row past the window
only a little is scored by its head, as before) is read as passages
(:func:`~nautilus_ranking.text.passage_windows.windows`: about 105 pieces each, on
sentence and paragraph bounds, overlapping), and its content score is its best
passage's:

* **lexical**: the best passage's IDF-weighted cosine (the score every row has beside
  the model's), not the whole row's, whose cosine fades with its length;
* **semantic**: the best of the row's head (what the model read of it before: its
  vector, or its first 128 pieces) and the :data:`PASSAGES_A_ROW` passages best by
  words, each embedded alone. Each is a cosine of at most 128 pieces to the query, the
  scale of a short row's, so a long row neither gains nor loses for its length. (The
  best by cosine of every passage instead lifted long rows at random: Cranfield
  partitioned 0.232 -> 0.203 nDCG@10, ``docs/tuning-embedders.md``.)
* **IDF factor** (with IDF: a row's coverage of the query's words, times its
  similarity): the passage's that scored. The whole row's grows with its length, as a
  query's words turn up in its unrelated parts.

An embedder that keeps vectors (the model's memory cache) embeds a long row's first
:data:`WINDOWS_A_ROW` passages after its head too, whatever the query, after every
row's best by words.

Passage vectors go through the embedder's caches (memory and disk) as row vectors do,
keyed by their text: a row's passages are embedded the first time it is seen, and a new
query's best by words on it are then cache hits (a row of more than
:data:`WINDOWS_A_ROW` passages after its head embeds its best by words past them, as
before). The model embeds only
the passages of rows it embeds (the best ``NAUTILUS_EMBEDDER_MAX_ROWS`` by words) and
within what is left of ``NAUTILUS_EMBEDDER_DEADLINE_MS``, each row's best by words
first; a passage not reached does not score, and is embedded by a later request.
Rows of at most 252 words are scored as before, to the byte. The passage that scored is
kept per row (``passage``: character offsets into the row's text) for ``--explain``
and for a budget that hands a long row over in part.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nautilus_ranking.embedders import Embedder
from nautilus_ranking.synthesis.candidates import NOT_TEXT
from nautilus_ranking.synthesis.passage_rows import (
    RowPassages,
    kept_vectors,
    lexical_scores,
    passage_factors,
    row_passages,
)
from nautilus_ranking.synthesis.rank_warnings import RankWarnings
from nautilus_ranking.synthesis.similarity import lexical_query, text_similarities
from nautilus_ranking.synthesis.vectors import QueryVector, unit
from nautilus_ranking.text.arrays import FloatArray, IntArray
from nautilus_ranking.text.passage_windows import PASSAGE_WORDS, past_window
from nautilus_ranking.text.tokens import IDF_FLOOR

#: Passages the model embeds of a long row, beyond its head: the best by words (at 2,
#: a row costs about 3 short rows' embedding the first time it is seen; cached after).
PASSAGES_A_ROW = 2
#: Passages after its head that an embedder keeping vectors embeds of a long row once,
#: whatever the query: a later query's passages are then cache hits. 48 windows of about
#: 72 new units each cover some 3,500 words (the long-rows benchmark's rows hold 12 to
#: 54 windows, 33 at the median), a row costs at most 49 short rows' embedding the first
#: time it is seen, and its vectors 74 KB of cache (48 x 384 float32s).
WINDOWS_A_ROW = 48


@dataclass
class Passages:
    """The long rows of a batch and their passages.

    ``rows``: positions (in the scored rows) of the rows past the window;
    ``row_of``: for each passage, its row's index in ``rows``; ``spans``: each passage's
    ``[start, end)`` in its row's text; ``lexical``: each passage's lexical score;
    ``best``: per row in ``rows``, the passage that scored (an index into ``spans``);
    ``factors``: each passage's IDF factor (its IDF-weighted coverage of the query, as
    :func:`~nautilus_ranking.text.tokens.idf_factors` gives a row's);
    ``kept``: per row in ``rows``, what its passages are whatever the query
    (``passage_rows.py``)."""

    rows: IntArray
    row_of: IntArray
    spans: list[tuple[int, int]]
    lexical: FloatArray
    best: IntArray
    factors: FloatArray
    kept: list[RowPassages] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.spans)


def long_rows(texts: list[str]) -> IntArray:
    """Positions of the texts read as passages: past two windows' worth of words
    (:data:`~nautilus_ranking.text.passage_windows.PASSAGE_WORDS`)."""
    return np.array(
        [i for i, t in enumerate(texts) if past_window(t, PASSAGE_WORDS)], dtype=np.intp
    )


def passage_lexical(
    texts: list[str],
    rows: IntArray,
    query_tokens: list[str],
    weights: dict[str, float],
) -> Passages:
    """``rows``' passages and each one's lexical score (0 without query words); each
    row's best passage by words. A row seen before is not split or tokenised again: its
    windows' vectors are kept (``passage_rows.py``), and scored by dot products."""
    kept = row_passages([texts[i] for i in rows.tolist()])
    owner = np.repeat(np.arange(len(rows), dtype=np.intp), [len(r.spans) for r in kept])
    spans = [span for record in kept for span in record.spans]
    query = lexical_query(query_tokens, weights)
    lexical = (
        lexical_scores(kept, query) if query is not None else np.zeros(len(spans), dtype=np.float64)
    )
    best = best_of(owner, lexical, len(rows))
    factors = passage_factors(kept, weights, IDF_FLOOR)
    return Passages(rows, owner, spans, lexical, best, factors, kept)


def best_of(owner: IntArray, score: FloatArray, n_rows: int) -> IntArray:
    """Per row, the index of its passage with the best ``score`` (the first on a tie)."""
    order = np.lexsort((np.arange(len(score)), -score, owner))
    first = np.ones(len(order), dtype=bool)
    first[1:] = owner[order][1:] != owner[order][:-1]
    best = np.full(n_rows, -1, dtype=np.intp)
    best[owner[order][first]] = order[first]
    return best


def row_factors(passages: Passages, factors: FloatArray) -> FloatArray:
    """``factors`` with each long row's IDF factor that of the passage that scored: the
    whole row's coverage of the query grows with its length (a query's words scattered
    over unrelated parts), a passage's is on a short row's scale."""
    out = factors.copy()
    out[passages.rows] = passages.factors[passages.best]
    return out


def row_lexical(passages: Passages, lexical: FloatArray) -> FloatArray:
    """``lexical`` with each long row's score its best passage's."""
    out = lexical.copy()
    out[passages.rows] = passages.lexical[passages.best]
    return out


def chosen(passages: Passages, embedded: IntArray, every: bool = False) -> IntArray:
    """The passages the model embeds: of the long rows it embeds (``embedded``:
    positions in the scored rows), the :data:`PASSAGES_A_ROW` best by words that are not
    the row's head (its first passage, which the row's own score already reads); with
    ``every`` (an embedder that keeps vectors), each row's first :data:`WINDOWS_A_ROW`
    passages after its head too, after every row's best by words (a deadline reaches
    those first)."""
    wanted = np.isin(passages.rows, embedded)
    first = np.ones(passages.count, dtype=bool)
    first[1:] = passages.row_of[1:] != passages.row_of[:-1]
    candidates = np.flatnonzero(wanted[passages.row_of] & ~first)
    if not len(candidates):
        return candidates
    owner = passages.row_of[candidates]
    order = np.lexsort((candidates, -passages.lexical[candidates], owner))
    ranked = candidates[order]
    picked: IntArray = np.sort(ranked[_place_in_row(owner[order]) < PASSAGES_A_ROW])
    if not every:
        return picked
    rest = candidates[_place_in_row(owner) < WINDOWS_A_ROW]
    more: IntArray = np.concatenate((picked, rest[~np.isin(rest, picked)]))
    return more


def _place_in_row(owner: IntArray) -> IntArray:
    """Each item's place among its row's items (``owner``: sorted by row)."""
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    place: IntArray = np.arange(len(owner)) - np.repeat(starts, np.diff(np.r_[starts, len(owner)]))
    return place


def passage_similarity(
    passages: Passages,
    texts: list[str],
    similarity: FloatArray,
    embedded: IntArray,
    embedder: Embedder,
    query: QueryVector,
    query_in_embedder_space: bool,
    warnings: RankWarnings,
    deadline: float | None,
) -> tuple[FloatArray, int]:
    """``similarity`` with each long row's semantic score its best passage's (its head's
    when no passage beats it), ``passages.best`` set to the passage that scored; and how
    many passages the model scored. ``deadline``: a :func:`time.perf_counter` time (None:
    none); the passages not reached by then leave their rows their head's score."""
    picked = chosen(passages, embedded, keeps_vectors(embedder))
    if deadline is not None:
        remaining_ms = int((deadline - time.perf_counter()) * 1000)
        if remaining_ms <= 0:
            return similarity, 0
    else:
        remaining_ms = 0
    out = similarity.copy()
    if not len(picked):
        return out, 0
    picked_texts = [
        texts[passages.rows[passages.row_of[p]]][slice(*passages.spans[p])] for p in picked.tolist()
    ]
    sims = text_similarities(
        _with_kept_vectors(embedder, passages, picked),
        picked_texts,
        unit(query),
        query_in_embedder_space,
        warnings,
        remaining_ms,
    )
    # every passage embedded (cached for later queries); the best by words score: the
    # best by cosine of all of them lifted long rows at random (Cranfield partitioned
    # 0.232 -> 0.203 nDCG@10)
    reached = ~np.isnan(sims) & np.isin(picked, chosen(passages, embedded))
    picked, sims = picked[reached], sims[reached]
    head = np.flatnonzero(np.r_[True, passages.row_of[1:] != passages.row_of[:-1]])
    # an embedded row whose head beats its passages scored by its head; a row the
    # model did not embed keeps its best passage by words
    kept = np.where(np.isin(passages.rows, embedded), head, passages.best)
    if not len(picked):
        passages.best = kept
        return out, 0
    owner = passages.row_of[picked]
    semantic = np.full(len(passages.rows), -np.inf)
    np.maximum.at(semantic, owner, sims)
    rows_similarity = out[passages.rows]
    beats = semantic > rows_similarity
    top = best_of(owner, sims, len(passages.rows))
    passages.best = np.where(beats, picked[np.maximum(top, 0)], kept)
    out[passages.rows] = np.where(beats, semantic, rows_similarity)
    return out, len(picked)


def _with_kept_vectors(embedder: Embedder, passages: Passages, picked: IntArray) -> Embedder:
    """The embedder, reading the ``picked`` passages' vectors kept on their rows first
    (:func:`~.passage_rows.kept_vectors`): one lookup a row, not one a passage."""
    if not passages.kept:
        return embedder
    first = np.concatenate(([0], np.cumsum([len(r.spans) for r in passages.kept])[:-1]))
    owner = passages.row_of[picked]
    return kept_vectors(embedder, passages.kept, owner, picked - first[owner])


def keeps_vectors(embedder: Embedder) -> bool:
    """Whether the embedder caches text vectors (the model's memory cache): a passage it
    embeds once is free for every later query, so every passage is worth embedding."""
    return int(getattr(embedder, "cache_size", 0) or 0) > 0


def field_span(row: dict[str, Any], start: int, end: int) -> dict[str, Any]:
    """A passage of a row's text (its string values joined by a space, as the ranking
    reads it) as the agent finds it in the row: the ``field`` holding most of it,
    ``start`` and ``end`` within that field's value, and the value's ``length``."""
    skip = NOT_TEXT if "embedding_model" in row else frozenset()
    best: dict[str, Any] = {"field": None, "start": start, "end": end, "length": 0}
    at, most = 0, -1
    for key, value in row.items():
        if not isinstance(value, str) or key in skip:
            continue
        overlap = min(end, at + len(value)) - max(start, at)
        if overlap > most:
            most = overlap
            best = {
                "field": key,
                "start": max(start - at, 0),
                "end": min(end - at, len(value)),
                "length": len(value),
            }
        at += len(value) + 1
    return best
