"""nDCG@k, recall@k and MRR over one ranked list of document ids — as trec_eval computes them.

The ranked list is already in order (the synthesizer broke any ties), so these
functions never sort by score: position ``i`` (0-based) is rank ``i + 1``.
Definitions follow trec_eval (``ndcg_cut``, ``recall``, ``recip_rank``), which
the tests check against to 1e-9:

* a document is *relevant* when its grade is >= 1 (trec_eval's default level);
* nDCG uses linear gain ``grade / log2(rank + 1)``; the ideal ranking is every
  judged document sorted by grade, cut at ``k``;
* recall@k counts relevant documents in the top ``k`` over all relevant ones;
* MRR (reciprocal rank) looks at the whole list, not only the top ``k``.

An id that repeats counts at its first position only (a document is read once).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

#: The metric depth of ``nautilus-ranking eval``: what an agent reads.
DEFAULT_K = 10


def first_occurrences(ranked: Sequence[str | None]) -> list[str | None]:
    """The list with each repeated id dropped after its first position.

    ``None`` marks a row that carries no id: it keeps its place (an agent still
    reads it) and is never relevant.
    """
    seen: set[str] = set()
    out: list[str | None] = []
    for doc in ranked:
        if doc is None:
            out.append(None)
        elif doc not in seen:
            seen.add(doc)
            out.append(doc)
    return out


def _gain(grades: Mapping[str, int], doc: str | None) -> int:
    return max(grades.get(doc, 0), 0) if doc is not None else 0


def ndcg_at(ranked: Sequence[str | None], grades: Mapping[str, int], k: int = DEFAULT_K) -> float:
    """nDCG@k with linear gain; 0.0 when nothing is judged relevant."""
    docs = first_occurrences(ranked)[:k]
    dcg = sum(_gain(grades, d) / math.log2(i + 2) for i, d in enumerate(docs))
    ideal = sorted((g for g in grades.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def relevant(grades: Mapping[str, int]) -> set[str]:
    """The judged-relevant ids (grade >= 1)."""
    return {d for d, g in grades.items() if g >= 1}


def recall_at(
    ranked: Sequence[str | None], grades: Mapping[str, int], k: int | None = DEFAULT_K
) -> float:
    """Relevant ids in the top ``k`` (the whole list when ``k`` is None) over all relevant."""
    wanted = relevant(grades)
    if not wanted:
        return 0.0
    docs = first_occurrences(ranked)
    top = docs if k is None else docs[:k]
    return len(wanted.intersection(d for d in top if d is not None)) / len(wanted)


def reciprocal_rank(ranked: Sequence[str | None], grades: Mapping[str, int]) -> float:
    """1 / the rank of the first relevant id in the whole list; 0.0 when none is there."""
    wanted = relevant(grades)
    for i, doc in enumerate(first_occurrences(ranked)):
        if doc is not None and doc in wanted:
            return 1.0 / (i + 1)
    return 0.0
