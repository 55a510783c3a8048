"""The boost stage: what a source's boost adds to each row's relevance (stage 2 of
``ranking_boost.py``; stage 1, the boosted key of the candidate cap, is ``gather``'s),
and each row's place without boosts for ``--explain``.

A boost adds a signed share of the spread of the batch's unboosted relevance, decayed
by the row's place in its source; both read from unboosted relevance and the reference
rows, so a boost never changes another row's bump.
"""

from __future__ import annotations

import numpy as np

from nautilus_ranking.synthesis.batch import RankBatch
from nautilus_ranking.synthesis.ranking_boost import stage2_bumps, unboosted_places


def boost(b: RankBatch) -> None:
    """Fill in ``b``'s bumps and unboosted places."""
    sub = b.sub
    b.bump = stage2_bumps(b.relevance, sub.source_index, b.sub_doc, b.where_ref, b.bumps)
    b.unboosted = (
        unboosted_places(b.relevance, sub.source_index, sub.source_rank, b.sub_doc, b.where_ref)
        if b.bumps.any()
        else np.zeros(b.n, dtype=np.int64)
    )
