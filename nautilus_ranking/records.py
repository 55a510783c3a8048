"""The records of a request: per-source results, errors, ranked rows, the response.

One module past 400 lines because these are one shape, the answer's: the response is
made of the others, and a ranked row declares each score component (its ``--explain``
column and meaning) beside its field, so the declarations are most of its length."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import numpy.typing as npt


@dataclass(frozen=True)
class ErrorRecord:
    """Why one source gave no rows for a request; ``trace_id``: the request's trace (hex)
    when it is traced, to find the source's span, else ``""``."""

    source_id: str
    error_type: str
    message: str
    trace_id: str = ""


@dataclass(frozen=True)
class SourceWarning:
    """Something a source returned that was left out, while the rest of its answer was used.

    ``warning_type`` ``"rows_dropped"``: ``count`` rows at ``positions`` (1-based, in
    the source's own order) were not JSON objects or had no canonical JSON form (a
    cycle, keys of mixed types, an integer too long to print, a value whose ``str``
    raises, a mapping whose methods raise); ``message`` says why, for the first few.
    A source reports its own (:class:`WarnedRows`): ``"hits_dropped"``, ``count`` hits
    of an engine's answer that could not be mapped; ``"page_failed"``, a page after the
    first failed and the rows before it are kept; ``"mapping_null"``, a mapped path was
    null in every hit (``count``: how many hits), one warning a path.
    """

    source_id: str
    warning_type: str
    message: str
    count: int = 0
    positions: tuple[int, ...] = ()


class WarnedRows(list[dict[str, Any]]):
    """A source's rows with what it left out of them, reported in ``sources_warned``:
    a source that returns one says why its answer is partial (a page that failed, hits
    it could not read) without failing. ``unmapped``: the sources file's options whose
    path was null in every hit (``(option, path, where)``: ``where`` says what the first
    hit had instead), for ``nautilus-ranking sources probe``."""

    def __init__(self, rows: Iterable[dict[str, Any]] = ()) -> None:
        super().__init__(rows)
        self.warnings: list[SourceWarning] = []
        self.unmapped: list[tuple[str, str, str]] = []


def source_warnings(rows: object, source_id: str) -> list[SourceWarning]:
    """The warnings a source's answer carries (:class:`WarnedRows`), as the broker
    reports them: its own, for its own id."""
    warned = getattr(rows, "warnings", None) if isinstance(rows, WarnedRows) else None
    return [w for w in warned or () if isinstance(w, SourceWarning) and w.source_id == source_id]


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
    ranking to detect per batch (nautilus_ranking/synthesis/detection.py).
    ``source_ranks`` (optional): each row's 1-based position in the source's own
    answer, ``rows[i]`` at ``source_ranks[i]`` (strictly increasing), for when rows
    were left out of it — the broker sets it when it drops bad rows, so the rows after
    a dropped one keep their place (``RankedRow.source_rank``, the fusion's rank
    votes, ``SourceWarning.positions`` all count the same way). None: ``rows[i]``
    is at ``i + 1``. ``embeddings`` is indexed by ``rows``, never by these.
    ``time_field`` and ``document_key``: the row key (or path) holding each row's time
    and the document its revisions share, as the source's sources-file entry names them
    (``NAUTILUS_RANKING_TIME_FIELDS`` and ``NAUTILUS_RANKING_DOCUMENT_KEYS`` win over them);
    read only with recency or supersession set (synthesis/recency.py).
    """

    source_id: str
    rows: list[dict[str, Any]]
    duration_ms: int = 0
    error: ErrorRecord | None = None
    embeddings: npt.NDArray[Any] | None = None
    ranked: bool | None = None
    source_ranks: tuple[int, ...] | None = None
    time_field: str | None = None
    document_key: str | None = None


#: The kinds of :class:`Copy` that are another revision of the document, with a time.
REVISION_KINDS = frozenset({"revision", "later_revision"})


class Copy(NamedTuple):
    """Another row of the same document, collapsed into a ranked row (its ``also_from``):
    its source, its ``id`` (the row's own, or ``sha256-`` and 16 hex digits of its
    content when it has none: :func:`nautilus_ranking.rows.content_id`), its place in
    its source, and ``copy``: ``exact`` (the same ``NAUTILUS_RANKING_DEDUP_KEY`` value,
    else the same text; its source's vote counted for the row) or ``near`` (a text alike
    by ``NAUTILUS_RANKING_NEAR_DUPLICATES``; no vote pooled) or ``revision`` (an older
    revision of the document, superseded by ``NAUTILUS_RANKING_SUPERSEDE``) or
    ``later_revision`` (one dated after the request's ``as_of``); ``time``: a revision's
    time as read, None for the other kinds)."""

    source_id: str
    id: Any
    source_rank: int
    copy: str
    time: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The copy as an answer carries it (``time`` only for a revision, older or later)."""
        out = {
            "source_id": self.source_id,
            "id": self.id,
            "source_rank": self.source_rank,
            "copy": self.copy,
        }
        if self.copy in REVISION_KINDS:
            out["time"] = self.time
        return out

    def label(self) -> str:
        """``source:id`` for a person (``--explain``, MCP), ``(near)`` after a near copy,
        ``(revision of TIME)`` after an older revision, ``(later revision of TIME)`` after
        one dated after ``as_of``."""
        tail = {
            "near": " (near)",
            "revision": f" (revision of {self.time})",
            "later_revision": f" (later revision of {self.time})",
        }.get(self.copy, "")
        return f"{self.source_id}:{self.id}{tail}"


