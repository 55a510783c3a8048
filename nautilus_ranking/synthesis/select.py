"""Selection: the best rows by score, copies collapsed into their best copy, as RankedRows.

Order is (score desc, routing index, source rank): deterministic, ties broken by
where a row came from. Then, each only when set (:class:`Spread`): near copies
collapse into the first kept row above them (``near_duplicates.py``), the whole
ranking is re-ordered for novelty (MMR, ``diversity.py``) and each source is held to
its cap in every page; the top K is cut last.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import starmap

import numpy as np

from nautilus_ranking.fanout.abandon import checkpoint
from nautilus_ranking.records import SCORE_COMPONENTS, Copy, RankedRow
from nautilus_ranking.rows import id_or_content_id
from nautilus_ranking.synthesis import diversity, fusion, near_duplicates
from nautilus_ranking.synthesis.candidates import Candidates
from nautilus_ranking.text.arrays import FloatArray, IntArray
from nautilus_ranking.text.tokens import TokenBatch


@dataclass
class Scores:
    """Each candidate's score and its components (fusion.py), parallel arrays named as the
    :class:`RankedRow` fields they become (``doc``, the document number, is not one)."""

    score: FloatArray
    similarity: FloatArray
    idf_factor: FloatArray
    content_rank: IntArray
    content: FloatArray
    content_weight: FloatArray
    evidence: FloatArray
    voters: IntArray
    source_weight: FloatArray
    unranked_vote: FloatArray
    relevance: FloatArray
    boost_bump: FloatArray
    stage1_key: FloatArray
    doc: IntArray
    unboosted_rank: IntArray

    def take(self, keep: IntArray) -> Scores:
        return Scores(**{name: values[keep] for name, values in vars(self).items()})


#: The RankedRow fields after ``(source_id, row, score, rank, source_rank, also_from)``, in
#: order: every score component, which Scores holds under the same name.
_COMPONENTS = tuple(name for name, _ in SCORE_COMPONENTS)


@dataclass(frozen=True)
class Spread:
    """What of a ranking is spread out after the fusion, each None when off:
    ``near_duplicates`` (a resemblance threshold in (0, 1]), ``diversity`` (an MMR
    weight in (0, 1]), ``max_per_source`` (rows of one source in each ``page`` rows; a
    page is the top K, None: the whole list); ``texts`` gives the row texts of the
    candidates at the positions it is handed (what the resemblance reads), ``batch``
    the tokens of every candidate's text when the pass built them (reused)."""

    near_duplicates: float | None
    diversity: float | None
    max_per_source: int | None
    page: int | None
    texts: Callable[[list[int]], list[str]]
    batch: TokenBatch | None = None

    @property
    def on(self) -> bool:
        return (
            self.near_duplicates is not None
            or self.diversity is not None
            or self.max_per_source is not None
        )


def select(
    cands: Candidates, scores: Scores, top_k: int | None, spread: Spread | None = None
) -> list[RankedRow]:
    """The best ``top_k`` rows (all when None), copies collapsed, spread when asked."""
    score = scores.score
    at: IntArray | None = None
    spreading = spread is not None and spread.on
    if (
        not spreading
        and top_k is not None
        and top_k < len(score)
        and fusion.every_row_its_document(scores.doc)
    ):
        # No copies to collapse: only the rows scoring at least the top_k-th best score
        # (ties included) can be placed; sort those (a partition, not a 10k-row lexsort)
        at = np.flatnonzero(score >= np.partition(score, len(score) - top_k)[-top_k])
    if at is None or len(at) < (top_k or 0):  # (fewer only if a score were NaN)
        order = np.lexsort((cands.source_rank, cands.source_index, -score))
        order, also_from = _collapse_copies(cands, order, scores.doc)
        if spread is not None and spreading:  # near copies, diversity, the cap
            order = _spread(cands, score, order, also_from, spread, top_k)
    else:
        order = at[np.lexsort((cands.source_rank[at], cands.source_index[at], -score[at]))]
        also_from = {}
    if top_k is not None:
        order = order[:top_k]
    # Column by column (one ``tolist`` each, the same Python floats as ``float(x)``):
    # ~1.7 µs a row less than reading each row's numbers from numpy one by one.
    places = order.tolist()
    sids = cands.source_ids
    s = scores.take(order)
    columns = [vars(s)[name].tolist() for name in _COMPONENTS]
    return list(
        starmap(
            RankedRow,
            zip(
                [sids[j] for j in cands.source_index[order].tolist()],
                [cands.rows[i] for i in places],
                s.score.tolist(),
                range(1, len(places) + 1),
                cands.source_rank[order].tolist(),
                [tuple(also_from.get(i, ())) for i in places],
                *columns,
                strict=True,
            ),
        )
    )


