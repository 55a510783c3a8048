"""Cosine similarity of every candidate to the query.

A row's own vector counts when it is in the query's space (its ``embedding``, or its
row of the source's ``embeddings`` matrix; a row naming another model than the
embedder's is re-embedded); every other row is embedded from its text. A vector
that is unusable falls back to the text; an embedder that fails scores its rows 0.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from itertools import repeat
from operator import is_not, methodcaller
from typing import Any

import numpy as np

from nautilus_ranking.embedders import (
    Embedder,
    HashingEmbedder,
    SparseRows,
    SparseVector,
    embed_texts,
    is_token_embedder,
)
from nautilus_ranking.synthesis.candidates import Candidates, Matrices, row_texts
from nautilus_ranking.synthesis.rank_warnings import RankWarnings
from nautilus_ranking.synthesis.vectors import (
    QueryVector,
    dots_and_norms,
    gathered_blocks,
    matrix_blocks,
    matvec,
    stack,
    unit,
)
from nautilus_ranking.text.arrays import FloatArray, IntArray
from nautilus_ranking.text.tokens import TokenBatch

_EMBEDDING_OF = methodcaller("get", "embedding")


def similarities(
    cands: Candidates,
    embedder: Embedder,
    query: QueryVector,
    query_in_embedder_space: bool,
    texts: list[str] | None,
    batch: TokenBatch | None,
    warnings: RankWarnings,
    deadline_ms: int = 0,
    embed_only: IntArray | None = None,
) -> tuple[FloatArray, list[str] | None, TokenBatch | None, IntArray]:
    """Cosine similarity of each candidate to the query; every candidate's text and
    tokens, when they were given or built here (else None); and the positions of the
    rows the embedder did not reach within ``deadline_ms``, or that ``embed_only`` (the
    positions the embedder may embed; None: all) leaves out (scored 0 here).

    ``texts``/``batch``: every candidate's text and tokens when already built."""
    n = len(cands.rows)
    dim = query.shape[0]
    query_unit = unit(query)
    similarity = np.zeros(n, dtype=np.float64)
    own_model = getattr(embedder, "model_id", None) if query_in_embedder_space else None

    with_vector, sims, invalid = _vector_similarities(cands, query_unit, own_model, warnings)
    similarity[with_vector] = sims
    if invalid:
        warnings.add(
            "rank_row_vector_invalid",
            count=invalid,
            reason=f"not a finite numeric vector of dimension {dim}",
            action="embedding the row's text instead",
        )
    has_vector = np.zeros(n, dtype=bool)
    has_vector[with_vector] = True
    to_embed = np.flatnonzero(~has_vector)
    late: IntArray = np.zeros(0, dtype=np.intp)
    if embed_only is not None:
        late = np.setdiff1d(to_embed, embed_only)
        to_embed = np.intersect1d(to_embed, embed_only)
    if len(to_embed):
        covers_all = texts is not None
        if texts is None:
            texts = row_texts([cands.rows[i] for i in to_embed.tolist()], warnings)
            batch = TokenBatch.from_texts(texts) if is_token_embedder(embedder) else None
        embedded = _embed_rows(
            embedder,
            texts,
            batch,
            to_embed,
            covers_all,
            query_unit,
            query_in_embedder_space,
            warnings,
            deadline_ms,
        )
        unreached = np.isnan(embedded)
        late = np.union1d(late, to_embed[unreached])
        similarity[to_embed] = np.where(unreached, 0.0, embedded)
        if not covers_all and len(to_embed) < n:  # texts of some candidates only
            texts, batch = None, None
    if not np.isfinite(similarity).all():  # (nan_to_num alone costs ~10 µs a request)
        similarity = np.nan_to_num(similarity, nan=0.0, posinf=0.0, neginf=0.0)
    return similarity, texts, batch, late


#: The lexical similarity beside a model's: the default embedder's IDF-weighted cosine.
_LEXICAL = HashingEmbedder()
#: The dimension of :func:`lexical_vectors`.
LEXICAL_DIM = _LEXICAL.dim


def lexical_similarities(
    batch: TokenBatch, query_tokens: list[str], weights: Mapping[str, float]
) -> FloatArray | None:
    """Each text's lexical similarity to the query: the cosine of the default hashing
    embedder's vectors, the query's tokens weighted by ``weights`` (the batch's IDF
    weights, or none). Computed beside a model's (semantic) similarity, so content has
    a lexical and a semantic score for every row, as a BM25 and a vector index each give
    only their own rows; None when the query has no tokens."""
    query = lexical_query(query_tokens, weights)
    if query is None:
        return None
    return lexical_vectors(batch).dot_sparse(query)


def lexical_query(query_tokens: list[str], weights: Mapping[str, float]) -> SparseVector | None:
    """The query's unit vector for :func:`lexical_similarities` (its tokens weighted by
    ``weights``); None when it has no tokens, or no features."""
    if not query_tokens:
        return None
    query = _LEXICAL.embed_query(query_tokens, weights)
    if len(query.columns) == 0:
        return None
    return SparseVector(query.dim, query.columns, query.values / query.norm())