def _component(
    default: float | int, column: str, width: int, fmt: str, doc: str, why: bool = False
) -> Any:
    """A score component of :class:`RankedRow`: its ``--explain`` column (header, width,
    number format), what it means, and whether a short "why" (MCP, retrievers) shows it.
    Every listing of the components is derived from these declarations."""
    return field(
        default=default,
        metadata={"column": column, "width": width, "fmt": fmt, "doc": doc, "why": why},
    )


@dataclass(frozen=True, slots=True)
class RankedRow:
    """One row's place in the global ranking, and why it is there.

    ``score = relevance + boost_bump`` (``+ recency`` under a decay by age: ``time``)
    with ``relevance = content + evidence + unranked_vote``. Each score component is
    declared once below, with its ``--explain`` column and what it means
    (:data:`SCORE_COMPONENTS` lists them; the formula is in docs/configuration.md, "How
    a row is scored"). ``also_from`` lists the other rows collapsed into this one, exact
    and near copies and older revisions alike (:class:`Copy`), best first.
    """

    source_id: str
    row: dict[str, Any]
    score: float
    rank: int
    source_rank: int
    also_from: tuple[Copy, ...] = ()
    similarity: float = _component(
        0.0,
        "sim",
        6,
        ".3f",
        "content similarity: with the hashing embedder the row's BM25 score over the "
        "batch (the cosine with NAUTILUS_RANKING_LEXICAL=cosine), else the cosine of "
        "the row's vector to the query's",
        why=True,
    )
    idf_factor: float = _component(
        1.0, "idf", 5, ".2f", "the batch-local IDF factor (1 without IDF)"
    )
    content_rank: int = _component(
        0, "c.rank", 6, "d", "the row's rank by content among the batch's documents"
    )
    content: float = _component(
        0.0,
        "content",
        7,
        ".5f",
        "the content vote: content weight x normalised similarity / 61 (lexical content "
        "of a ranked source's row lifted toward what its rank implies)",
    )
    content_weight: float = _component(
        1.0,
        "c.w",
        4,
        ".2f",
        "how much content counts in this batch (1 disjoint sources, down to 0.1 overlapping ones)",
    )
    evidence: float = _component(
        0.0,
        "evid.",
        7,
        ".5f",
        "the ranked sources' votes for the row's document: weight / (60 + rank) each",
        why=True,
    )
    voters: int = _component(
        0, "voters", 6, "d", "how many ranked sources returned the row's document", why=True
    )
    source_weight: float = _component(
        0.0,
        "w",
        4,
        ".2f",
        "how much the row's source's order counts (1 ranked, 0 unranked, else detected)",
    )
    unranked_vote: float = _component(
        0.0, "unrank.", 7, ".5f", "the vote standing in for an unranked source's order"
    )
    relevance: float = _component(
        0.0,
        "relev.",
        7,
        ".5f",
        "content + evidence + unranked vote: the score before any boost",
        why=True,
    )
    boost_bump: float = _component(
        0.0, "bump", 6, ".4f", "what the source's boost added to the score", why=True
    )
    unboosted_rank: int = _component(
        0,
        "unb.",
        5,
        "d",
        "the row's place in this ranking without any boost (0: no boost "
        "set); beside rank, what the boost did",
    )
    stage1_key: float = _component(
        0.0, "stage1", 7, ".5f", "the fused rank key the candidate cap keeps rows by"
    )
    #: With recency or supersession set: the row's ``time`` as read (None: undated),
    #: ``age_days`` from the reference, its ``freshness`` (1: new) and ``recency``, what
    #: the decay added to the score (``score = relevance + boost_bump + recency``).
    #: None otherwise, and then absent from every answer.
    time: dict[str, Any] | None = None
    #: A row past the model's window (synthesis/passages.py): the passage that scored,
    #: as the row's ``field`` holding it, ``start`` and ``end`` (character offsets into
    #: that field's value) and the value's ``length``. None otherwise, and then absent
    #: from every answer.
    passage: dict[str, Any] | None = None

    def explain(self) -> dict[str, Any]:
        """The score and its components, without the row (for logs and ``--explain``)."""
        # Not asdict(): it deep-copies the row (vectors included) only to drop it, which
        # made serialising a response cost more than ranking it.
        out = {name: getattr(self, name) for name in _EXPLAINED}
        out["also_from"] = [c.as_dict() for c in self.also_from]
        if self.time is not None:
            out["time"] = dict(self.time)
        if self.passage is not None:
            out["passage"] = dict(self.passage)
        return out

    def why(self) -> dict[str, Any]:
        """The components a short explanation carries (those declared ``why``)."""
        return {name: getattr(self, name) for name in WHY_COMPONENTS}

    def entry(self, explain: bool = False) -> dict[str, Any]:
        """The row's ranking entry as a JSON answer carries it: without ``explain`` only
        what a caller acts on (:data:`LEAN_FIELDS`: which row, its place, its score,
        where else it was found); with it every score component too."""
        row_id = self.row.get("id") if isinstance(self.row, dict) else None
        if explain:
            return {"id": row_id, **self.explain()}
        lean = {
            "source_id": self.source_id,
            "id": row_id,
            "rank": self.rank,
            "score": self.score,
            "also_from": [c.as_dict() for c in self.also_from],
        }
        if self.passage is not None and "handle" in self.passage:  # handed over in part
            lean["passage"] = dict(self.passage)
        return lean


