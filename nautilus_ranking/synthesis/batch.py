"""The batch the ranking pass's stages share: the candidates' arrays and, as each stage
runs, what it computed for the stages after it.

Every stage (``gather``, ``content``, ``votes``, ``batch_confidence``, the boosts of
``ranking_boost``, ``recency``, ``select``) takes a :class:`RankBatch` and fills in its
own fields; what a stage reads of the ones before it is named by those fields. The
settings a stage reads of the ranker are :class:`RankSettings`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from nautilus_ranking.embedders import Embedder
from nautilus_ranking.settings.time_entries import Recency
from nautilus_ranking.synthesis.candidates import Candidates
from nautilus_ranking.synthesis.passages import Passages
from nautilus_ranking.synthesis.query import TokensToWeight
from nautilus_ranking.synthesis.vectors import QueryVector
from nautilus_ranking.text.arrays import FloatArray, IntArray
from nautilus_ranking.text.tokens import TokenBatch

if TYPE_CHECKING:
    from nautilus_ranking.selection.confidence import Confidence, Fit


class RankSettings(Protocol):
    """What the pass reads of a ranker: a RankingSynthesizer's settings."""

    top_k: int | None
    idf: bool
    lexical: str
    source_boosts: dict[str, str]
    embedder: Embedder
    max_candidates: int | None
    dedup_key: str | None
    near_duplicates: float | None
    diversity: float | None
    max_per_source: int | None
    page_size: int | None
    canonical_sources: tuple[str, ...]
    #: The time rows may take to embed with a model (ms; 0: no deadline).
    embedding_deadline_ms: int
    #: With a model, the rows it embeds (the best by words; 0: every row).
    embedding_max_rows: int
    #: The decay by age (None: off) and whether the newest revision supersedes the rest.
    recency: Recency | None
    supersede: bool
    #: By lower-case source id: the row key of a row's time, and of its document.
    time_fields: dict[str, str]
    document_keys: dict[str, str]
    #: By lower-case source id: the other sources whose revisions it may supersede.
    may_revise: dict[str, frozenset[str]]
    #: A local fit of the confidence by setup (selection/local_fit.py); None: the shipped.
    confidence_fits: Mapping[str, Fit] | None


def _no_floats() -> FloatArray:
    return np.zeros(0, dtype=np.float64)


def _no_ints() -> IntArray:
    return np.zeros(0, dtype=np.intp)


@dataclass
class RankBatch:
    """One request's candidates and what the stages computed of them. Arrays over
    ``cands`` (the whole union) or over ``sub`` (the ``scored`` rows, ``n`` of them);
    ``where_ref`` is where the reference rows (kept by the cap without boosts) sit in
    ``sub``. A field is empty until the stage that fills it has run."""

    ctx: Mapping[str, Any]
    query: QueryVector | TokensToWeight
    #: Whether the query is in the embedder's own space (not a vector the caller brought).
    query_in_embedder_space: bool
    #: Whether content is lexical (the query in a lexical embedder's space).
    lexical_content: bool
    cands: Candidates
    # gather: the boosts' levels, the stage-1 key, the cap
    bumps: FloatArray
    keys: FloatArray
    texts_all: list[str] | None
    said: list[bool | None]
    kept: IntArray
    reference: IntArray
    scored: IntArray
    where_ref: IntArray
    sub: Candidates
    n: int
    # content: each scored row's similarity to the query and its document
    factors: FloatArray = field(default_factory=_no_floats)
    texts: list[str] | None = None
    tokens: TokenBatch | None = None
    query_tokens: list[str] = field(default_factory=list)
    lexical_score: FloatArray | None = None
    similarity: FloatArray = field(default_factory=_no_floats)
    doc: IntArray = field(default_factory=_no_ints)
    content_similarity: FloatArray = field(default_factory=_no_floats)
    # passages: the rows past the model's window, read as passages (None: no such row)
    passages: Passages | None = None
    passages_scored: int = 0
    # votes: the sources' and content's votes, summed into relevance
    sub_doc: IntArray = field(default_factory=_no_ints)
    source_weight: FloatArray = field(default_factory=_no_floats)
    weight: float = 0.0
    voters: IntArray = field(default_factory=_no_ints)
    content_rank: IntArray = field(default_factory=_no_ints)
    content: FloatArray = field(default_factory=_no_floats)
    unranked: FloatArray = field(default_factory=_no_floats)
    evidence: FloatArray = field(default_factory=_no_floats)
    relevance: FloatArray = field(default_factory=_no_floats)
    # what the pass says beside the order (the result's ``embedding``, ``confidence``)
    embedding_report: dict[str, Any] | None = None
    confidence: Confidence | None = None
    # boosts
    bump: FloatArray = field(default_factory=_no_floats)
    unboosted: IntArray = field(default_factory=_no_ints)
