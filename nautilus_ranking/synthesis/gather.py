"""The pass's first stage: the batch flattened into candidates, each source's boost
level read, and the candidate cap applied (``max_candidates``).

The cap keeps rows by the boosted key; the statistics come from the rows it keeps
without boosts (the reference), which no boost can change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from nautilus_ranking.embedders import is_token_embedder
from nautilus_ranking.records import AdapterResult
from nautilus_ranking.synthesis import detection
from nautilus_ranking.synthesis.batch import RankBatch, RankSettings
from nautilus_ranking.synthesis.candidates import cap, declared, flatten, row_texts
from nautilus_ranking.synthesis.query import TokensToWeight
from nautilus_ranking.synthesis.rank_warnings import RankWarnings
from nautilus_ranking.synthesis.ranking_boost import stage1_key, weights_for
from nautilus_ranking.synthesis.vectors import QueryVector
from nautilus_ranking.text.arrays import FloatArray
from nautilus_ranking.tracing.spans import stages


def gather(
    ranker: RankSettings,
    results: list[AdapterResult],
    ctx: Mapping[str, Any],
    query: QueryVector | TokensToWeight,
    query_in_embedder_space: bool,
    warnings: RankWarnings,
) -> RankBatch | None:
    """The batch of ``results``' rows the later stages score (None: no rows)."""
    cands = flatten(results, warnings)
    level_weights = [
        weights_for(ranker.source_boosts.get(s.lower()) if isinstance(s, str) else None)
        for s in cands.source_ids
    ]
    multipliers = np.array([w.multiplier for w in level_weights] or [1.0])
    bumps = np.array([w.bump for w in level_weights] or [0.0])

    ranks = cands.source_rank.astype(np.float64)
    keys: FloatArray = stage1_key(ranks, multipliers[cands.source_index])
    if not cands.rows:
        return None
    texts_all = row_texts(cands.rows, warnings) if ranker.idf else None
    # Content is lexical when the query is in a lexical embedder's space: content then
    # sees words only, and cannot judge a semantic index's order (detection, fusion).
    lexical_content = is_token_embedder(ranker.embedder) and (
        query_in_embedder_space
        or isinstance(query, TokensToWeight)
        or query.shape[0] == getattr(ranker.embedder, "dim", None)
    )
    said = detection.orders_from_fields(
        declared(results, cands.source_ids),
        cands.rows,
        cands.source_index,
        scores=lexical_content,
    )
    everyone = np.arange(len(cands.rows))
    kept = reference = scored = where_ref = everyone
    sub = cands
    if ranker.max_candidates is not None and len(cands.rows) > ranker.max_candidates:
        kept = cap(cands, keys, ranker.max_candidates)
        reference = cap(cands, stage1_key(ranks), ranker.max_candidates)
        scored = np.union1d(kept, reference)  # sorted positions into the whole union
        sub = cands.take(scored)
        where_ref = np.searchsorted(scored, reference)
        if (recording := stages()) is not None:
            recording.add(
                "candidate_cap", len(cands.rows), len(kept), max_candidates=ranker.max_candidates
            )
    return RankBatch(
        ctx=ctx,
        query=query,
        query_in_embedder_space=query_in_embedder_space,
        lexical_content=lexical_content,
        cands=cands,
        bumps=bumps,
        keys=keys,
        texts_all=texts_all,
        said=said,
        kept=kept,
        reference=reference,
        scored=scored,
        where_ref=where_ref,
        sub=sub,
        n=len(scored),
    )
