"""Fusing content relevance with the sources' own evidence: the math, on numpy arrays.

A BM25 or vector index ranked its rows with corpus-wide statistics the
synthesizer cannot see, so its order is evidence; a SQL table in id order is
not. The fused relevance of a row is a sum of *votes*, each at most
``1 / (k + 1)`` (k = 60, Cormack et al.'s reciprocal-rank constant):

* one vote per **ranked source** that returned the row's document, at the rank
  it gave it, weighted by how sure we are the source's order means something:
  ``w_j / (k + rank)``; a document several sources returned (agreement) collects
  several votes;
* one vote from **content**, by how *much* the row matches, not only where it
  ranks: ``c · ŝ / (k + 1)``, ``ŝ`` the row's content similarity normalised over
  the batch's documents by their distribution (Qdrant's distribution-based score
  fusion: ``mean ± 3 sd`` of the positive similarities map to 0 and 1, clipped),
  so an exact match and a row sharing one word with the query differ by most of a
  vote, where their content *ranks* differed by ~1% of one. This is Bruch et al.'s
  convex combination of a normalised score with rank evidence (2023, "An
  Analysis of Fusion Functions for Hybrid Retrieval"); none when the similarity is
  not positive (the row shares nothing with the query);
* with a **lexical** content signal, a ranked source's row whose ``ŝ`` is below what
  its rank implies (the ranked rows' pooled ``ŝ`` at its relative place in its
  source) is lifted ``w_j · RANK_FLOOR_SHARE`` of the way to it (:func:`rank_floor`):
  a shared word is evidence of relevance, a missing one is not, so a semantic
  index's paraphrases are not rated far below their rank;
* for a document that only **unranked** sources returned, the vote such a source
  would give it if it ordered its rows by content: ``c · (1 - w_j) / (k + r)``,
  ``r`` the document's content rank among that source's rows. Without it a
  table's rows would have one vote (content) against a ranked source's two,
  and could never reach the top, boosted or not.

``c`` is the batch's **content weight**, read from the rows themselves. Where
ranked sources hold disjoint shards (no document returned by two of them), a
source's rank 1 is not comparable with another's and content must decide
between shards: ``c = 1``. Where they search one corpus they return many of the
same documents, their ranks are comparable directly and their agreement is the
strongest signal: ``c`` falls linearly with the share of the ranked documents
that more than one voting source (weight > 0) returned, to ``CONTENT_FLOOR`` at
``SHARED_FOR_CONTENT_FLOOR`` — content keeps a tenth of a vote there, enough to
order what the sources' votes leave tied.

Ranks, not the sources' scores, are fused: those are on scales nobody
calibrated, and most sources return none (docs/tuning-fusion.md records what was measured).

**Which sources are ranked** (the weight ``w_j`` of a source's votes) is decided in
:mod:`nautilus_ranking.synthesis.detection`.

Everything here is deterministic, never raises on finite input, and is a pure
function of its arguments (the synthesizer feeds it statistics that no boost
can change, so boosts stay monotone).
"""

from __future__ import annotations

import math

import numpy as np

from nautilus_ranking.log import get_logger
from nautilus_ranking.synthesis.ranking_boost import RRF_K
from nautilus_ranking.text.arrays import FloatArray, IntArray

logger = get_logger("nautilus_ranking.ranking")


#: The content vote at its fullest counts as much as one ranked source's rank-1 vote.
CONTENT_WEIGHT = 1.0
#: The share of voting sources' documents returned by more than one of them at which the
#: content weight reaches its floor. Disjoint shards share none (a duplicate here and
#: there stays well below it); two indexes over one corpus share 15-40% of their top 30
#: in the benchmark's collections (docs/tuning-fusion.md).
SHARED_FOR_CONTENT_FLOOR = 0.1
#: The content weight where ranked sources overlap (docs/tuning-fusion.md: 0 let content only
#: tie with the sources' agreement, 0.25 and more cost the smallest collection).
CONTENT_FLOOR = 0.1
#: Content from a model's vectors: the semantic score's share of the convex combination
#: with the lexical one (docs/tuning-embedders.md: 0.5-0.8 all beat RRF over the ranked
#: sources where they overlap; the semantic score carries some lexical evidence already, the
#: IDF factor).
SEMANTIC_SHARE = 0.7
#: Distribution-based normalisation: mean ± this many standard deviations map to 0 and 1.
DBSF_SPREAD = 3.0
#: Lexical content: how far a ranked source's row that content rates below its rank's
#: place is lifted towards that place — halfway, the source's judgement and content's
#: counted equally (docs/tuning-sources.md: 0.3 and 0.5 both gain on every shard cell, 1 loses).
RANK_FLOOR_SHARE = 0.5


