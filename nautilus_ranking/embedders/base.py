"""The embedder protocols and the helpers every embedder shares.

An embedder turns text into vectors. Three ship with nautilus-ranking: ``hashing`` (the
default, lexical, numpy only), ``onnx`` (all-MiniLM-L6-v2, the ``embed`` extra)
and ``noop``; :func:`nautilus_ranking.embedders.registry.embedder_from_name` picks one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, TypeGuard, runtime_checkable

import numpy as np
import numpy.typing as npt

from nautilus_ranking.errors import NautilusError
from nautilus_ranking.text.tokens import TokenBatch

if TYPE_CHECKING:
    from nautilus_ranking.embedders.hashing import SparseRows, SparseVector


class EmbeddingUnavailableError(NautilusError, RuntimeError):
    """No embedding can be had (e.g. the no-op embedder in strict mode)."""


@runtime_checkable
class Embedder(Protocol):
    """Anything with ``embed(text) -> list[float]``.

    An embedder may also offer ``embed_batch(texts) -> ndarray (n, dim)``; the
    synthesizer uses it when present. ``model_id`` (optional) names the vector
    space, so vectors from different models are never compared.
    """

    def embed(self, text: str) -> list[float]: ...


@runtime_checkable
class TokenEmbedder(Protocol):
    """An embedder that can embed a pre-tokenised batch sparsely (the fast path)."""

    dim: int
    model_id: str

    def embed_tokens(
        self, batch: TokenBatch, token_weights: Mapping[str, float] | None = None
    ) -> SparseRows: ...

    def embed_weighted(
        self, tokens: list[str], weights: Mapping[str, float]
    ) -> npt.NDArray[np.float64]: ...

    def embed_query(self, tokens: list[str], weights: Mapping[str, float]) -> SparseVector: ...


def is_token_embedder(embedder: object) -> TypeGuard[TokenEmbedder]:
    """``isinstance(embedder, TokenEmbedder)`` in a microsecond: a runtime protocol check
    walks the protocol's members each time (~50 µs, a twentieth of a small request)."""
    return (
        callable(getattr(embedder, "embed_tokens", None))
        and callable(getattr(embedder, "embed_query", None))
        and callable(getattr(embedder, "embed_weighted", None))
        and hasattr(embedder, "dim")
        and hasattr(embedder, "model_id")
    )


class NoopEmbedder:
    """An embedder that has no embeddings: strict raises, non-strict gives zeros."""

    model_id = "noop"

    def __init__(self, strict: bool = True, dim: int = 1) -> None:
        self.strict = strict
        self.dim = dim

    def embed(self, text: str) -> list[float]:
        if self.strict:
            raise EmbeddingUnavailableError(
                "NoopEmbedder has no embeddings; pass context['embedding'] or choose "
                "NAUTILUS_EMBEDDER=hashing"
            )
        return [0.0] * self.dim


def embed_texts(embedder: Embedder, texts: list[str]) -> npt.NDArray[np.float64]:
    """Vectors of many texts: the embedder's ``embed_batch`` when it has one, else ``embed``."""
    embed_batch = getattr(embedder, "embed_batch", None)
    if callable(embed_batch):
        return np.asarray(embed_batch(texts), dtype=np.float64)
    return np.array([embedder.embed(t) for t in texts], dtype=np.float64)
