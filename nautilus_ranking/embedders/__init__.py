"""Embedders: text to vectors (``base`` protocols, ``hashing``, ``onnx``, ``registry``)."""

from nautilus_ranking.embedders.base import (
    Embedder,
    EmbeddingUnavailableError,
    NoopEmbedder,
    TokenEmbedder,
    embed_texts,
    is_token_embedder,
)
from nautilus_ranking.embedders.hashing import HashingEmbedder, SparseRows, SparseVector
from nautilus_ranking.embedders.registry import embedder_from_name

__all__ = [
    "Embedder",
    "EmbeddingUnavailableError",
    "HashingEmbedder",
    "NoopEmbedder",
    "SparseRows",
    "SparseVector",
    "TokenEmbedder",
    "embed_texts",
    "embedder_from_name",
    "is_token_embedder",
]