def lexical_vectors(batch: TokenBatch) -> SparseRows:
    """Each text's unit vector for :func:`lexical_similarities`: its words' alone, the
    same whatever the query or the batch (the IDF weights are on the query's side)."""
    return _LEXICAL.embed_tokens(batch)


def text_similarities(
    embedder: Embedder,
    texts: list[str],
    query_unit: QueryVector,
    query_in_embedder_space: bool,
    warnings: RankWarnings,
    deadline_ms: int = 0,
) -> FloatArray:
    """Cosine of each text, embedded by ``embedder``, to the query (a row's passages);
    NaN for a text not reached within ``deadline_ms`` (0: no deadline)."""
    return _embed_rows(
        embedder,
        texts,
        None,
        np.arange(len(texts), dtype=np.intp),
        False,
        query_unit,
        query_in_embedder_space,
        warnings,
        deadline_ms,
    )


def _embed_rows(
    embedder: Embedder,
    texts: list[str],
    batch: TokenBatch | None,
    to_embed: IntArray,
    texts_cover_all: bool,
    query_unit: QueryVector,
    query_in_embedder_space: bool,
    warnings: RankWarnings,
    deadline_ms: int = 0,
) -> FloatArray:
    """Similarity of the rows in ``to_embed`` through the embedder; zeros where it fails,
    NaN where an embedder that keeps a deadline (``embed_batch(texts, deadline)``) did
    not reach the row within ``deadline_ms`` (0: no deadline)."""
    dim = query_unit.shape[0]
    zeros = np.zeros(len(to_embed), dtype=np.float64)
    embedder_dim = getattr(embedder, "dim", None)
    if not query_in_embedder_space and embedder_dim is not None and embedder_dim != dim:
        warnings.add(
            "rank_row_vector_missing",
            count=len(to_embed),
            reason=f"query vector has dimension {dim}, the embedder {embedder_dim}",
            action="scored 0",
        )
        return zeros
    try:
        if is_token_embedder(embedder) and batch is not None:
            rows = embedder.embed_tokens(batch)
            sims = (
                rows.dot_sparse(query_unit)
                if isinstance(query_unit, SparseVector)
                else rows.dot(query_unit)
            )
            return sims[to_embed] if texts_cover_all else sims
        picked = [texts[i] for i in to_embed] if texts_cover_all else texts
        if deadline_ms > 0 and getattr(embedder, "keeps_deadline", False):
            deadline = time.perf_counter() + deadline_ms / 1000
            matrix = np.asarray(embedder.embed_batch(picked, deadline), dtype=np.float64)  # type: ignore[attr-defined]
        else:
            matrix = embed_texts(embedder, picked)
        if matrix.shape != (len(picked), dim):
            raise ValueError(
                f"embedder returned shape {matrix.shape}, expected {(len(picked), dim)}"
            )
    except Exception as exc:
        warnings.embedder_failed("rows", exc, action="those rows scored 0", count=len(to_embed))
        return zeros
    unreached = np.isnan(matrix).all(axis=1) if deadline_ms > 0 else None
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
    finite = np.isfinite(norms) & (norms > 0)
    similarity: FloatArray = np.divide(matvec(matrix, query_unit), norms, out=zeros, where=finite)
    if unreached is not None and unreached.any():
        similarity[unreached] = np.nan
    return similarity


def _vector_similarities(
    cands: Candidates, query_unit: QueryVector, own_model: str | None, warnings: RankWarnings
) -> tuple[IntArray, FloatArray, int]:
    """:func:`_row_vector_similarities`, with the rows whose source handed its vectors
    over as a matrix (``AdapterResult.embeddings``) scored from that matrix instead."""
    matrices = cands.matrices
    if matrices is None:
        return _row_vector_similarities(cands.rows, query_unit, own_model, cands.plain)
    positions, sims, invalid = _matrix_similarities(
        matrices, cands.rows, query_unit, own_model, warnings
    )
    rest = np.ones(len(cands.rows), dtype=bool)
    rest[positions] = False
    others = np.flatnonzero(rest)
    if len(others):
        found, other_sims, other_invalid = _row_vector_similarities(
            [cands.rows[i] for i in others.tolist()], query_unit, own_model, cands.plain
        )
        positions = np.concatenate((positions, others[found]))
        sims = np.concatenate((sims, other_sims))
        invalid += other_invalid
    return positions, sims, invalid


def _matrix_problem(matrix: Any, given: int, dim: int) -> str | None:
    if not isinstance(matrix, np.ndarray):
        return f"not a numpy array ({type(matrix).__name__})"
    if matrix.dtype.kind not in "fiu":
        return f"not numeric (dtype {matrix.dtype})"
    if matrix.shape != (given, dim):
        return f"shape {matrix.shape}, expected {(given, dim)} (rows given, query dimension)"
    return None


