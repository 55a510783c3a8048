"""``nautilus eval``: relevance and boost safety measured on an operator's own judgments.

The names below are imported on first use, so ``nautilus --help`` (which builds the
``eval`` parser from :mod:`nautilus.evaluation.command`) loads none of the evaluation.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nautilus.evaluation.evaluate import EvalResult, run_eval
    from nautilus.evaluation.judgments import EvalInputError, read_judgments, read_queries
    from nautilus.evaluation.metrics import ndcg_at, recall_at, reciprocal_rank

__all__ = [
    "EvalInputError",
    "EvalResult",
    "ndcg_at",
    "read_judgments",
    "read_queries",
    "recall_at",
    "reciprocal_rank",
    "run_eval",
]

_HOMES = {
    "EvalResult": "evaluate",
    "run_eval": "evaluate",
    "EvalInputError": "judgments",
    "read_judgments": "judgments",
    "read_queries": "judgments",
    "ndcg_at": "metrics",
    "recall_at": "metrics",
    "reciprocal_rank": "metrics",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'nautilus.evaluation' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"nautilus.evaluation.{home}"), name)
    globals()[name] = value
    return value
