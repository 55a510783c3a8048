"""Source boost levels and the two pure functions that apply them.

Why levels and not numbers: an operator writes ``graph:high`` in a deployment
manifest; what ``high`` means is decided here, once, against measurements, and
can be retuned without touching a single manifest.

Why two stages, each bounded — the field lesson (DESIGN.md, "Boost levels"):
Hindsight multiplied its RRF score by 1/3/6. RRF's whole dynamic range over a
30-row list is 1/61 ÷ 1/90 ≈ 1.5, so any multiplier above ~1.5 sorts "boosted
source first, rank as tie-break" and the candidate cap then cuts every other
source (recall@20 0.97 → 0.40). A flat +0.5 on a cosine in [0, 1] did the same
after the reranker (0.907 → 0.637). So here:

* **Stage 1** works in *rank space*: the fused key of a row at source rank ``r``
  is ``1 / (RRF_K + r / multiplier)``. A boosted row at rank ``r`` overtakes an
  unboosted row at rank ``r'`` only when ``r < multiplier · r'`` — ``high``
  makes a boosted list count as if it were half as deep; it never lets a
  boosted row at rank 40 beat anyone's rank 5.
* **Stage 2** adds a small *bump* to the relevance (a cosine, at most 1). A
  boosted row overtakes an unboosted one only when the unboosted row's
  relevance is less than ``bump`` higher: it reorders near-ties, it does not
  bury strong rows.

Both are monotonic: raising a level never lowers a key or a score.
This module needs no numpy; the synthesizer calls the same functions on arrays.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Numeric = TypeVar("Numeric", float, npt.NDArray[np.float64])
else:
    Numeric = TypeVar("Numeric")

#: The reciprocal-rank constant of the stage-1 fused key (Cormack et al.'s 60,
#: also LangChain's EnsembleRetriever default), so the key is plain RRF when
#: nothing is boosted.
RRF_K = 60.0


@dataclass(frozen=True)
class BoostWeights:
    """The magnitudes of one level: ``multiplier`` for stage 1, ``bump`` for stage 2."""

    multiplier: float
    bump: float


_NO_BOOST = BoostWeights(multiplier=1.0, bump=0.0)

#: The one table of levels. Numbers chosen against the quality benchmark
#: (``benchmarks/quality.py``, boost-safety table, docs/benchmarks.md):
#:
#: * multiplier 1.25 / 1.5 / 2.0 — a boosted source's list counts as 0.8, 0.67
#:   and 0.5 times as deep at the candidate cap. With three sources and a cap
#:   of 30, ``high`` keeps ~15 of the boosted source's rows and ~7 of each other
#:   source's top rows (a 1:1:1 split without boost): a clear priority, no
#:   wipe-out. Hindsight's 6 would keep 30 boosted and 0 others.
#: * bump 0.01 / 0.02 / 0.04 — on a cosine relevance these are near-tie sizes:
#:   the gap between neighbouring rows in a top 10 measured on the shared
#:   collections has a median of ~0.01 and the gap between a relevant and an
#:   irrelevant row is several times 0.04, so ``high`` lifts a boosted row
#:   past a handful of close rivals; the other sources keep >= 0.8 of their
#:   recall@10 at ``high`` (the benchmark's boost-safety check).
BOOST_LEVELS: Mapping[str, BoostWeights] = MappingProxyType(
    {
        "low": BoostWeights(multiplier=1.25, bump=0.01),
        "medium": BoostWeights(multiplier=1.5, bump=0.02),
        "high": BoostWeights(multiplier=2.0, bump=0.04),
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


def stage2_score(relevance: Numeric, bump: Numeric | float = 0.0) -> Numeric:
    """Relevance after the stage-2 bump: ``relevance + bump``."""
    return relevance + bump


def stage1_reach(level: str, other_rank: int) -> int:
    """The deepest source rank from which a ``level``-boosted row still strictly
    overtakes an unboosted row at ``other_rank`` in stage 1.

    From ``r / m < r'``: the largest integer ``r`` with ``r < m · r'``.
    """
    product = BOOST_LEVELS[level].multiplier * other_rank
    deepest = int(product)
    return deepest - 1 if deepest == product else deepest
