"""What one ranking found, declared: the rows, their order and what the pass said.

``merge_ranked`` hands this back whole, so a caller reads what the ranking learned
(the relevance cut, the confidence, the embedding deadline's report, the time report)
from the value it was given, never from state a stage left behind. The abstain, the
rows it holds back and the budget are decided after the ranking, by
:func:`nautilus_ranking.synthesis.closing.close_ranking`, and filled in there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nautilus_ranking.records import RankedRow

if TYPE_CHECKING:
    from nautilus_ranking.selection.confidence import Confidence

Merged = dict[str, list[dict[str, Any]]]


@dataclass(frozen=True)
class RankingResult:
    """One ranking's answer. ``data``: ``{source_id: rows}``; ``ranking``: the rows
    best first; ``cut``: what the relevance cut left out (None: no cut); ``confidence``:
    how sure the ranking is (None: nothing scored); ``embedding``: what the embedding
    deadline did (None: every row embedded in time); ``time``: what recency and
    supersession did (None: neither set). Once closed: ``abstain`` (the decision, None
    without a confidence), ``nearest`` (the rows an abstained answer holds back) and
    ``budget`` (what the token budget did, None without one). ``rows_unchanged``: the
    rows in ``data`` are the sources' own objects, untouched (the built-in synthesizers
    say so; the broker then hashes the answer from the texts it hashed them with)."""

    data: Merged
    ranking: list[RankedRow]
    cut: dict[str, Any] | None = None
    confidence: Confidence | None = None
    embedding: dict[str, Any] | None = None
    time: dict[str, Any] | None = None
    abstain: dict[str, Any] | None = None
    nearest: list[RankedRow] = field(default_factory=list)
    budget: dict[str, Any] | None = None
    rows_unchanged: bool = False


@dataclass
class PassNotes:
    """What the ranking pass's stages say beside the order, filled in as they run."""

    confidence: Confidence | None = None
    embedding: dict[str, Any] | None = None
    time: dict[str, Any] | None = None
