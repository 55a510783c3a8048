"""Embedders by name: what ``NAUTILUS_EMBEDDER`` selects."""

from __future__ import annotations

from functools import lru_cache

from nautilus.embedders.base import Embedder, NoopEmbedder
from nautilus.embedders.hashing import DEFAULT_DIM, HashingEmbedder


def embedder_from_name(name: str, dim: int | None = None, cache_size: int = 10_000) -> Embedder:
    """The embedder ``NAUTILUS_EMBEDDER`` names (validated by the settings);
    ``dim`` sizes the hashing embedder (sources that store vectors want it small).

    ``onnx`` raises ``ImportError`` naming the extra when it is not installed.
    One ``onnx`` embedder is shared per cache size, so the model loads once a process.
    """
    if name == "noop":
        return NoopEmbedder(strict=True)
    if name == "onnx":
        return _shared_onnx(cache_size)
    return HashingEmbedder(dim=dim or DEFAULT_DIM)


@lru_cache(maxsize=4)
def _shared_onnx(cache_size: int) -> Embedder:
    from nautilus.embedders.onnx import OnnxEmbedder
    return OnnxEmbedder(cache_size=cache_size)
