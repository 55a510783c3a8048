"""The ranker's warnings, collected during a pass and logged from one place.

The stages (candidates, query, similarity) are pure: each reports what it found
wrong here, and :class:`~nautilus_ranking.synthesis.ranking.RankingSynthesizer` logs the
lot once the pass is over — one structured warning per kind of problem and call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nautilus_ranking.log import get_logger

logger = get_logger("nautilus_ranking.ranking")


@dataclass
class RankWarnings:
    """Warnings of one ranking pass, in the order they were found."""

    found: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def add(self, event: str, **fields: Any) -> None:
        self.found.append((event, fields))

    def embedder_failed(self, target: str, exc: BaseException, action: str, **fields: Any) -> None:
        """An embedder raised: third-party code never fails a request, it is reported."""
        self.add(
            "rank_embedder_failed",
            target=target,
            **fields,
            error_type=type(exc).__name__,
            error=str(exc)[:200],
            action=action,
        )

    def emit(self) -> None:
        """Log every warning found (and forget them)."""
        found, self.found = self.found, []
        for event, fields in found:
            logger.warning(event, **fields)
