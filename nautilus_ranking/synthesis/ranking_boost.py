"""Source boost levels and the two functions that apply them.

Why levels and not numbers: an operator writes ``graph:high`` (or ``kv:-medium`` to
demote a noisy source) in a deployment manifest; what a level means is decided here,
once, against measurements, and can be retuned without touching a single manifest.

Why two stages, each bounded — the field lesson (docs/design.md, "Boosts"):
Hindsight multiplied its RRF score by 1/3/6. RRF's whole dynamic range over a
30-row list is 1/61 ÷ 1/90 ≈ 1.5, so any multiplier above ~1.5 sorts "boosted
source first, rank as tie-break" and the candidate cap then cuts every other
source (recall@20 0.97 → 0.40). A flat +0.5 on a cosine in [0, 1] did the same
after the reranker (0.907 → 0.637). A bump proportional to a row's own votes, the
opposite mistake, was safe and inert (+0.02 share of the top 10 at ``high``): it is
blind to how relevant the row it passes is. So here:

* **Stage 1** works in *rank space*: the fused key of a row at source rank ``r``
  is ``1 / (RRF_K + r / multiplier)``. A boosted row at rank ``r`` overtakes an
  unboosted row at rank ``r'`` only when ``r < multiplier · r'``. The rows the cap
  keeps without boosts stay candidates (synthesis/ranking.py), so stage 1 only
  lets a boosted source's deeper rows in (a rescue); it never pushes a row out.
* **Stage 2** adds a bump measured in the batch's own relevance: a share of the
  **spread** of the unboosted relevance among the batch's best documents (the 5th
  best minus the 15th, of the documents with any relevance; at most ``MAX_SPREAD``,
  a quarter of one vote), decayed by the row's place among its own source's rows
  (``1 / (1 + (place - 1) / RANK_DECAY)``). A boosted row passes rows that lead it
  by less than that share of the spread — rows of *similar* relevance — and never
  one that leads it by more: what counts as "clearly better" is read from the
  batch, on any score scale, on collections nobody tuned for. A negative level
  lowers each of its source's rows by the whole share, undecayed (a decayed demotion
  took most from the source's best row and could let its second pass it when the
  level was raised). A row with no relevance gains and loses nothing.

Both are monotonic: raising a level never lowers a key or a score, and the spread
and places come from unboosted relevance, which no boost changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from nautilus_ranking.text.arrays import FloatArray, IntArray

    BoolArray = npt.NDArray[np.bool_]

    Numeric = TypeVar("Numeric", float, npt.NDArray[np.float64])
else:
    Numeric = TypeVar("Numeric")

#: The reciprocal-rank constant of the stage-1 fused key (Cormack et al.'s 60,
#: also LangChain's EnsembleRetriever default), so the key is plain RRF when
#: nothing is boosted.
RRF_K = 60.0

#: Stage 2's spread: among the documents with any unboosted relevance, the one a third of
#: ``SPREAD_DEPTH`` down (the 5th) minus the ``SPREAD_DEPTH``-th (with fewer, a third of
#: them down minus the last) — how far apart the rows competing for a top 10 are in this
#: batch. A window around the top (not from the best row) is the same documents with or
#: without a candidate cap (docs/tuning-boosts.md, "Boost levels that are felt").
SPREAD_DEPTH = 15
#: Stage 2's decay by place in the source: the row at place ``p`` among its source's
#: rows (by unboosted relevance) gets ``1 / (1 + (p - 1) / RANK_DECAY)`` of the bump.
RANK_DECAY = 10.0
#: The spread never counts for more than a quarter of one source's rank-1 vote, whatever
#: the batch: so no level's bump exceeds it, and a relevance lead above it survives
#: ``high`` (the strong-match guarantee, docs/configuration.md, "Boost levels").
MAX_SPREAD = 0.25 / (RRF_K + 1)


@dataclass(frozen=True)
class BoostWeights:
    """The magnitudes of one level: ``multiplier`` for stage 1, ``bump`` for stage 2
    (a signed share of the batch's relevance spread; negative for a demotion)."""

    multiplier: float
    bump: float


_NO_BOOST = BoostWeights(multiplier=1.0, bump=0.0)

#: The one table of levels, lowest first (docs/configuration.md, "Boost levels", and
#: docs/tuning-boosts.md hold what each measured;
#: ``benchmarks/quality/boost_safety.py`` measures it).
BOOST_LEVELS: Mapping[str, BoostWeights] = MappingProxyType(
    {
        "-high": BoostWeights(multiplier=1 / 1.5, bump=-1.0),
        "-medium": BoostWeights(multiplier=1 / 1.25, bump=-0.5),
        "-low": BoostWeights(multiplier=1 / 1.1, bump=-0.2),
        "low": BoostWeights(multiplier=1.1, bump=0.2),
        "medium": BoostWeights(multiplier=1.25, bump=0.5),
        "high": BoostWeights(multiplier=1.5, bump=1.0),
    }
)


def weights_for(level: str | None) -> BoostWeights:
    """The weights of ``level``; no level (an unboosted source) is the identity."""
    if level is None:
        return _NO_BOOST
    return BOOST_LEVELS[level]


def stage1_key(source_rank: Numeric, multiplier: Numeric | float = 1.0) -> Numeric:
    """Fused rank key of a row at 1-based ``source_rank``; higher is better.

    ``1 / (RRF_K + source_rank / multiplier)``: the boost shortens the rank, it
    does not multiply the score, so its reach is bounded in rank space.
    """
    return 1.0 / (RRF_K + source_rank / multiplier)


def stage1_reach(level: str, other_rank: int) -> int:
    """The deepest source rank from which a ``level``-boosted row still strictly
    overtakes an unboosted row at ``other_rank`` in stage 1.

    From ``r / m < r'``: the largest integer ``r`` with ``r < m · r'``.
    """
    product = BOOST_LEVELS[level].multiplier * other_rank
    deepest = int(product)
    return deepest - 1 if deepest == product else deepest


def rank_decay(place: Numeric) -> Numeric:
    """The share of the bump a row at 1-based ``place`` in its source gets."""
    return 1.0 / (1.0 + (place - 1.0) / RANK_DECAY)


def relevance_spread(relevance: FloatArray, doc: IntArray) -> float:
    """The spread of the documents that have any relevance (each at its best copy): the
    one at a third of the depth minus the one at the depth, ``depth`` the
    ``SPREAD_DEPTH`` best (all, when fewer), never more than ``MAX_SPREAD``; 0 with fewer
    than two such documents. Documents with none (no content match, no vote) are left
    out: they are not competing, and counting them would make a batch of few matches
    look spread out."""
    import numpy as np  # the synthesizer's arrays; the level table needs none

    if len(relevance) < 2:
        return 0.0
    best = np.full(int(doc.max()) + 1, -np.inf)
    np.maximum.at(best, doc, relevance)
    best = best[best > 0]
    if len(best) < 2:
        return 0.0
    depth = min(SPREAD_DEPTH, len(best))
    top = np.sort(-np.partition(-best, depth - 1)[:depth])  # the best ``depth``, ascending
    third = (depth + 2) // 3  # the document a third of the way down: the 5th of 15
    return min(float(top[depth - third] - top[0]), MAX_SPREAD)


def source_places(
    relevance: FloatArray, source_index: IntArray, reference: IntArray, sources: IntArray
) -> IntArray:
    """Each row's 1-based place among its own source's ``reference`` rows by relevance
    (1 + those strictly more relevant; a row outside the reference as if inserted), for
    the rows of ``sources`` (0 elsewhere)."""
    import numpy as np  # the synthesizer's arrays; the level table needs none

    places = np.zeros(len(relevance), dtype=np.int64)
    ref_source = source_index[reference]
    for j in sources.tolist():
        ref = np.sort(relevance[reference[ref_source == j]])
        rows = np.flatnonzero(source_index == j)
        places[rows] = 1 + len(ref) - np.searchsorted(ref, relevance[rows], side="right")
    return places


def stage2_bumps(
    relevance: FloatArray,
    source_index: IntArray,
    doc: IntArray,
    reference: IntArray,
    level_bump: FloatArray,
) -> FloatArray:
    """What stage 2 adds to each row's relevance (negative for a demoted source).

    ``relevance`` unboosted, ``reference`` the positions of the rows the batch
    statistics come from, ``level_bump`` each *source*'s signed share of the spread.
    Only rows with some relevance are moved (a content match or a ranked source's vote:
    a row with neither is not competing). A boost adds ``level_bump · spread ·
    rank_decay(place)``, ``place`` the row's place among its source's rows by
    relevance, so a source's best rows gain most; a demotion takes ``|level_bump| ·
    spread`` from each, undecayed. Either way a row gains at least as much as any less
    relevant row of its source, so raising a level never lets one of its rows pass
    another of its rows it was below, and the source's own order is kept. 0 for every
    row of an unboosted source.
    """
    import numpy as np  # the synthesizer's arrays; the level table needs none

    n = len(relevance)
    boosted = np.flatnonzero(level_bump)
    if n == 0 or len(boosted) == 0:
        return np.zeros(n, dtype=np.float64)
    spread = relevance_spread(relevance[reference], doc[reference])
    if spread <= 0:
        return np.zeros(n, dtype=np.float64)
    places = source_places(relevance, source_index, reference, boosted)
    share = level_bump[source_index]
    decay = np.where(share > 0, rank_decay(np.maximum(places, 1).astype(np.float64)), 1.0)
    out: FloatArray = np.where(relevance > 0, share * spread * decay, 0.0)
    return out


def unboosted_places(
    relevance: FloatArray,
    source_index: IntArray,
    source_rank: IntArray,
    doc: IntArray,
    reference: IntArray,
) -> IntArray:
    """Each row's 1-based place in the ranking without boosts (what ``--explain`` shows
    beside the boosted one): its document's place among the ``reference`` rows' documents
    ordered as the final sort orders them (relevance desc, routing index, source rank),
    each document at its best copy. A row only a boost let past the candidate cap (its
    document not among the reference rows) is placed as if inserted by its relevance."""
    import numpy as np  # the synthesizer's arrays; the level table needs none

    n = len(relevance)
    places = np.zeros(n, dtype=np.int64)
    if n == 0 or len(reference) == 0:
        return places
    order = reference[
        np.lexsort((source_rank[reference], source_index[reference], -relevance[reference]))
    ]
    _, first = np.unique(doc[order], return_index=True)
    ranked_docs = doc[order][np.sort(first)]  # each document once, best first
    place_of = np.zeros(int(doc.max()) + 1, dtype=np.int64)
    place_of[ranked_docs] = np.arange(1, len(ranked_docs) + 1)
    places = place_of[doc]
    outside = np.flatnonzero(places == 0)
    if len(outside):
        best = np.sort(relevance[order][np.sort(first)])  # ascending
        places[outside] = 1 + len(best) - np.searchsorted(best, relevance[outside], side="right")
    out: IntArray = places
    return out