def source_evidence(
    doc: IntArray,
    source_index: IntArray,
    source_rank: IntArray,
    weights: FloatArray,
    k: float = RRF_K,
) -> tuple[FloatArray, IntArray]:
    """Each row's source votes: the sum over sources of ``w_j / (k + r)``, ``r`` the best
    rank source ``j`` gave the row's document; and how many ranked sources voted.

    ``doc`` numbers the documents (copies share a number)."""
    n = len(doc)
    if n == 0:
        return np.zeros(0, dtype=np.float64), np.zeros(0, dtype=np.int64)
    if every_row_its_document(doc):  # each row is its document's only vote
        w = weights[source_index]
        return w / (k + source_rank.astype(np.float64)), (w > 0).astype(np.int64)
    width = int(source_index.max()) + 1
    pair = doc * width + source_index
    order = np.lexsort((source_rank, pair))
    first = np.concatenate(([True], pair[order][1:] != pair[order][:-1]))
    best = order[first]  # each (document, source) pair once, at its best rank
    w = weights[source_index[best]]
    votes = w / (k + source_rank[best].astype(np.float64))
    n_docs = int(doc.max()) + 1
    per_doc = np.bincount(doc[best], weights=votes, minlength=n_docs)
    voters = np.bincount(doc[best], weights=(w > 0).astype(np.float64), minlength=n_docs)
    evidence: FloatArray = per_doc[doc].astype(np.float64)
    return evidence, voters[doc].astype(np.int64)


