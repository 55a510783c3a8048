"""Vector arithmetic of the ranker: checks, unit vectors, and cosine products that stay
in float64 without starting BLAS threads on small batches."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from nautilus_ranking.embedders import SparseVector
from nautilus_ranking.text.arrays import FloatArray

#: A query vector: dense (given by the caller, or from a dense embedder) or sparse
#: (a lexical embedder's few hashed features out of 65,536 dimensions).
QueryVector = FloatArray | SparseVector

#: Below this many matrix entries a matrix-vector product is an ``einsum`` on this
#: thread, not a BLAS call: OpenBLAS splits even a 40 × 384 ``gemv`` over all
#: cores, and under load its threads wait for each other (milliseconds, not µs).
_BLAS_MIN_ENTRIES = 1 << 20
#: Rows converted to float64 at a time for the cosine products (256 × 384 floats:
#: 768 KB, within the L2 cache).
_BLOCK_ROWS = 256
_VECDOT: Any = getattr(np, "vecdot", None)  # numpy >= 2.0


def as_vector(value: Any) -> QueryVector | None:
    """A finite, non-zero float64 vector (dense, or sparse as a lexical embedder gives), or None."""
    if vector_problem(value) is not None:
        return None
    if isinstance(value, SparseVector):
        return value
    array = np.asarray(value, dtype=np.float64)
    peak = float(np.abs(array).max())
    # Only the direction counts: bring extreme magnitudes (1e200, 1e-200) into a range
    # where the squared norm neither overflows nor underflows.
    return array / peak if not 1e-100 < peak < 1e100 else array


def vector_problem(value: Any) -> str | None:
    """What makes ``value`` unusable as a vector, or None."""
    if isinstance(value, SparseVector):
        values = value.values
        if not np.isfinite(values).all():
            return "holds NaN or infinity"
        return None if values.any() else "is all zeros"
    if not isinstance(value, list | tuple | np.ndarray):
        return f"not a list of numbers ({type(value).__name__})"
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        return "holds non-numeric values (or numbers beyond float64)"
    if array.ndim != 1 or array.size == 0:
        return f"not a flat vector (shape {array.shape})"
    if not np.isfinite(array).all():
        return "holds NaN or infinity"
    if not np.any(array):
        return "is all zeros"
    return None


def unit(vector: QueryVector) -> QueryVector:
    """``vector / |vector|`` without BLAS (``np.linalg.norm`` of a long vector is a
    multi-threaded ``ddot``) and, for a sparse vector, without densifying it."""
    if isinstance(vector, SparseVector):
        return SparseVector(vector.dim, vector.columns, vector.values / vector.norm())
    unit_vector: FloatArray = vector / math.sqrt(float(np.einsum("i,i", vector, vector)))
    return unit_vector


def matvec(matrix: npt.NDArray[np.floating[Any]], vector: QueryVector) -> FloatArray:
    """``matrix @ vector`` in float64; a BLAS call only for a large matrix (see
    ``_BLAS_MIN_ENTRIES``); a sparse vector touches only its own columns."""
    if isinstance(vector, SparseVector):
        product: FloatArray = np.einsum(
            "ij,j->i", matrix[:, vector.columns], vector.values, dtype=np.float64
        )
        return product
    if matrix.size < _BLAS_MIN_ENTRIES or matrix.dtype != np.float64:
        product = np.einsum("ij,j->i", matrix, vector, dtype=np.float64)
        return product
    product = (matrix @ vector).astype(np.float64, copy=False)
    return product


def dots_and_norms(
    blocks: Iterator[npt.NDArray[np.float64]], n: int, query: QueryVector
) -> tuple[FloatArray, FloatArray]:
    """(each row · ``query``, each row's norm) for ``n`` rows given as consecutive float64
    blocks, accumulated in float64.

    A row at a time (``np.vecdot``: one single-threaded ``ddot`` a row, with SIMD):
    about twice as fast as ``einsum``, and never a multi-threaded BLAS ``gemv``
    (see ``_BLAS_MIN_ENTRIES``), whatever the size."""
    dots = np.empty(n, dtype=np.float64)
    squares = np.empty(n, dtype=np.float64)
    start = 0
    for block in blocks:
        stop = start + len(block)
        if isinstance(query, SparseVector):
            dots[start:stop] = np.einsum("ij,j->i", block[:, query.columns], query.values)
        else:
            dots[start:stop] = _row_dot(block, query)
        squares[start:stop] = _row_dot(block, block)
        start = stop
    return dots, np.sqrt(squares, out=squares)


def _row_dot(a: FloatArray, b: FloatArray) -> FloatArray:
    """``a[i] · b[i]`` (``b`` broadcast) for each row ``i``: ``np.vecdot`` (numpy >= 2),
    else ``einsum``."""
    if _VECDOT is not None:
        out: FloatArray = _VECDOT(a, b)
        return out
    out = np.einsum("ij,ij->i" if b.ndim == 2 else "ij,j->i", a, b)
    return out


def matrix_blocks(matrix: npt.NDArray[Any]) -> Iterator[npt.NDArray[np.float64]]:
    """``matrix`` as float64 blocks of ``_BLOCK_ROWS`` rows: views when it is float64
    already, else converted into one reused block (a block stays in the CPU cache, so
    the dots and the norms read it there, where a whole float64 copy would not fit;
    ``einsum(..., dtype=float64)`` casts through a small buffer, several times slower)."""
    if matrix.dtype == np.float64:
        for start in range(0, len(matrix), _BLOCK_ROWS):
            yield matrix[start : start + _BLOCK_ROWS]
        return
    buffer = np.empty((min(len(matrix), _BLOCK_ROWS), matrix.shape[1]), dtype=np.float64)
    for start in range(0, len(matrix), _BLOCK_ROWS):
        part = matrix[start : start + _BLOCK_ROWS]
        block = buffer[: len(part)]
        np.copyto(block, part, casting="unsafe")
        yield block


def gathered_blocks(vectors: list[npt.NDArray[Any]], dim: int) -> Iterator[npt.NDArray[np.float64]]:
    """Row vectors (1-d arrays of length ``dim``) gathered ``_BLOCK_ROWS`` at a time into
    one reused float64 block: no matrix of every row (10k × 384 floats is a 30 MB
    allocation, its pages faulted in on every call). Raises TypeError for a vector
    numpy does not cast to float64 by itself (object, complex)."""
    buffer = np.empty(min(len(vectors), _BLOCK_ROWS) * dim, dtype=np.float64)
    for start in range(0, len(vectors), _BLOCK_ROWS):
        part = vectors[start : start + _BLOCK_ROWS]
        flat = buffer[: len(part) * dim]
        np.concatenate(part, out=flat, casting="same_kind")
        yield flat.reshape(len(part), dim)


def stack(vectors: list[Any], dim: int) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    """Stack row vectors of any kind into a matrix; rows that do not fit are flagged."""
    matrix = np.zeros((len(vectors), dim), dtype=np.float64)
    ok = np.zeros(len(vectors), dtype=bool)
    try:
        if all(isinstance(v, list | tuple) and len(v) == dim for v in vectors):
            matrix = np.array(vectors, dtype=np.float64).reshape(len(vectors), dim)
            ok[:] = True
            return matrix, ok
    except (TypeError, ValueError, OverflowError):
        pass
    for i, vector in enumerate(vectors):
        if (
            not isinstance(vector, list | tuple | np.ndarray)
            or getattr(vector, "ndim", 1) != 1
            or len(vector) != dim
        ):
            continue
        try:
            row = np.asarray(vector, dtype=np.float64)
        except (TypeError, ValueError, OverflowError):
            continue
        if row.shape == (dim,):
            matrix[i] = row
            ok[i] = True
    return matrix, ok
