"""Selection: the best rows by score, copies collapsed into their best copy, as RankedRows.

Order is (score desc, routing index, source rank): deterministic, ties broken by
where a row came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import starmap

import numpy as np

from nautilus_ranking.records import SCORE_COMPONENTS, RankedRow
from nautilus_ranking.synthesis import fusion
from nautilus_ranking.synthesis.candidates import Candidates
from nautilus_ranking.text.arrays import FloatArray, IntArray


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


def select(cands: Candidates, scores: Scores, top_k: int | None) -> list[RankedRow]:
    """The best ``top_k`` rows (all when None), copies collapsed."""
    score = scores.score
    at: IntArray | None = None
    if top_k is not None and top_k < len(score) and fusion.every_row_its_document(scores.doc):
        # No copies to collapse: only the rows scoring at least the top_k-th best score
        # (ties included) can be placed; sort those (a partition, not a 10k-row lexsort)
        at = np.flatnonzero(score >= np.partition(score, len(score) - top_k)[-top_k])
    if at is None or len(at) < (top_k or 0):  # (fewer only if a score were NaN)
        order = np.lexsort((cands.source_rank, cands.source_index, -score))
        order, also_from = _collapse_copies(cands, order, scores.doc)
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


def _collapse_copies(
    cands: Candidates, order: IntArray, doc: IntArray
) -> tuple[IntArray, dict[int, list[tuple[str, int]]]]:
    """Keep the best copy of each document (rows in ``order``, best first); record
    where the others came from."""
    first = np.zeros(len(doc), dtype=bool)
    _, where = np.unique(doc[order], return_index=True)
    first[where] = True
    if first.all():
        return order, {}
    kept = order[first]
    best_of: dict[int, int] = {}
    also_from: dict[int, list[tuple[str, int]]] = {}
    for i, is_first in zip(order.tolist(), first.tolist(), strict=True):
        d = int(doc[i])
        if is_first:
            best_of[d] = i
        else:
            also_from.setdefault(best_of[d], []).append(
                (cands.source_ids[cands.source_index[i]], int(cands.source_rank[i]))
            )
    return kept, also_from
