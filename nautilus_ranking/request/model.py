"""A query request: the one model every way in (HTTP, MCP, ``nautilus-ranking query``, the
retrievers) parses, so a field means the same thing everywhere."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

from nautilus_ranking.errors import Problem, cut
from nautilus_ranking.request.errors import invalid
from nautilus_ranking.request.pages import MAX_CURSOR_CHARS, MAX_PAGE
from nautilus_ranking.synthesis.row_times import period_of


@dataclass(frozen=True)
class Arg:
    """How a request field is given on the command line (``flag``; the query is the
    positional argument) and what a valid value is, for every way in's messages.
    ``repeat``: a mapping or list field given one ``flag`` a value."""

    flag: str
    valid: str
    metavar: str | None = None
    repeat: bool = False


#: The largest count a request may carry (as the settings' integers, 18 digits).
MAX_COUNT = 10**18 - 1

# Every text field is bounded, and checked against its bound before anything parses
# it: a request is read on the server's event loop before it takes a concurrency slot,
# so what reading it costs must not grow with what a caller sends. (The query's bound
# is the server's, NAUTILUS_SERVE_MAX_QUERY_CHARS, checked before it is read.)
#: The longest passage handle (``row:`` and 24 hex digits).
MAX_HANDLE_CHARS = 64
#: The longest ``cut`` (``relative:0.8`` is 12 characters).
MAX_CUT_CHARS = 64
#: The longest source id in ``sources`` and ``boosts`` (a sources file allows 100).
MAX_SOURCE_ID_CHARS = 256
#: The longest boost level (``-medium`` is 7 characters).
MAX_LEVEL_CHARS = 16
#: The longest ``recency`` (a decay for each of a few dozen sources).
MAX_RECENCY_CHARS = 2048
#: The most source ids in ``sources``, and entries in ``boosts``.
MAX_SOURCE_ITEMS = 1000

_SourceId = Annotated[str, StringConstraints(max_length=MAX_SOURCE_ID_CHARS)]
_Level = Annotated[str, StringConstraints(max_length=MAX_LEVEL_CHARS)]


class QueryRequest(BaseModel):
    """A query and optional per-request overrides of the ranking knobs.

    Each field's description is what the OpenAPI schema, the MCP tool's schema and
    ``nautilus-ranking query --help`` say about it; its :class:`Arg` is its flag.
    """

    model_config = ConfigDict(extra="forbid")

    query: Annotated[str, Arg("", "a non-empty string", "TEXT")] = Field(
        description="what to look for, in plain words", min_length=1
    )
    top_k: Annotated[int | None, Arg("--top-k", "an integer >= 1", "K")] = Field(
        default=None,
        description="keep the K best rows (the page size when paging); "
        "replaces NAUTILUS_RANKING_TOP_K",
    )
    boosts: Annotated[
        dict[_SourceId, _Level] | None,
        Arg(
            "--boost",
            "an object {source_id: level}, levels -high, -medium, -low, low, medium, high",
            "ID:LEVEL",
            repeat=True,
        ),
    ] = Field(
        default=None,
        max_length=MAX_SOURCE_ITEMS,
        description="{source_id: level}: low < medium < high favour a source, "
        "-low, -medium, -high hold one back; replaces NAUTILUS_SOURCE_BOOSTS",
    )
    idf: Annotated[bool | None, Arg("--idf", "true or false")] = Field(
        default=None,
        description="down-weight words that recur across the candidate rows "
        "(the batch-local IDF); replaces NAUTILUS_RANKING_IDF",
    )
    sources: Annotated[
        list[_SourceId] | None, Arg("--source", "a list of source ids", "ID", repeat=True)
    ] = Field(
        default=None,
        max_length=MAX_SOURCE_ITEMS,
        json_schema_extra={"minItems": 1},  # [] is refused
        description="ask only these sources (default: all)",
    )
    max_tokens: Annotated[int | None, Arg("--max-tokens", "an integer >= 1", "N")] = Field(
        default=None,
        description="hand over only the best rows that fit in N tokens, each "
        "counted as it is handed over (the first row always, flagged when it alone is "
        "over); replaces NAUTILUS_RANKING_MAX_TOKENS",
    )
    whole: Annotated[
        list[Annotated[str, StringConstraints(max_length=MAX_HANDLE_CHARS)]] | None,
        Arg("--whole", "a list of passage handles (row:...)", "HANDLE", repeat=True),
    ] = Field(
        default=None,
        max_length=MAX_SOURCE_ITEMS,
        description="under a budget, hand over whole the rows an earlier answer handed "
        "over as a passage, named by its passage.handle (the same request asked again)",
    )
    cut: Annotated[
        str | None,
        Arg(
            "--cut",
            "relative:A, floor:T or gap:G with a number in (0, 1], e.g. relative:0.8; or off",
            "CUT",
        ),
    ] = Field(
        default=None,
        max_length=MAX_CUT_CHARS,
        description="stop the ranking where relevance falls away (a prefix, "
        "never before the first row): relative:0.8, floor:0.6 or gap:0.1; replaces "
        "NAUTILUS_RANKING_CUT. Off is the recommendation: measured on the shared "
        "collections, no setting kept out enough irrelevant rows for the recall it cost "
        "(measure yours with eval --sweep); the answer's cut says how many rows it left out",
    )
    near_duplicates: Annotated[
        str | float | None,
        Arg(
            "--near-duplicates",
            "on, off, or a number in (0, 1] (1: identical text), e.g. 0.6",
            "on|off|T",
        ),
    ] = Field(
        default=None,
        description="collapse rows whose text is nearly the same (word-shingle "
        "resemblance at least T; on: the measured default) into the best-ranked copy, "
        "listed in its also_from; replaces NAUTILUS_RANKING_NEAR_DUPLICATES",
    )
    diversity: Annotated[
        str | float | None,
        Arg("--diversity", "a number in [0, 1] (0: off), e.g. 0.3", "W"),
    ] = Field(
        default=None,
        description="trade relevance for novelty over the whole ranking (MMR, by the "
        "same text resemblance; 0 is off); measured, off is the recommendation; replaces "
        "NAUTILUS_RANKING_DIVERSITY",
    )
    max_per_source: Annotated[int | None, Arg("--max-per-source", "an integer >= 1", "N")] = Field(
        default=None,
        description="at most N rows of one source in each page of the top K (it "
        "beats a boost); replaces NAUTILUS_RANKING_MAX_PER_SOURCE",
    )
    canonical_sources: Annotated[
        list[_SourceId] | None,
        Arg("--canonical-source", "a list of source ids, first preferred", "ID", repeat=True),
    ] = Field(
        default=None,
        max_length=MAX_SOURCE_ITEMS,
        description="when copies of a document collapse, keep the copy of the first of "
        "these sources that has one (default: the best-ranked copy); replaces "
        "NAUTILUS_RANKING_CANONICAL_SOURCES",
    )
    min_confidence: Annotated[
        str | float | None,
        Arg("--min-confidence", "a number in [0, 1] (0: never abstain), e.g. 0.12", "P"),
    ] = Field(
        default=None,
        description="abstain (hand over no rows; the nearest are listed in abstain) when "
        "the ranking's confidence that one of its top 10 rows is relevant is below P; "
        "0 never abstains; replaces NAUTILUS_RANKING_MIN_CONFIDENCE",
    )
    recency: Annotated[
        str | None,
        Arg(
            "--recency",
            "half_life:D or window:D (D e.g. 90d; units s, m, h, d, w, y), optionally "
            "SOURCE:-prefixed entries, comma-separated; or off",
            "DECAY",
        ),
    ] = Field(
        default=None,
        max_length=MAX_RECENCY_CHARS,
        description="lower older rows among rows of similar relevance (never past a clearly "
        "better match): half_life:90d or window:365d, per source as tickets:half_life:7d; "
        "off for none; replaces NAUTILUS_RANKING_RECENCY",
    )
    as_of: Annotated[
        str | None,
        Arg("--as-of", "an ISO 8601 date or date-time (naive is UTC), or epoch seconds", "TIME"),
    ] = Field(
        default=None,
        max_length=64,
        description="the time rows' ages count from (default: the newest row's time; "
        "never the clock), with recency or supersession set",
    )
    explain: Annotated[bool | None, Arg("--explain", "true or false")] = Field(
        default=False,
        description="show every score component and the request's effective ranking settings",
    )
    vectors: Annotated[bool | None, Arg("--vectors", "true or false")] = Field(
        default=False,
        description="keep each row's vector (its 'embedding' field); left out by default",
    )
    page: Annotated[int | None, Arg("--page", f"an integer from 1 to {MAX_PAGE}", "N")] = Field(
        default=None,
        description=f"page number (1 to {MAX_PAGE}) of top_k rows each: "
        "page 2 is ranks top_k+1 to 2*top_k",
    )
    cursor: Annotated[
        str | None, Arg("--cursor", "the next_cursor of an earlier response", "CURSOR")
    ] = Field(
        default=None,
        max_length=MAX_CURSOR_CHARS,
        description="the next_cursor of an earlier answer to the same query "
        "and settings: its next page",
    )

    @field_validator("top_k", "page", "max_tokens", "max_per_source", mode="before")
    @classmethod
    def _plain_count(cls, value: object) -> object:
        if isinstance(value, bool):  # JSON true is not the number 1
            raise ValueError("a boolean is not a number")
        if isinstance(value, int) and abs(value) > MAX_COUNT:
            raise ValueError(f"more than {len(str(MAX_COUNT))} digits")
        return value

    @field_validator("as_of", mode="after")
    @classmethod
    def _a_time(cls, value: str | None) -> str | None:
        if value is None:
            return None
        found = period_of(value)
        if isinstance(found, str):
            raise ValueError(f"not a time: {found}")
        return found[2]  # as the answer writes it: the same instant, one spelling

    @field_validator("near_duplicates", "diversity", "min_confidence", mode="before")
    @classmethod
    def _plain_fraction(cls, value: object) -> object:
        if isinstance(value, bool):  # JSON true is not "on", nor the number 1
            raise ValueError("a boolean is not a number")
        return value


def arg_of(name: str) -> Arg:
    """The :class:`Arg` declared on the request field ``name``."""
    found = next(m for m in QueryRequest.model_fields[name].metadata if isinstance(m, Arg))
    return found


def parse_request(payload: object) -> QueryRequest:
    """The body as a :class:`QueryRequest`, or 422 naming each bad field."""
    try:
        return QueryRequest.model_validate(payload)
    except ValidationError as exc:
        fields = ", ".join(QueryRequest.model_fields)
        problems = []
        for error in exc.errors():
            where = ".".join(cut(str(p)) for p in error["loc"]) or "body"
            valid = _valid_for(error["type"], where, fields)
            message = error["msg"]
            problems.append(
                Problem(where, cut(error.get("input")), message[:1].lower() + message[1:], valid)
            )
        raise invalid(problems) from None


def _valid_for(error_type: str, where: str, fields: str) -> str:
    if error_type == "extra_forbidden":
        return fields
    if error_type in ("model_type", "model_attributes_type"):
        return "a JSON object with " + fields
    name = where.split(".")[0]
    if name in QueryRequest.model_fields:
        return arg_of(name).valid
    return "see the OpenAPI schema at /openapi.json"
