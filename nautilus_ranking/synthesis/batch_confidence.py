"""The confidence stage: how sure the batch's ranking is, read from the reference rows
before any boost and kept for the answer (``selection/confidence.py`` holds the fit
and the abstain; this module reads the batch for it)."""

from __future__ import annotations

from nautilus_ranking.embedders.registry import embedder_name_of
from nautilus_ranking.selection import confidence
from nautilus_ranking.synthesis.batch import RankBatch, RankSettings
from nautilus_ranking.synthesis.query import TokensToWeight
from nautilus_ranking.text.tokens import tokenize


def keep_confidence(ranker: RankSettings, b: RankBatch) -> None:
    """Estimate the batch's confidence and keep it on the batch for the answer."""
    b.confidence = estimate(ranker, b)


def estimate(ranker: RankSettings, b: RankBatch) -> confidence.Confidence:
    """The batch's confidence, read from the reference rows before any boost. A query
    vector the caller brought has no known scale: its setup is ``unknown`` (no fit)."""
    own_query = b.query_in_embedder_space or isinstance(b.query, TokensToWeight)
    raw_query = b.ctx.get("query")
    query_tokens = b.query_tokens or (tokenize(raw_query) if isinstance(raw_query, str) else [])
    reference = b.where_ref
    model = getattr(ranker.embedder, "model_id", None)
    name = embedder_name_of(model) if own_query and isinstance(model, str) else None
    observed = confidence.signals(
        b.content_similarity[reference],
        b.lexical_score[reference] if b.lexical_score is not None else None,
        b.relevance[reference],
        b.voters[reference],
        b.sub_doc[reference],
        len(set(query_tokens)),
    )
    setup = confidence.setup_key(name, ranker.lexical, ranker.idf)
    return confidence.estimate(setup, observed, ranker.confidence_fits)