def _copy(cands: Candidates, i: int, kind: str) -> Copy:
    """Candidate ``i`` as a copy of another row."""
    row = cands.rows[i]
    try:
        name = id_or_content_id(row) if isinstance(row, dict) else None
    except Exception:  # rank() never raises: a row whose mapping methods break has no name
        name = None
    return Copy(cands.source_ids[cands.source_index[i]], name, int(cands.source_rank[i]), kind)


def _collapse_copies(
    cands: Candidates, order: IntArray, doc: IntArray
) -> tuple[IntArray, dict[int, list[Copy]]]:
    """Keep the best copy of each document (rows in ``order``, best first); record
    where the others came from."""
    first = np.zeros(len(doc), dtype=bool)
    _, where = np.unique(doc[order], return_index=True)
    first[where] = True
    if first.all():
        return order, {}
    kept = order[first]
    best_of: dict[int, int] = {}
    also_from: dict[int, list[Copy]] = {}
    for i, is_first in zip(order.tolist(), first.tolist(), strict=True):
        d = int(doc[i])
        if is_first:
            best_of[d] = i
        else:
            also_from.setdefault(best_of[d], []).append(_copy(cands, i, "exact"))
    return kept, also_from


def _spread(
    cands: Candidates,
    score: FloatArray,
    order: IntArray,
    also_from: dict[int, list[Copy]],
    spread: Spread,
    top_k: int | None,
) -> IntArray:
    """The ranking ``order`` (exact copies collapsed) with near copies collapsed (into
    ``also_from``), re-ordered for novelty and held to the per-source cap."""
    whole = spread.diversity is not None or spread.max_per_source is not None
    # A row's collapse depends only on the rows above it: without a stage that reads the
    # whole ranking, the top K needs only as many rows as it takes to keep K of them.
    length = len(order) if whole or top_k is None else min(len(order), 2 * top_k + 16)
    read_texts = spread.near_duplicates is not None or spread.diversity is not None
    every = (
        near_duplicates.shingles(spread.batch)
        if read_texts and spread.batch is not None and spread.batch.n_texts == len(score)
        else None
    )
    while True:
        head = order[:length]
        if not read_texts:
            break
        found = (
            near_duplicates.subset(every, head, len(score))
            if every is not None
            else near_duplicates.shingles(TokenBatch.from_texts(spread.texts(head.tolist())))
        )
        pairs = near_duplicates.resemblance(found)
        if spread.near_duplicates is None:
            break
        into = near_duplicates.collapse(pairs, length, spread.near_duplicates)
        kept = into < 0
        if length == len(order) or int(kept.sum()) >= (top_k or 0):
            break
        length = min(len(order), 2 * length)
    checkpoint("near_duplicates")
    if spread.near_duplicates is not None:
        heads = head.tolist()
        for below in np.flatnonzero(~kept).tolist():
            i = heads[below]
            target = also_from.setdefault(heads[int(into[below])], [])
            target.append(_copy(cands, i, "near"))
            target.extend(c._replace(copy="near") for c in also_from.pop(i, ()))
        # what the stages below read: the kept rows and their resemblance
        positions = np.flatnonzero(kept)
        renumber = np.full(length, -1, dtype=np.int64)
        renumber[positions] = np.arange(len(positions))
        both = kept[pairs.a] & kept[pairs.b]
        pairs = near_duplicates.Resemblance(
            renumber[pairs.a[both]], renumber[pairs.b[both]], pairs.value[both]
        )
        head = head[positions]
    if spread.diversity is not None:
        # MMR picks only the rows kept (the rest follow in order), unless a cap re-orders
        # what follows them: then every row, so a deeper page never changes a shallower one
        picks = top_k if spread.max_per_source is None else None
        head = head[diversity.mmr_order(score[head], pairs, spread.diversity, picks)]
    checkpoint("diversity")
    if spread.max_per_source is not None:
        block = spread.page if spread.page is not None else top_k
        head = head[
            diversity.cap_per_source(
                cands.source_index[head].tolist(), spread.max_per_source, block, top_k
            )
        ]
    return np.concatenate((head, order[length:]))