def _matrix_similarities(
    matrices: Matrices,
    rows: list[dict[str, Any]],
    query_unit: QueryVector,
    own_model: str | None,
    warnings: RankWarnings,
) -> tuple[IntArray, FloatArray, int]:
    """Cosine of each matrix-backed candidate to the query: (their positions, their
    similarities, how many matrix rows were not finite). A matrix of the wrong shape
    or kind is warned about once and its rows fall back to their own ``embedding``."""
    dim = query_unit.shape[0]
    found: list[IntArray] = []
    sims: list[FloatArray] = []
    invalid = 0
    for m, (matrix, given) in enumerate(matrices.parts):
        at = np.flatnonzero(matrices.matrix_of == m)
        if not len(at):
            continue
        problem = _matrix_problem(matrix, given, dim)
        if problem is not None:
            warnings.add(
                "rank_embeddings_invalid",
                reason=problem,
                action="using each row's own embedding or text instead",
            )
            continue
        if own_model is not None:  # as for row vectors: another model's vectors are not used
            models = [rows[i].get("embedding_model", own_model) for i in at.tolist()]
            at = at[np.array([model == own_model for model in models], dtype=bool)]
        picked = matrices.row_in[at]
        whole = len(picked) == len(matrix) and bool((picked == np.arange(len(matrix))).all())
        part = matrix if whole else matrix[picked]
        with np.errstate(invalid="ignore", over="ignore"):
            dots, norms = dots_and_norms(matrix_blocks(part), len(part), query_unit)
        usable = np.isfinite(dots) & np.isfinite(norms)
        if not usable.all():  # NaN or infinity inside a vector: its row falls back
            invalid += int((~usable).sum())
            at, dots, norms = at[usable], dots[usable], norms[usable]
        found.append(at)
        sims.append(np.divide(dots, norms, out=np.zeros(len(dots)), where=norms > 0))
    if not found:
        return np.zeros(0, dtype=np.int64), np.zeros(0), invalid
    return np.concatenate(found), np.concatenate(sims), invalid


def _row_vector_similarities(
    rows: list[dict[str, Any]],
    query_unit: QueryVector,
    own_model: str | None,
    plain: bool = False,
) -> tuple[IntArray, FloatArray, int]:
    """Cosine of each row's own ``embedding`` to the query, for the rows whose vector
    is usable: (their positions, their similarities, how many vectors were invalid).

    A row's vector is skipped (re-embedded from its text) when it is missing, or
    when ``own_model`` is set and the row says another model made it. ``plain``: every
    row is known to be a plain dict.
    """
    dim = query_unit.shape[0]
    # map and C-level helpers: ~25 ns a row with dict.get, which only a plain dict may take
    # (a dict subclass may define its own get), ~100 ns through methodcaller
    values: list[Any] = (
        list(map(dict.get, rows, repeat("embedding")))
        if plain or set(map(type, rows)) == {dict}
        else list(map(_EMBEDDING_OF, rows))
    )
    types = set(map(type, values))
    present = [] if type(None) not in types else list(map(is_not, values, repeat(None)))
    if all(present):
        candidates = np.arange(len(rows), dtype=np.int64)
    else:
        candidates = np.flatnonzero(np.array(present, dtype=bool))
    if own_model is not None and len(candidates):
        models = [rows[i].get("embedding_model", own_model) for i in candidates.tolist()]
        candidates = candidates[np.array([m == own_model for m in models], dtype=bool)]
    if not len(candidates):
        return candidates, np.zeros(0), 0
    if len(candidates) == len(values):
        picked = values
    else:
        picked = [values[i] for i in candidates.tolist()]
        types = set(map(type, picked))
    products: tuple[FloatArray, FloatArray] | None = None
    invalid = 0
    with np.errstate(invalid="ignore", over="ignore"):  # non-finite rows are dropped next
        if types == {np.ndarray}:  # the fast path: no matrix of all rows
            try:  # a 0-d array has no len(); a vector that is not flat, or does not cast
                # to float64 by itself (object, complex), fails the gathering: the slow path
                if set(map(len, picked)) == {dim}:
                    products = dots_and_norms(gathered_blocks(picked, dim), len(picked), query_unit)
            except (ValueError, TypeError):
                products = None
        if products is None:
            matrix, ok = stack(picked, dim)
            invalid = len(candidates) - int(ok.sum())
            matrix, candidates = matrix[ok], candidates[ok]
            products = dots_and_norms(matrix_blocks(matrix), len(matrix), query_unit)
    dots, norms = products
    usable = np.isfinite(dots) & np.isfinite(norms)
    if not usable.all():  # NaN or infinity inside a vector: its row falls back to its text
        invalid += int((~usable).sum())
        candidates, dots, norms = candidates[usable], dots[usable], norms[usable]
    sims: FloatArray = np.divide(dots, norms, out=np.zeros(len(dots)), where=norms > 0)
    return candidates, sims, invalid
