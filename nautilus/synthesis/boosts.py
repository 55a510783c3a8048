"""Source boost levels and the two pure functions that apply them.

Why levels and not numbers: an operator writes ``graph:high`` in a deployment
manifest; what ``high`` means is decided here, once, against measurements, and
can be retuned without touching a single manifest.

Why two stages, each bounded — the field lesson (docs/design.md, "Boosts"):
Hindsight multiplied its RRF score by 1/3/6. RRF's whole dynamic range over a
30-row list is 1/61 ÷ 1/90 ≈ 1.5, so any multiplier above ~1.5 sorts "boosted
source first, rank as tie-break" and the candidate cap then cuts every other
source (recall@20 0.97 → 0.40). A flat +0.5 on a cosine in [0, 1] did the same
after the reranker (0.907 → 0.637). So here:

* **Stage 1** works in *rank space*: the fused key of a row at source rank ``r``
  is ``1 / (RRF_K + r / multiplier)``. A boosted row at rank ``r`` overtakes an
  unboosted row at rank ``r'`` only when ``r < multiplier · r'``: ``high``
  (1.5) lets a boosted rank-7 row pass another source's rank 5, never rank 4.
* **Stage 2** adds a bump *proportional to the row's own source votes*:
  ``relevance + bump · |votes|`` (the synthesizer passes the row's evidence and
  unranked vote, never its content vote). A boosted row overtakes an unboosted one
  only when that row leads it by less than ``bump`` of the boosted row's votes —
  2% at ``high`` — whatever the embedder's score scale; a row with no votes gains
  nothing, and a content lead larger than 2% of the other row's votes survives
  every level (the strong-match guarantee, docs/configuration.md).

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
#: (``benchmarks/quality.py``, the boost-safety tables in docs/benchmarks.md,
#: three sources, partitioned corpus, top 10):
#:
#: * multiplier 1.1 / 1.25 / 1.5 — a boosted list counts as 0.91, 0.8 and 0.67
#:   times as deep at the candidate cap: with three 30-row sources and a cap of
#:   45, ``high`` keeps ~19 boosted rows and ~13 of each other source's best.
#:   2.0 for ``high`` dropped the other sources' recall@10 to 0.71 on CISI with
#:   a cap of 45; Hindsight's 6 would keep 30 boosted rows and 0 others.
#: * bump 0.5% / 1% / 2% of the row's source votes (before the content vote was
#:   by normalised similarity, of its whole relevance). A vote is a reciprocal-rank
#:   score (synthesis/fusion.py), whose neighbouring ranks differ by ~1.6% near the
#:   top, so 2% moves a row about one rank in its source. On the bump of votes: at
#:   ``high`` the others keep >= 0.918 of their recall@10 (cap 45), >= 0.955 without,
#:   declared or undeclared (docs/benchmarks.md). First measured with
#:   the three-source benchmark (MiniLM vector source, partitioned, top 10): at
#:   ``high`` the boosted share of the top 10 rises 4-9 points and the other
#:   sources keep >= 0.906 of their recall@10 (>= 0.857 with a cap of 45) on all
#:   four collections. 2/4/8% (tuned for the cosine scores before the fusion)
#:   left them 0.56 on CISI and CACM with the cap; 1/2/3% 0.77 on CACM with the
#:   cap. A flat bump was tried first: +0.04 on cosines left them 0.48 on CISI —
#:   a relative bump means the same on every score scale.
BOOST_LEVELS: Mapping[str, BoostWeights] = MappingProxyType(
    {
        "low": BoostWeights(multiplier=1.1, bump=0.005),
        "medium": BoostWeights(multiplier=1.25, bump=0.01),
        "high": BoostWeights(multiplier=1.5, bump=0.02),
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


def stage2_bump(relevance: Numeric, bump: Numeric | float = 0.0) -> Numeric:
    """What stage 2 adds to a row's relevance: ``bump · |relevance|``."""
    return bump * abs(relevance)


def stage2_score(relevance: Numeric, bump: Numeric | float = 0.0) -> Numeric:
    """Relevance after the stage-2 bump: ``relevance + bump · |relevance|``."""
    return relevance + stage2_bump(relevance, bump)


def stage1_reach(level: str, other_rank: int) -> int:
    """The deepest source rank from which a ``level``-boosted row still strictly
    overtakes an unboosted row at ``other_rank`` in stage 1.

    From ``r / m < r'``: the largest integer ``r`` with ``r < m · r'``.
    """
    product = BOOST_LEVELS[level].multiplier * other_rank
    deepest = int(product)
    return deepest - 1 if deepest == product else deepest
