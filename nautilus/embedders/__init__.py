"""Embedders: text to vectors (``base`` protocols, ``hashing``, ``onnx``, ``registry``)."""

from nautilus.embedders.base import (
    Embedder,
    EmbeddingUnavailableError,
    NoopEmbedder,
    TokenEmbedder,
    embed_texts,
)
from nautilus.embedders.hashing import HashingEmbedder, SparseRows
from nautilus.embedders.registry import embedder_from_name

__all__ = [
    "Embedder",
    "EmbeddingUnavailableError",
    "HashingEmbedder",
    "NoopEmbedder",
    "SparseRows",
    "TokenEmbedder",
    "embed_texts",
    "embedder_from_name",
]
