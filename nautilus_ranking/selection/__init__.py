"""What of a ranking is handed over: a token budget and a relevance cut.

``tokens`` counts a text's tokens (exact with the ``tokens`` extra, else a documented
over-estimate); ``budget`` keeps the ranked rows that fit in ``max_tokens``; ``cut``
stops the ranking where relevance falls away. Pure functions over a ranked list: the
request path applies them after ranking (the cut, then the budget).
"""

from nautilus_ranking.selection.budget import (
    BudgetResult,
    apply_budget,
    entry_text,
    fit_budget,
    fit_counts,
    ranking_entry,
)
from nautilus_ranking.selection.cut import CUT_SETTINGS, RelevanceCut, parse_cut, relevance_cut
from nautilus_ranking.selection.tokens import count_tokens, estimate_tokens, tokenizer_name

__all__ = [
    "CUT_SETTINGS",
    "BudgetResult",
    "RelevanceCut",
    "apply_budget",
    "count_tokens",
    "entry_text",
    "estimate_tokens",
    "fit_budget",
    "fit_counts",
    "parse_cut",
    "ranking_entry",
    "relevance_cut",
    "tokenizer_name",
]
