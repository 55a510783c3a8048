"""The ranking pass: one request's rows scored, fused, boosted and selected.

:class:`~nautilus_ranking.synthesis.ranking.RankingSynthesizer` holds the settings and
the public API; this is the pass it runs, a list of stages over one typed batch
(:class:`~nautilus_ranking.synthesis.batch.RankBatch`), each stage one module with one
entry point that fills in the batch's fields the later stages read. The order is the
design: what each stage reads from the ones before it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nautilus_ranking.fanout.abandon import checkpoint
from nautilus_ranking.records import AdapterResult, RankedRow
from nautilus_ranking.synthesis.batch import RankSettings
from nautilus_ranking.synthesis.batch_confidence import keep_confidence
from nautilus_ranking.synthesis.bumps import boost
from nautilus_ranking.synthesis.content import score_content
from nautilus_ranking.synthesis.gather import gather
from nautilus_ranking.synthesis.query import query_vector
from nautilus_ranking.synthesis.rank_warnings import RankWarnings
from nautilus_ranking.synthesis.ranking_result import PassNotes
from nautilus_ranking.synthesis.recency import time_stage
from nautilus_ranking.synthesis.select import select_batch
from nautilus_ranking.synthesis.votes import vote
from nautilus_ranking.tracing.facts import passages_stage
from nautilus_ranking.tracing.spans import stages


def rank_pass(
    ranker: RankSettings,
    results: list[AdapterResult],
    context: Mapping[str, Any] | None,
    warnings: RankWarnings,
    notes: PassNotes,
) -> list[RankedRow] | None:
    """The ranked rows (None: no ranking, the rows as given); what the stages say
    beside the order goes into ``notes``."""
    ctx: Mapping[str, Any] = context if isinstance(context, Mapping) else {}
    query, query_in_embedder_space = query_vector(ranker.embedder, ranker.idf, ctx, warnings)
    if query is None:
        return None
    checkpoint("query")  # each stage ends here when the caller stopped waiting (504)
    batch = gather(ranker, results, ctx, query, query_in_embedder_space, warnings)
    if batch is None:
        return []
    scored = score_content(ranker, batch, warnings)  # ends at checkpoint("similarity")
    notes.embedding = batch.embedding_report
    if batch.passages is not None and (recording := stages()) is not None:
        passages = batch.passages
        passages_stage(
            recording, batch.n, len(passages.rows), passages.count, batch.passages_scored
        )
    if not scored:
        return None
    vote(batch)  # which sources are ranked, their votes, content's: relevance
    keep_confidence(ranker, batch)  # read before any boost
    notes.confidence = batch.confidence
    boost(batch)
    timing = time_stage(ranker, results, batch, warnings)  # recency and supersession
    notes.time = timing.report if timing is not None else None
    # near copies, diversity and the per-source cap; the top K (ends at "fusion")
    return select_batch(ranker, batch, timing)
