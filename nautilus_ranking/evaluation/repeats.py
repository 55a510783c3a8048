"""Repeats: top-k slots spent on a copy of a row placed above it.

Judgments that credit every copy of a document make a ranking that hands an agent the
same text twice look better, never worse, so nDCG alone reads the near-copy collapse
as a loss. The repeats figure is what the collapse is for: a row is a repeat when its
text resembles a row above it in the top k by at least the collapse's ``on``
threshold (:data:`~nautilus_ranking.settings.parsing.NEAR_DUPLICATES_ON`), by the
collapse's own measure (word 3-shingles' Jaccard, :mod:`nautilus_ranking.synthesis.
near_duplicates`). A row's text is the collapse's (``candidates.resemblance_texts``:
its string values without ``id`` and its vector's fields), without the judged id field
either: an id names a row, it is not its content.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from nautilus_ranking.settings.parsing import NEAR_DUPLICATES_ON
from nautilus_ranking.synthesis.candidates import MAX_TEXT_CHARS, NOT_RESEMBLANCE
from nautilus_ranking.synthesis.near_duplicates import resemblance, shingles
from nautilus_ranking.text.tokens import TokenBatch


def _text(row: Mapping[str, Any], id_field: str) -> str:
    return " ".join(
        v
        for key, v in row.items()
        if isinstance(v, str) and key != id_field and key not in NOT_RESEMBLANCE
    )[:MAX_TEXT_CHARS]


def repeats_in_top(
    rows: Sequence[Mapping[str, Any]], id_field: str, k: int, threshold: float = NEAR_DUPLICATES_ON
) -> int:
    """How many of the first ``k`` rows resemble a row above them by ``threshold`` or more."""
    top = list(rows[:k])
    if len(top) < 2:
        return 0
    pairs = resemblance(shingles(TokenBatch.from_texts([_text(r, id_field) for r in top])))
    near = pairs.value >= threshold
    below = np.unique(np.maximum(pairs.a[near], pairs.b[near]))  # the lower row of each pair
    return len(below)
