"""Embedders by name: what ``NAUTILUS_EMBEDDER`` selects."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from nautilus_ranking.embedders.base import Embedder, NoopEmbedder
from nautilus_ranking.embedders.hashing import DEFAULT_DIM, MODEL_ID_PREFIX, HashingEmbedder

#: ``NAUTILUS_EMBEDDER`` values of the onnx embedder: whether its weight products run
#: in int8 (``onnx``, fast) or float32 (``onnx-float32``: the model file's own vectors,
#: those a vector table loaded before nautilus ran the products in int8 holds).
ONNX_INT8 = {"onnx": True, "onnx-float32": False}


def embedder_from_name(
    name: str,
    dim: int | None = None,
    cache_size: int = 10_000,
    data_dir: Path | None = None,
    disk_cache_mb: int = 0,
) -> Embedder:
    """The embedder ``NAUTILUS_EMBEDDER`` names (validated by the settings);
    ``dim`` sizes the hashing embedder (sources that store vectors want it small).
    ``data_dir`` and ``disk_cache_mb`` (``NAUTILUS_DATA_DIR``,
    ``NAUTILUS_EMBEDDER_DISK_CACHE_MB``): the model's vectors and rewritten graph kept
    on disk there (0 or no folder: not kept).

    ``onnx`` raises ``ImportError`` naming the extra when it is not installed.
    One ``onnx`` embedder is shared per cache setting, so the model loads once a process.
    """
    if name == "noop":
        return NoopEmbedder(strict=True)
    if name in ONNX_INT8:
        folder = data_dir.expanduser() if data_dir is not None and disk_cache_mb > 0 else None
        return _shared_onnx(cache_size, ONNX_INT8[name], folder, disk_cache_mb)
    return HashingEmbedder(dim=dim or DEFAULT_DIM)


def embedder_name_of(model_id: str) -> str | None:
    """The ``NAUTILUS_EMBEDDER`` value whose vectors carry ``model_id``, if one does (not
    an older hashing version's)."""
    dim = model_id.removeprefix(MODEL_ID_PREFIX)
    if dim != model_id:
        return "hashing" if dim.isascii() and dim.isdigit() else None
    from nautilus_ranking.embedders.onnx import INT8_MODEL_ID, MODEL_ID

    return {INT8_MODEL_ID: "onnx", MODEL_ID: "onnx-float32"}.get(model_id)


@lru_cache(maxsize=4)
def _shared_onnx(cache_size: int, int8: bool, folder: Path | None, disk_cache_mb: int) -> Embedder:
    from nautilus_ranking.embedders.onnx import DIM, OnnxEmbedder
    from nautilus_ranking.embedders.vector_cache import FILE_NAME, VectorCache

    if folder is None:
        return OnnxEmbedder(cache_size=cache_size, int8=int8)
    return OnnxEmbedder(
        cache_size=cache_size,
        int8=int8,
        disk_cache=VectorCache(folder / FILE_NAME, disk_cache_mb * 1_000_000, DIM),
        graph_dir=folder / "models",
    )