def content_weight(doc: IntArray, source_index: IntArray, weights: FloatArray) -> float:
    """The batch's content weight ``c``, from the share of the documents the voting
    sources (weight > 0) returned that more than one of them returned."""
    ranked = weights[source_index] > 0
    if not ranked.any() or every_row_its_document(doc):  # no document shared: c = 1
        return CONTENT_WEIGHT
    width = int(source_index.max()) + 1
    pairs = np.unique(doc[ranked] * width + source_index[ranked])  # (document, source) once
    per_doc = np.bincount(pairs // width)
    per_doc = per_doc[per_doc > 0]
    shared = float((per_doc >= 2).mean())
    return CONTENT_WEIGHT * max(1.0 - shared / SHARED_FOR_CONTENT_FLOOR, CONTENT_FLOOR)


def unranked_votes(
    similarity: FloatArray,
    doc: IntArray,
    source_index: IntArray,
    reference: IntArray,
    weights: FloatArray,
    voters: IntArray,
    weight: float,
    k: float = RRF_K,
) -> FloatArray:
    """Each row's vote from the unranked sources (``weights[j] < 1``) that returned its
    document, when no other ranked source did: ``weight · (1 - w_j) / (k + r)``, ``r``
    the document's content rank among source ``j``'s ``reference`` rows (0 for a row
    with no positive similarity). A document's copies share their best vote — the best
    among its copies in the ``reference`` and the row's own: a copy that only a boost
    let past the cap must not lift (nor, pushed out, drop) the other copies.

    ``voters`` counts, per row, the ranked sources that returned its document. Every
    unranked source is ranked in one pass: (source, similarity level) keys, sorted."""
    n = len(similarity)
    votes = np.zeros(n, dtype=np.float64)
    if weight <= 0 or n == 0:
        return votes
    row_weight = weights[source_index]
    unranked = row_weight < 1
    alone = (voters - (row_weight > 0)) <= 0  # no ranked source besides this row's own
    rows = np.flatnonzero(unranked & alone & (similarity > 0))
    if len(rows) == 0:
        return votes
    if every_row_its_document(doc, reference):  # no copies to pair: ranks from one sort
        ranks = descending_ranks(similarity, source_index)[rows]
        votes[rows] = weight * (1.0 - weights[source_index[rows]]) / (k + ranks)
        return votes
    # Each (source, document) of the unranked sources' reference rows once, at its best
    # copy; then a row's rank is 1 + the pairs of its own source that are more similar.
    ref = reference[unranked[reference]]
    n_docs = int(doc.max()) + 1
    pair = source_index[ref] * n_docs + doc[ref]
    order = np.lexsort((-similarity[ref], pair))
    first = np.concatenate(([True], pair[order][1:] != pair[order][:-1]))[: len(ref)]
    best_source = source_index[ref][order][first]
    best_sim = similarity[ref][order][first]
    levels = np.unique(np.concatenate((best_sim, similarity[rows])))  # exact, ascending
    n_levels = len(levels)
    keys = np.sort(best_source * n_levels + np.searchsorted(levels, best_sim))
    source = source_index[rows]
    level = np.searchsorted(levels, similarity[rows])
    above = np.searchsorted(keys, (source + 1) * n_levels, side="left") - np.searchsorted(
        keys, source * n_levels + level, side="right"
    )
    votes[rows] = weight * (1.0 - weights[source]) / (k + (1 + above).astype(np.float64))
    best = np.zeros(n_docs, dtype=np.float64)
    np.maximum.at(best, doc[reference], votes[reference])  # copies share the reference's vote
    out: FloatArray = np.maximum(votes, best[doc])
    return out


def content_ranks(similarity: FloatArray, doc: IntArray, reference: IntArray) -> IntArray:
    """Each row's content rank: 1 + the number of documents among the ``reference``
    rows (positions into ``similarity``) whose best copy is strictly more similar.

    A row outside the reference set is ranked as if inserted into it, so its rank
    depends on its own similarity and the reference set only."""
    if len(reference) == 0:
        return np.ones(len(similarity), dtype=np.int64)
    if every_row_its_document(doc, reference):
        return descending_ranks(similarity)
    ref_doc = doc[reference]
    ref_sim = similarity[reference]
    order = np.lexsort((-ref_sim, ref_doc))
    first = np.concatenate(([True], ref_doc[order][1:] != ref_doc[order][:-1]))
    best = np.sort(ref_sim[order][first])  # one similarity per document, ascending
    above = len(best) - np.searchsorted(best, similarity, side="right")
    ranks: IntArray = (1 + above).astype(np.int64)
    return ranks


def every_row_its_document(doc: IntArray, reference: IntArray | None = None) -> bool:
    """Whether no two rows are copies (``doc`` numbers the rows in order: what both
    numberings give then) and ``reference``, if given, holds every row: the case of
    most batches, where ranks need no per-document pairing."""
    n = len(doc)
    every = np.arange(n, dtype=np.int64)
    return bool((doc == every).all()) and (
        reference is None or (len(reference) == n and bool((reference == every).all()))
    )


def descending_ranks(similarity: FloatArray, group: IntArray | None = None) -> IntArray:
    """Each row's rank ``1 +`` the number of rows (of its ``group``, if given) strictly
    more similar: ties share the best rank.

    One SIMD ``argsort`` of the similarities, then (with groups) one integer sort of
    (group, place in that order): the binary searches it replaces cost ~8× more."""
    n = len(similarity)
    order = np.argsort(-similarity)  # ties may come in any order: they share a rank
    if group is not None and n:
        shift = max(n - 1, 1).bit_length()
        packed = np.sort((group[order] << shift) | np.arange(n, dtype=np.int64))
        order = order[packed & ((1 << shift) - 1)]
        starts = np.empty(n, dtype=bool)
        starts[0] = True
        grouped = packed >> shift
        np.not_equal(grouped[1:], grouped[:-1], out=starts[1:])
    else:
        starts = np.zeros(n, dtype=bool)
        starts[:1] = True
    ordered = similarity[order]
    new_level = starts.copy()
    np.logical_or(new_level[1:], ordered[1:] != ordered[:-1], out=new_level[1:])
    at = np.arange(n, dtype=np.int64)
    level_start = np.maximum.accumulate(np.where(new_level, at, 0))
    group_start = np.maximum.accumulate(np.where(starts, at, 0))
    ranks = np.empty(n, dtype=np.int64)
    ranks[order] = level_start - group_start + 1
    return ranks


def normalised_similarity(similarity: FloatArray, doc: IntArray, reference: IntArray) -> FloatArray:
    """Each row's content similarity normalised by the distribution of the ``reference``
    rows' documents' positive similarities (each document at its most similar copy):
    ``(s - (mean - 3 sd)) / (6 sd)`` clipped to [0, 1] (distribution-based score fusion);
    1 for every positive row when fewer than two documents, or no spread, to scale by;
    0 where the similarity is not positive."""
    if every_row_its_document(doc, reference):  # every row, no copies
        values = similarity
    elif len(reference) == 0:
        values = similarity[:0]
    else:
        ref_doc = doc[reference]
        ref_sim = similarity[reference]
        order = np.lexsort((-ref_sim, ref_doc))
        first = np.concatenate(([True], ref_doc[order][1:] != ref_doc[order][:-1]))
        values = ref_sim[order][first]
    positive = values[values > 0]
    m = len(positive)
    out = (similarity > 0).astype(np.float64)  # 1 where positive: the case without a spread
    if m >= 2:  # sums in one pass each (np.mean and np.std cost ~10 µs a call)
        mean = float(positive.sum()) / m
        variance = max(float(positive @ positive) / m - mean * mean, 0.0)
        spread = DBSF_SPREAD * math.sqrt(variance)
        if spread > 0:
            scaled = (similarity - (mean - spread)) * (1.0 / (2.0 * spread))
            np.maximum(scaled, 0.0, out=scaled)  # (np.clip costs several times more)
            np.minimum(scaled, 1.0, out=scaled)
            out *= scaled
    return out


def rank_floor(
    normalised: FloatArray,
    source_index: IntArray,
    source_rank: IntArray,
    weights: FloatArray,
    reference: IntArray,
    share: float = RANK_FLOOR_SHARE,
) -> FloatArray:
    """Lexical content, not penalising a ranked source for matching by meaning: each row
    of a source with weight ``w > 0`` whose normalised content ``ŝ`` is below what its
    rank implies is lifted ``w · share`` of the way to it.

    What a rank implies: a source's row at rank position ``p`` of its ``n`` reference rows
    is, by the source's judgement, as good as the ranked sources' reference rows at the
    same relative place ``p / n`` of their pooled ``ŝ`` (highest first). A shared word is
    evidence of relevance, a missing one is not (a semantic index finds paraphrases), so
    only a row content rates lower than that place is moved, and only part of the way:
    content still orders the rows, and a row content rates higher keeps its ``ŝ``.
    Computed on the ``reference`` rows only, so no boost changes another row's lift."""
    ranked_ref = reference[weights[source_index[reference]] > 0]
    if len(ranked_ref) == 0 or share <= 0:
        return normalised
    pooled = np.sort(normalised[ranked_ref])[::-1]  # the ranked reference rows, best first
    # Each row's place among its source's reference rows: how many rank strictly above it.
    width = int(source_rank.max()) + 2
    keys = np.sort(source_index[ranked_ref] * width + source_rank[ranked_ref])
    start = np.searchsorted(keys, source_index * width, side="left")
    count = np.searchsorted(keys, (source_index + 1) * width, side="left") - start
    place = np.searchsorted(keys, source_index * width + source_rank, side="left") - start
    row_weight = weights[source_index]
    lift = (row_weight > 0) & (count > 0)
    at = np.minimum((place * len(pooled)) // np.maximum(count, 1), len(pooled) - 1)
    implied = np.where(lift, pooled[at], 0.0)
    gap = np.maximum(implied - normalised, 0.0)
    lifted: FloatArray = normalised + (share * row_weight) * gap
    return lifted


def convex_content(
    semantic: FloatArray, lexical: FloatArray, share: float = SEMANTIC_SHARE
) -> FloatArray:
    """Content's normalised score from a semantic and a lexical one, each normalised
    (:func:`normalised_similarity`): ``share · semantic + (1 - share) · lexical``, in
    [0, 1] (Bruch et al.'s convex combination, over every row of the union)."""
    combined: FloatArray = share * semantic + (1.0 - share) * lexical
    return combined


def content_vote(
    normalised: FloatArray, k: float = RRF_K, weight: float = CONTENT_WEIGHT
) -> FloatArray:
    """The content vote of rows at these normalised similarities: ``weight · ŝ / (k + 1)``
    (0 for a row with no positive similarity: ``ŝ`` is 0 there)."""
    vote: FloatArray = normalised * (weight / (k + 1.0))
    return vote
