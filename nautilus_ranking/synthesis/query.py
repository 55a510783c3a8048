"""The query vector: the caller's ``context["embedding"]``, else the embedder on the query.

A lexical embedder with IDF on defers it: the query's tokens are embedded once,
with the batch's IDF weights, after the batch statistics exist.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nautilus_ranking.embedders import Embedder, is_token_embedder
from nautilus_ranking.synthesis.rank_warnings import RankWarnings
from nautilus_ranking.synthesis.vectors import QueryVector, as_vector, vector_problem
from nautilus_ranking.text.tokens import tokenize

#: A query is cut to this many characters before tokenising or embedding.
MAX_QUERY_CHARS = 20_000


@dataclass(frozen=True)
class TokensToWeight:
    """A lexical embedder's query not embedded yet: its tokens, to embed once with the
    batch's IDF weights (embedding it plainly first would be thrown away)."""

    tokens: list[str]


def query_vector(
    embedder: Embedder,
    idf: bool,
    ctx: Mapping[str, Any],
    warnings: RankWarnings,
) -> tuple[QueryVector | TokensToWeight | None, bool]:
    """(query vector, whether it is in the embedder's own space); None: no ranking. With
    IDF on, a lexical embedder's query is left as its tokens, to embed once with the
    batch's weights: a query with tokens always embeds to a usable vector (see
    :func:`weighted_query`)."""
    given = ctx.get("embedding")
    if given is not None:
        vector = as_vector(given)
        if vector is not None:
            return vector, False
        warnings.add(
            "rank_query_vector_invalid",
            reason=vector_problem(given),
            action="embedding the query text instead",
        )
    query = ctx.get("query")
    if not isinstance(query, str) or not query.strip():
        warnings.add(
            "rank_no_query_vector",
            reason="context has neither a usable 'embedding' nor a 'query'",
            action="passthrough",
        )
        return None, True
    try:
        if is_token_embedder(embedder):  # a sparse vector: no list of 65,536 floats
            tokens = tokenize(query[:MAX_QUERY_CHARS])
            if idf and tokens:
                return TokensToWeight(tokens), True
            vector = as_vector(embedder.embed_query(tokens, {}))
        else:
            vector = as_vector(embedder.embed(query[:MAX_QUERY_CHARS]))
    except Exception as exc:  # an embedder is third-party code: never let it fail a request
        warnings.embedder_failed("query", exc, action="passthrough")
        return None, True
    if vector is None:
        _no_usable_vector(warnings)
    return vector, True


def weighted_query(
    embedder: Embedder, tokens: list[str], weights: Mapping[str, float], warnings: RankWarnings
) -> QueryVector | None:
    """The query's tokens embedded with these weights (its plain vector if the weighted
    one is unusable); None, with a warning, when the embedder fails or gives nothing."""
    if not is_token_embedder(embedder):
        return None
    try:
        vector = as_vector(embedder.embed_query(tokens, weights))
        if vector is None and weights:
            vector = as_vector(embedder.embed_query(tokens, {}))
    except Exception as exc:  # an embedder is third-party code: never let it fail a request
        warnings.embedder_failed("query", exc, action="passthrough")
        return None
    if vector is None:
        _no_usable_vector(warnings)
    return vector


def _no_usable_vector(warnings: RankWarnings) -> None:
    warnings.add(
        "rank_query_vector_invalid",
        reason="the embedder gave no usable vector",
        action="passthrough",
    )
