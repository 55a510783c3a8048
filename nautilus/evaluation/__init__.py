"""``nautilus eval``: relevance and boost safety measured on an operator's own judgments.

The names below are imported on first use, so ``nautilus --help`` (which builds the
``eval`` parser from :mod:`nautilus.evaluation.command`) loads none of the evaluation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nautilus.lazy import lazy_getattr

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
    "EvalResult": "nautilus.evaluation.evaluate",
    "run_eval": "nautilus.evaluation.evaluate",
    "EvalInputError": "nautilus.evaluation.judgments",
    "read_judgments": "nautilus.evaluation.judgments",
    "read_queries": "nautilus.evaluation.judgments",
    "ndcg_at": "nautilus.evaluation.metrics",
    "recall_at": "nautilus.evaluation.metrics",
    "reciprocal_rank": "nautilus.evaluation.metrics",
}


__getattr__ = lazy_getattr(__name__, _HOMES, globals())
