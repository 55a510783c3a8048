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
calibrated, and most sources return none (docs/tuning.md records what was measured).

**Which sources are ranked.** A source may declare it (``ranked`` on its result,
from the sources file or the source class): declared ranked weighs 1, declared
unranked 0. Otherwise it is detected per batch. A source whose rows are sorted by
one of their own identifier fields (``key_ordered``: strictly monotone integers or
strings, at least ``MIN_ROWS_FOR_KEY_ORDER`` rows) is a table in key order:
unranked, as if declared so. The others by up to three tests of the source's
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
function of its arguments (the synthesizer feeds it statistics that no boost
can change, so boosts stay monotone).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from nautilus.log import get_logger
from nautilus.ranking_boost import RRF_K

logger = get_logger("nautilus.ranking")

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: The content vote at its fullest counts as much as one ranked source's rank-1 vote.
CONTENT_WEIGHT = 1.0
#: The share of voting sources' documents returned by more than one of them at which the
#: content weight reaches its floor. Disjoint shards share none (a duplicate here and
#: there stays well below it); two indexes over one corpus share 15-40% of their top 30
#: in the benchmark's collections (docs/tuning.md).
SHARED_FOR_CONTENT_FLOOR = 0.1
#: The content weight where ranked sources overlap (docs/tuning.md: 0 let content only
#: tie with the sources' agreement, 0.25 and more cost the smallest collection).
CONTENT_FLOOR = 0.1
#: Distribution-based normalisation: mean ± this many standard deviations map to 0 and 1.
DBSF_SPREAD = 3.0
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


def source_weights(source_index: IntArray, source_rank: IntArray, similarity: FloatArray,
                   declared: Sequence[bool | None], doc: IntArray | None = None,
                   lexical: FloatArray | None = None) -> tuple[FloatArray, FloatArray]:
    """(weight of each source's votes, the detected agreement with content ``rho`` or NaN
    if declared).

    ``source_index``/``source_rank``/``similarity``/``doc`` describe the rows the
    detection looks at; ``declared[j]`` is source ``j``'s own word, if any (False too
    for a source found in key order, :func:`unranked_by_key_order`: its votes are
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
    if doc is not None and any(said is None for said in declared) and not (
            every_row_its_document(doc)):
        # (a source declared or found unranked votes for nothing here either)
        voting = np.array([said is not False for said in declared], dtype=np.float64)
        every, _ = source_evidence(doc, source_index, source_rank, voting)
        others = every - voting[source_index] / (RRF_K + source_rank.astype(np.float64))
    for j, said in enumerate(declared):
        if said is not None:
            weights[j] = 1.0 if said else 0.0
            continue
        mine: slice | npt.NDArray[np.bool_] = (
            slice(ends[j - 1] if j else 0, ends[j]) if together else source_index == j)
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
        rhos = [_rank_correlation(order_ranks.copy(), average_ranks(t)) for t in tests
                if len(tests) == 1 or t is tests[0] or t.max() > t.min()]
        agreement[j] = rhos[0]
        z = max(rhos) * math.sqrt(n - 1)
        weights[j] = min(max((z - DETECT_FROM_Z) / (DETECT_FULL_Z - DETECT_FROM_Z), 0.0), 1.0)
    return weights, agreement


def unranked_by_key_order(declared: Sequence[bool | None], rows: Sequence[Mapping[str, Any]],
                          source_index: IntArray) -> list[bool | None]:
    """``declared``, with every undeclared source whose rows are in key order
    (:func:`key_ordered`) now unranked (False). ``rows``/``source_index``: every
    candidate, each source's rows in its order."""
    out = list(declared)
    if all(said is not None for said in out):
        return out
    counts = np.bincount(source_index, minlength=len(out)).tolist()
    together = bool((source_index[1:] >= source_index[:-1]).all())
    start = 0
    for j, said in enumerate(out):
        if said is None and counts[j] >= MIN_ROWS_FOR_KEY_ORDER:
            mine = (rows[start:start + counts[j]] if together
                    else [rows[i] for i in np.flatnonzero(source_index == j).tolist()])
            if key_ordered(mine):
                out[j] = False
        start += counts[j]
    return out


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
        a = _identifier(value)
        b = _identifier(second.get(name)) if a is not None else None
        if b is None or type(a) is not type(b) or a == b:
            continue
        ascending = b > a  # type: ignore[operator]
        step_one = isinstance(a, int) and a in (0, 1) and b == a + 1
        previous = b
        for row in rows[2:]:
            current = _identifier(row.get(name)) if isinstance(row, Mapping) else None
            if (current is None or type(current) is not type(previous) or current == previous
                    or (current > previous) != ascending):  # type: ignore[operator]
                break
            step_one = step_one and current == previous + 1  # type: ignore[operator]
            previous = current
        else:
            if not step_one:
                return True
    return False


def _identifier(value: Any) -> int | str | None:
    """A field value as an identifier's sort key: an int (a string of ASCII digits as its
    number), another string as itself; None for anything else (floats, booleans…)."""
    kind = type(value)
    if kind is int:
        return value  # type: ignore[no-any-return]
    if kind is str:
        # (at most 18 digits: an int64's, and far below int()'s limit on digits)
        return (int(value) if len(value) <= 18 and value.isascii() and value.isdigit()
                else value)
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, str):
        return str(value)
    return None


def source_evidence(doc: IntArray, source_index: IntArray, source_rank: IntArray,
                    weights: FloatArray, k: float = RRF_K) -> tuple[FloatArray, IntArray]:
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


def unranked_votes(similarity: FloatArray, doc: IntArray, source_index: IntArray,
                   reference: IntArray, weights: FloatArray, voters: IntArray,
                   weight: float, k: float = RRF_K) -> FloatArray:
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
    first = np.concatenate(([True], pair[order][1:] != pair[order][:-1]))[:len(ref)]
    best_source = source_index[ref][order][first]
    best_sim = similarity[ref][order][first]
    levels = np.unique(np.concatenate((best_sim, similarity[rows])))  # exact, ascending
    n_levels = len(levels)
    keys = np.sort(best_source * n_levels + np.searchsorted(levels, best_sim))
    source = source_index[rows]
    level = np.searchsorted(levels, similarity[rows])
    above = (np.searchsorted(keys, (source + 1) * n_levels, side="left")
             - np.searchsorted(keys, source * n_levels + level, side="right"))
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
    return (bool((doc == every).all())
            and (reference is None or (len(reference) == n and bool((reference == every).all()))))


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


def normalised_similarity(similarity: FloatArray, doc: IntArray,
                          reference: IntArray) -> FloatArray:
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


def content_vote(normalised: FloatArray, k: float = RRF_K,
                 weight: float = CONTENT_WEIGHT) -> FloatArray:
    """The content vote of rows at these normalised similarities: ``weight · ŝ / (k + 1)``
    (0 for a row with no positive similarity: ``ŝ`` is 0 there)."""
    vote: FloatArray = normalised * (weight / (k + 1.0))
    return vote
