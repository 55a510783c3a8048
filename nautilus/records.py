"""The records of a request: per-source results, errors, ranked rows, the response."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy.typing as npt


@dataclass(frozen=True)
class ErrorRecord:
    """Why one source gave no rows for a request."""

    source_id: str
    error_type: str
    message: str
    trace_id: str = ""


@dataclass(frozen=True)
class SourceWarning:
    """Something a source returned that was left out, while the rest of its answer was used.

    ``warning_type`` is ``"rows_dropped"``: ``count`` rows at ``positions`` (1-based, in
    the source's own order) were not JSON objects or had no canonical JSON form (a
    cycle, keys of mixed types, an integer too long to print, a value whose ``str``
    raises, a mapping whose methods raise); ``message`` says why, for the first few.
    """

    source_id: str
    warning_type: str
    message: str
    count: int = 0
    positions: tuple[int, ...] = ()


@dataclass
class AdapterResult:
    """One source's answer: its rows in the source's own order, or an error.

    ``embeddings`` (optional): the rows' vectors as one matrix, row ``i`` for
    ``rows[i]`` (float32 or float64, shape ``(len(rows), dim)``). A source that
    keeps its vectors in an array hands them over this way and the ranker scores
    them in one product, without gathering a vector per row; it takes precedence
    over the rows' own ``embedding`` values, which keep working without it.
    ``ranked`` is the source's word on whether that order means relevance (a BM25
    or vector index: True; a table in id order: False); None leaves it to the
    ranking to detect per batch (nautilus/synthesis/detection.py).
    ``source_ranks`` (optional): each row's 1-based position in the source's own
    answer, ``rows[i]`` at ``source_ranks[i]`` (strictly increasing), for when rows
    were left out of it — the broker sets it when it drops bad rows, so the rows after
    a dropped one keep their place (``RankedRow.source_rank``, the fusion's rank
    votes, ``SourceWarning.positions`` all count the same way). None: ``rows[i]``
    is at ``i + 1``. ``embeddings`` is indexed by ``rows``, never by these.
    """

    source_id: str
    rows: list[dict[str, Any]]
    duration_ms: int = 0
    error: ErrorRecord | None = None
    embeddings: npt.NDArray[Any] | None = None
    ranked: bool | None = None
    source_ranks: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class RankedRow:
    """One row's place in the global ranking, and why it is there.

    ``score = relevance + boost_bump`` with ``relevance = content + evidence +
    unranked_vote`` (nautilus/synthesis/fusion.py): ``content`` is the content vote
    ``content_weight · ŝ / 61``, ``ŝ`` the content similarity (``similarity *
    idf_factor``) normalised by the batch's distribution, ``content_rank`` the row's
    rank by it among the batch's documents, ``content_weight`` the batch's (1 when
    the ranked sources share no document, falling to 0.1 as they share more);
    ``boost_bump`` a share of ``evidence + unranked_vote``; ``evidence`` is the sum
    of the ranked sources' votes for the row's document, ``source_weight / (60 +
    rank)`` each, from ``voters`` sources; ``source_weight`` is the weight of this
    row's own source (1 declared ranked, 0 unranked, else detected);
    ``unranked_vote`` stands in for an unranked source's order when no other ranked
    source returned the document:
    ``content_weight · (1 - source_weight) / (60 + its content rank in that source)``,
    the best of the row's own and its copies' in the unboosted reference.
    ``stage1_key`` is the fused rank key used by the candidate cap. ``unboosted_rank``
    is the row's place in the same ranking without any boost (0 when no boost is set). ``also_from``
    lists the other ``(source_id, source_rank)`` pairs that returned the same
    document (collapsed into this row).
    """

    source_id: str
    row: dict[str, Any]
    score: float
    rank: int
    source_rank: int
    similarity: float = 0.0
    idf_factor: float = 1.0
    stage1_key: float = 0.0
    boost_bump: float = 0.0
    also_from: tuple[tuple[str, int], ...] = ()
    relevance: float = 0.0
    content: float = 0.0
    content_rank: int = 0
    evidence: float = 0.0
    voters: int = 0
    source_weight: float = 0.0
    unranked_vote: float = 0.0
    content_weight: float = 1.0
    unboosted_rank: int = 0

    def explain(self) -> dict[str, Any]:
        """The score and its components, without the row (for logs and ``--explain``)."""
        # Not asdict(): it deep-copies the row (vectors included) only to drop it, which
        # made serialising a response cost more than ranking it.
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "row"}
        out["also_from"] = [list(pair) for pair in self.also_from]
        return out


@dataclass
class BrokerResponse:
    """What a request returns. ``data`` keeps the upstream ``{source_id: rows}`` shape and
    is what ``response_hash`` covers; the ranking and its scores live beside it."""

    request_id: str
    data: dict[str, list[dict[str, Any]]]
    ranking: list[RankedRow] = field(default_factory=list)
    sources_queried: list[str] = field(default_factory=list)
    sources_errored: list[ErrorRecord] = field(default_factory=list)
    duration_ms: int = 0
    response_hash: str = ""
    source_response_hashes: dict[str, str] = field(default_factory=dict)
    sources_warned: list[SourceWarning] = field(default_factory=list)

    def to_dict(self, *, vectors: bool | None = None,
                ranking_enabled: bool | None = None) -> dict[str, Any]:
        """The response as JSON-able values.

        ``vectors=False`` leaves each row's vector (the :data:`VECTOR_FIELDS`) out of
        ``data`` (copies; the rows are never changed), ``True`` keeps them; either is
        written out as ``vectors_included`` (unset: ``data`` as it is, no such key).
        ``response_hash`` always covers the rows as the sources returned them.
        ``ranking_enabled`` (what the caller's synthesizer does) is written out when
        given; ``False`` writes each ranking entry's score and its components as
        ``null`` — a passthrough has no scores, and zeros would read as ones.
        """
        out: dict[str, Any] = {
            "request_id": self.request_id,
            "data": self.data if vectors is not False else without_vectors(self.data),
            # each entry says which row it is: the row's own id (None if it has none)
            "ranking": [{"id": r.row.get("id"), **r.explain()} for r in self.ranking],
            "sources_queried": list(self.sources_queried),
            "sources_errored": [asdict(e) for e in self.sources_errored],
            "duration_ms": self.duration_ms,
            "response_hash": self.response_hash,
            "source_response_hashes": dict(self.source_response_hashes),
            "sources_warned": [{**asdict(w), "positions": list(w.positions)}
                               for w in self.sources_warned],
        }
        if vectors is not None:
            out["vectors_included"] = vectors
        if ranking_enabled is not None:
            out["ranking_enabled"] = ranking_enabled
            if not ranking_enabled:
                for entry in out["ranking"]:
                    entry.update(dict.fromkeys(SCORE_FIELDS))
        return out


#: Row fields that hold a vector: the built-in vector sources return theirs as
#: ``embedding`` (1,024 floats with the hashing embedder), and the ranking reads it there.
VECTOR_FIELDS = frozenset({"embedding"})
#: A ranking entry's score and its components (what a passthrough does not compute).
SCORE_FIELDS = ("score", "similarity", "idf_factor", "stage1_key", "boost_bump", "relevance",
                "content", "content_rank", "evidence", "voters", "source_weight",
                "unranked_vote", "content_weight", "unboosted_rank")


def without_vectors(data: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """``data`` with each row's vector fields left out (new dicts where a row had one)."""
    return {sid: [{k: v for k, v in row.items() if k not in VECTOR_FIELDS}
                  if isinstance(row, dict) and not VECTOR_FIELDS.isdisjoint(row) else row
                  for row in rows]
            for sid, rows in data.items()}