#: The score components of a :class:`RankedRow`, in declaration order: name, then its
#: ``--explain`` column, width, number format, meaning and whether "why" shows it.
SCORE_COMPONENTS: tuple[tuple[str, dict[str, Any]], ...] = tuple(
    (f.name, dict(f.metadata)) for f in fields(RankedRow) if "column" in f.metadata
)
#: The components a short "why" shows (MCP results, retriever metadata without explain).
WHY_COMPONENTS: tuple[str, ...] = tuple(name for name, meta in SCORE_COMPONENTS if meta["why"])
_EXPLAINED = tuple(f.name for f in fields(RankedRow) if f.name not in ("row", "time", "passage"))
#: What a ranking entry holds without ``explain`` (:meth:`RankedRow.entry`): the row's
#: source and id, its place, its score and its copies — the components are ``explain``'s.
LEAN_FIELDS: tuple[str, ...] = ("source_id", "id", "rank", "score", "also_from")


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
    #: With a token budget: ``max_tokens``, ``tokens_used``, ``rows_left_out`` and
    #: ``first_row_over_budget`` (nautilus_ranking/selection/budget.py); None without one.
    budget: dict[str, Any] | None = None
    #: With a relevance cut: its ``setting`` and ``rows_left_out``, the rows of the top K
    #: it left out (nautilus_ranking/selection/cut.py); None without one.
    cut: dict[str, Any] | None = None
    #: Past the embedding deadline: ``deadline_ms``, ``rows_lexical`` (the rows scored by
    #: words) and ``rows_embedded`` (synthesis/embedding_deadline.py); None otherwise.
    embedding: dict[str, Any] | None = None
    #: The ranking's confidence (nautilus_ranking/selection/confidence.py): ``value`` (the
    #: probability that one of the top 10 rows is relevant; None: no fit for the setup),
    #: ``setup``, ``signals`` and ``fit`` (``shipped`` or ``local``); None when nothing
    #: was ranked. Outside ``data``: it changes no hash.
    confidence: dict[str, Any] | None = None
    #: Under ``NAUTILUS_RANKING_MIN_CONFIDENCE``: ``min_confidence``, ``abstained`` and
    #: ``reason`` (selection/confidence.py, ``decide``); None without it.
    abstain: dict[str, Any] | None = None
    #: The rows an abstained answer did not hand over, best first (``data`` is empty).
    nearest: list[RankedRow] = field(default_factory=list)
    #: With recency or supersession set (synthesis/recency.py): the ``reference`` time
    #: ages count from and where it came ``from`` (``as_of`` or ``newest_row``), the
    #: ``recency`` in force, the rows ``dated`` and ``undated``, those ``ahead`` of the
    #: reference and the revisions ``superseded``; None otherwise.
    time: dict[str, Any] | None = None

    def to_dict(
        self,
        *,
        vectors: bool | None = None,
        ranking_enabled: bool | None = None,
        explain: bool = False,
    ) -> dict[str, Any]:
        """The response as JSON-able values.

        ``vectors=False`` leaves each row's vector (the :data:`VECTOR_FIELDS`) out of
        ``data`` (copies; the rows are never changed), ``True`` keeps them; either is
        written out as ``vectors_included`` (unset: ``data`` as it is, no such key).
        ``response_hash`` always covers the rows as the sources returned them.
        ``ranking_enabled`` (what the caller's synthesizer does) is written out when
        given; ``False`` writes each ranking entry's score and its components as
        ``null`` — a passthrough has no scores, and zeros would read as ones. Each
        ranking entry is :meth:`RankedRow.entry`: lean (:data:`LEAN_FIELDS`) unless
        ``explain``, which adds every score component.
        """
        out: dict[str, Any] = {
            "request_id": self.request_id,
            "data": self.data if vectors is not False else without_vectors(self.data),
            # each entry says which row it is: the row's own id (None if it has none)
            "ranking": [r.entry(explain) for r in self.ranking],
            "sources_queried": list(self.sources_queried),
            "sources_errored": [asdict(e) for e in self.sources_errored],
            "duration_ms": self.duration_ms,
            "response_hash": self.response_hash,
            "source_response_hashes": dict(self.source_response_hashes),
            "sources_warned": [
                {**asdict(w), "positions": list(w.positions)} for w in self.sources_warned
            ],
        }
        if self.budget is not None:  # only under a budget: no key otherwise
            out["budget"] = dict(self.budget)
        if self.cut is not None:  # only under a cut: no key otherwise
            out["cut"] = dict(self.cut)
        if self.embedding is not None:  # only past the embedding deadline
            out["embedding"] = dict(self.embedding)
        if self.time is not None:  # only with recency or supersession
            out["time"] = dict(self.time)
        if self.confidence is not None:  # a ranked answer: its confidence, null without a fit
            out["confidence"] = self.confidence["value"]
            # what the number is: the shipped fit's (public collections, not these
            # sources) or a local one's (nautilus-ranking calibrate on these sources)
            out["confidence_fit"] = self.confidence.get("fit", "shipped")
            if explain:
                out["confidence_signals"] = {
                    "setup": self.confidence["setup"],
                    **self.confidence["signals"],
                }
        if self.abstain is not None:  # only under a minimum confidence
            out["abstained"] = bool(self.abstain["abstained"])
            out["abstain"] = {
                **{k: v for k, v in self.abstain.items() if k != "abstained"},
                "nearest": [r.entry(explain) for r in self.nearest],
            }
        if vectors is not None:
            out["vectors_included"] = vectors
        if ranking_enabled is not None:
            out["ranking_enabled"] = ranking_enabled
            if not ranking_enabled:
                for entry in out["ranking"]:
                    entry.update(dict.fromkeys(SCORE_FIELDS if explain else ("score",)))
        return out


#: Row fields that hold a vector: the built-in vector sources return theirs as
#: ``embedding`` (1,024 floats with the hashing embedder), and the ranking reads it there.
VECTOR_FIELDS = frozenset({"embedding"})
#: A ranking entry's score and its components (what a passthrough does not compute).
SCORE_FIELDS: tuple[str, ...] = ("score", *(name for name, _ in SCORE_COMPONENTS))


def without_vectors(data: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """``data`` with each row's vector fields left out (new dicts where a row had one)."""
    return {
        sid: [
            {k: v for k, v in row.items() if k not in VECTOR_FIELDS}
            if isinstance(row, dict) and not VECTOR_FIELDS.isdisjoint(row)
            else row
            for row in rows
        ]
        for sid, rows in data.items()
    }
