"""A query request: the one model every way in (HTTP, MCP, ``nautilus-ranking query``, the
retrievers) parses, so a field means the same thing everywhere."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    create_model,
    field_validator,
)

from nautilus_ranking.errors import Problem, cut
from nautilus_ranking.request.errors import invalid
from nautilus_ranking.request.pages import MAX_CURSOR_CHARS, MAX_PAGE
from nautilus_ranking.settings.declaration import (
    MAX_COUNT,
    MAX_LEVEL_CHARS,
    MAX_SOURCE_ID_CHARS,
    MAX_SOURCE_ITEMS,
    Arg,
    RequestCount,
    SourceId,
)
from nautilus_ranking.settings.knobs import MAX_CUT_CHARS, MAX_RECENCY_CHARS, OVERRIDING
from nautilus_ranking.synthesis.row_times import period_of

__all__ = [
    "MAX_COUNT",
    "MAX_CUT_CHARS",
    "MAX_LEVEL_CHARS",
    "MAX_RECENCY_CHARS",
    "MAX_SOURCE_ID_CHARS",
    "MAX_SOURCE_ITEMS",
    "Arg",
    "QueryRequest",
    "arg_of",
    "parse_request",
]

#: The longest passage handle (``row:`` and 24 hex digits).
MAX_HANDLE_CHARS = 64
#: What a passage handle looks like (selection/passage_parts.py makes them): anything
#: else names no row, and is refused rather than ignored.
HANDLE_PATTERN = r"^row:[0-9a-f]+$"

# Every text field is bounded, and checked against its bound before anything parses
# it (settings/declaration.py); the query's bound is the server's,
# NAUTILUS_SERVE_MAX_QUERY_CHARS, checked before it is read.


class _Checks(BaseModel):
    """What every request model checks besides its fields' types, and how a caller reads
    an override by name."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("as_of", mode="after", check_fields=False)
    @classmethod
    def _a_time(cls, value: str | None) -> str | None:
        if value is None:
            return None
        found = period_of(value)
        if isinstance(found, str):
            raise ValueError(f"not a time: {found}")
        return found[2]  # as the answer writes it: the same instant, one spelling

    def override(self, name: str) -> Any:
        """The value the request gives the override ``name`` (None: not given)."""
        return getattr(self, name)


class _Asked(_Checks):
    """What a request asks besides the knobs' overrides (those are the knobs' own
    declarations, placed among these in :data:`QueryRequest`): the query, which
    sources, the time ages count from, ``explain``, vectors and the page.

    Each field's description is what the OpenAPI schema, the MCP tool's schema and
    ``nautilus-ranking query --help`` say about it; its :class:`Arg` is its flag.
    """

    query: Annotated[str, Arg("", "a non-empty string", "TEXT")] = Field(
        description="what to look for, in plain words", min_length=1
    )
    sources: Annotated[
        list[SourceId] | None, Arg("--source", "a list of source ids", "ID", repeat=True)
    ] = Field(
        default=None,
        max_length=MAX_SOURCE_ITEMS,
        json_schema_extra={"minItems": 1},  # [] is refused
        description="ask only these sources (default: all)",
    )
    whole: Annotated[
        list[Annotated[str, StringConstraints(max_length=MAX_HANDLE_CHARS, pattern=HANDLE_PATTERN)]]
        | None,
        Arg("--whole", "a list of passage handles (row:...)", "HANDLE", repeat=True),
    ] = Field(
        default=None,
        max_length=MAX_SOURCE_ITEMS,
        description="rows an earlier answer gave as a passage, by passage.handle: whole",
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
    page: Annotated[RequestCount, Arg("--page", f"an integer from 1 to {MAX_PAGE}", "N")] = Field(
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


#: Where a request's own fields sit among the knobs' overrides: after the override
#: named (the rest of them after the last override).
_PLACED_AFTER = {"query": None, "sources": "idf", "whole": "max_tokens", "as_of": "recency"}


def _request_fields() -> dict[str, Any]:
    """The request's fields in the order every schema and message lists them: each of
    its own, and each overridable knob's from its declaration, in the knobs' order."""
    own = {name: (info.annotation, info) for name, info in _Asked.model_fields.items()}
    placed = {name: own.pop(name) for name in _PLACED_AFTER}
    fields: dict[str, Any] = {"query": placed.pop("query")}
    for knob in OVERRIDING:
        over = knob.override
        assert over is not None  # OVERRIDING holds the knobs that have one
        fields[knob.short] = (
            Annotated[over.annotation, over.arg],
            Field(default=None, description=over.description, max_length=over.max_length),
        )
        for name in [n for n in placed if _PLACED_AFTER[n] == knob.short]:
            fields[name] = placed.pop(name)
    return {**fields, **placed, **own}


if TYPE_CHECKING:
    QueryRequest = _Asked
else:
    #: A query request: the query, each knob's override and what it asks besides.
    QueryRequest = create_model(
        "QueryRequest",
        __base__=_Checks,
        __doc__="A query and optional per-request overrides of the ranking knobs.",
        **_request_fields(),
    )


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
