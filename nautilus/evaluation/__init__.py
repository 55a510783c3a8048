"""``nautilus eval``: relevance and boost safety measured on an operator's own judgments."""

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
