"""What one request's ranking was, beside the broker's response: ``RequestRanking``.

The broker's response model is the broker's: ``data`` carries the rows that survived,
nothing else. The scores, each score's components (``--explain``'s columns) and the
rows the top K left out are here, fetched by the response's ``request_id``
(:meth:`nautilus_ranking.upstream.AttachedRanking.ranking`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from nautilus_ranking.records import RankedRow


@dataclass(frozen=True)
class RequestRanking:
    """One request's ranking.

    ``ranking``: every row handed over, best first; each ``RankedRow.row`` is the
    broker's own row object (as in ``data``), its score components as ``--explain``
    shows them (:meth:`RankedRow.explain`); a row the token budget handed over as its
    passage is the passage, its ``passage`` carrying the handle (``data`` holds it
    whole). ``dropped``: each source's rows left out
    of ``data`` (below the top K, a relevance cut, a copy of a better row), in the
    source's own order; a source that lost none is absent. ``source_rows``: each
    source's rows as it returned them, in its order: what the broker's
    ``source_response_hashes`` digest of that source covers, so a verifier can
    recompute it for a source ``data`` delivers trimmed. ``fallback``: None when the
    rows were ranked; else why ``data`` is the passthrough answer (the error's type).
    ``profile``: the ranking profile of the request's agent (None: the global knobs).
    ``ranked_by``: the query the rows were ranked by (``query``, the intent, without
    its routing words: :mod:`.routing_words`). ``budget``: what
    ``NAUTILUS_RANKING_MAX_TOKENS`` did (None: no budget).
    """

    request_id: str
    query: str
    ranking: tuple[RankedRow, ...]
    dropped: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    fallback: str | None = None
    source_rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    profile: str | None = None
    ranked_by: str = ""
    budget: dict[str, Any] | None = None
    #: The ranking's confidence (value, setup, signals; selection/confidence.py); under a
    #: minimum confidence, ``abstain`` (min_confidence, abstained, reason) and, when it
    #: abstained, the ``nearest`` rows it held back (``data`` is empty).
    confidence: dict[str, Any] | None = None
    abstain: dict[str, Any] | None = None
    nearest: tuple[RankedRow, ...] = ()
    #: With recency or supersession: the reference time and what time did
    #: (synthesis/recency.py); None otherwise.
    time: dict[str, Any] | None = None
    #: The hash of the order the rows are handed over in, with the reference time and
    #: the profile (nautilus_ranking/ranking_hash.py), and its signature with the cursor
    #: keys (request/cursor_keys.py); None when nothing was ranked or nothing signs.
    ranking_hash: str | None = None
    ranking_signature: str | None = None

    def with_request_id(self, request_id: str) -> RequestRanking:
        return replace(self, request_id=request_id)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: each ranked row's source, place, score and components (no rows:
        they are in ``data``), and how many rows each source lost."""
        out = {
            "request_id": self.request_id,
            "query": self.query,
            "ranked_by": self.ranked_by,
            "budget": self.budget,
            "fallback": self.fallback,
            "ranking": [{"id": r.row.get("id"), **r.explain()} for r in self.ranking],
            "dropped": {sid: len(rows) for sid, rows in self.dropped.items()},
        }
        if self.profile is not None:
            out["profile"] = self.profile
        if self.confidence is not None:
            out["confidence"] = self.confidence
        if self.time is not None:
            out["time"] = self.time
        if self.ranking_hash is not None:
            out["ranking_hash"] = self.ranking_hash
            out["ranking_signature"] = self.ranking_signature
        if self.abstain is not None:
            out["abstain"] = {
                **self.abstain,
                "nearest": [{"id": r.row.get("id"), **r.explain()} for r in self.nearest],
            }
        return out
