"""Embedders: text to vectors.

The default, :class:`HashingEmbedder`, needs nothing but numpy: it is a lexical
embedder (feature hashing of words and word pairs), so it matches words, not
meanings — but it runs anywhere, offline, at hundreds of thousands of rows a
second, and it is deterministic across processes and machines.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from nautilus.synthesis.lexical import TokenBatch


class EmbeddingUnavailableError(RuntimeError):
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

    def embed_tokens(self, batch: TokenBatch) -> SparseRows: ...


@dataclass(frozen=True)
class SparseRows:
    """``n_rows`` vectors of ``dim`` dimensions as coordinate triples (row, column, value)."""

    n_rows: int
    dim: int
    rows: npt.NDArray[np.int64]
    columns: npt.NDArray[np.int64]
    values: npt.NDArray[np.float64]

    def dot(self, vector: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Each row's dot product with a dense ``vector``."""
        products = np.bincount(self.rows, weights=self.values * vector[self.columns],
                               minlength=self.n_rows)
        return products.astype(np.float64, copy=False)

    def dense(self) -> npt.NDArray[np.float64]:
        out = np.zeros((self.n_rows, self.dim), dtype=np.float64)
        np.add.at(out, (self.rows, self.columns), self.values)
        return out


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
                "NAUTILUS_EMBEDDER=hashing")
        return [0.0] * self.dim


@lru_cache(maxsize=1 << 18)
def _term_hash(term: str) -> int:
    """A stable 32-bit hash (Python's ``hash`` is salted per process)."""
    return zlib.crc32(term.encode("utf-8"))


class HashingEmbedder:
    """Feature hashing of word unigrams and bigrams, log term frequency, L2-normalised.

    Each feature goes to bucket ``h mod dim`` with sign ``±1`` from another bit of
    ``h`` (so collisions cancel on average instead of adding up). Bigrams
    (``"disk full"``) reward phrase matches. ``dim`` trades collisions for size:
    1024 keeps a query's dozen features nearly collision-free in a batch and a
    stored vector at 8 KiB.
    """

    def __init__(self, dim: int = 1024, bigrams: bool = True) -> None:
        if dim < 16:
            raise ValueError(f"HashingEmbedder dim must be >= 16, got {dim}")
        self.dim = dim
        self.bigrams = bigrams
        self.model_id = f"hashing-v1-{dim}{'' if bigrams else '-unigram'}"

    def embed(self, text: str) -> list[float]:
        return [float(x) for x in self.embed_batch([text])[0]]

    def embed_batch(self, texts: list[str]) -> npt.NDArray[np.float64]:
        return self.embed_tokens(TokenBatch.from_texts(texts)).dense()

    def embed_tokens(self, batch: TokenBatch) -> SparseRows:
        vocab_terms = list(batch.vocab)
        term_hashes = np.fromiter((_term_hash(t) for t in vocab_terms), dtype=np.uint64,
                                  count=len(vocab_terms))
        rows, terms, counts = batch.pairs()
        feature_rows = [rows]
        feature_hashes = [term_hashes[terms]]
        feature_counts = [counts]
        if self.bigrams and len(batch.terms) > 1:
            b_rows, first, second = batch.bigrams()
            mixed = (term_hashes[first] * np.uint64(1000003)) ^ term_hashes[second]
            width = np.uint64(1 << 32)
            keys, b_counts = np.unique(b_rows.astype(np.uint64) * width + (mixed % width),
                                       return_counts=True)
            feature_rows.append((keys // width).astype(np.int64))
            feature_hashes.append(keys % width)
            feature_counts.append(b_counts.astype(np.int64))
        all_rows = np.concatenate(feature_rows)
        hashes = np.concatenate(feature_hashes)
        weights = 1.0 + np.log(np.concatenate(feature_counts).astype(np.float64))
        signs = np.where((hashes >> np.uint64(31)) & np.uint64(1), -1.0, 1.0)
        columns = (hashes % np.uint64(self.dim)).astype(np.int64)
        # Sum features that share a (row, bucket), then L2-normalise each row.
        keys, inverse = np.unique(all_rows * self.dim + columns, return_inverse=True)
        values = np.bincount(inverse, weights=weights * signs, minlength=len(keys))
        out_rows = keys // self.dim
        norms = np.sqrt(np.bincount(out_rows, weights=values * values, minlength=batch.n_texts))
        safe = np.where(norms > 0, norms, 1.0)
        return SparseRows(batch.n_texts, self.dim, out_rows, keys % self.dim,
                          values / safe[out_rows])


def embedder_from_name(name: str) -> Embedder:
    """The embedder ``NAUTILUS_EMBEDDER`` names (validated by the settings)."""
    if name == "noop":
        return NoopEmbedder(strict=True)
    return HashingEmbedder()
