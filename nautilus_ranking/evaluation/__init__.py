"""``nautilus-ranking eval``: relevance and boost safety measured on an operator's own judgments.

The names below are imported on first use, so ``nautilus-ranking --help`` (which builds the
``eval`` parser from :mod:`nautilus_ranking.evaluation.command`) loads none of the evaluation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nautilus_ranking.lazy import lazy_getattr

if TYPE_CHECKING:
    from nautilus_ranking.evaluation.evaluate import EvalResult, run_eval
    from nautilus_ranking.evaluation.judgments import EvalInputError, read_judgments, read_queries
    from nautilus_ranking.evaluation.metrics import ndcg_at, recall_at, reciprocal_rank

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
    "EvalResult": "nautilus_ranking.evaluation.evaluate",
    "run_eval": "nautilus_ranking.evaluation.evaluate",
    "EvalInputError": "nautilus_ranking.evaluation.judgments",
    "read_judgments": "nautilus_ranking.evaluation.judgments",
    "read_queries": "nautilus_ranking.evaluation.judgments",
    "ndcg_at": "nautilus_ranking.evaluation.metrics",
    "recall_at": "nautilus_ranking.evaluation.metrics",
    "reciprocal_rank": "nautilus_ranking.evaluation.metrics",
}


__getattr__ = lazy_getattr(__name__, _HOMES, globals())
