"""A query request: the one model every way in (HTTP, MCP, ``nautilus query``, the
retrievers) parses, so a field means the same thing everywhere."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from nautilus.errors import Problem, cut
from nautilus.pages import MAX_PAGE
from nautilus.request.errors import invalid


class QueryRequest(BaseModel):
    """A query and optional per-request overrides of the ranking knobs."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(description="the query text", min_length=1)
    top_k: int | None = Field(default=None, description="keep the K best rows (>= 1); "
                              "overrides NAUTILUS_RANKING_TOP_K")
    boosts: dict[str, str] | None = Field(
        default=None, description="{source_id: low|medium|high}; replaces "
        "NAUTILUS_SOURCE_BOOSTS for this request")
    idf: bool | None = Field(default=None, description="overrides NAUTILUS_RANKING_IDF")
    sources: list[str] | None = Field(default=None, json_schema_extra={"minItems": 1},
                                      description="ask only these sources")  # [] is a 422
    explain: bool | None = Field(default=False, description="add the effective ranking "
                                 "settings of this request under 'explain'")
    vectors: bool | None = Field(default=False, description="keep the rows' vectors (the "
                          "'embedding' field) in 'data'; left out by default")
    page: int | None = Field(default=None, description=f"page number (1 to {MAX_PAGE}) of "
                             "top_k rows each: page 2 is ranks top_k+1 to 2·top_k")
    cursor: str | None = Field(default=None, description="the 'page.next_cursor' of an "
                               "earlier response to the same query and settings: its next page")

    @field_validator("top_k", "page", mode="before")
    @classmethod
    def _no_bool_count(cls, value: object) -> object:
        if isinstance(value, bool):  # JSON true is not the number 1
            raise ValueError("a boolean is not a number")
        return value


def parse_request(payload: object) -> QueryRequest:
    """The body as a :class:`QueryRequest`, or 422 naming each bad field."""
    try:
        return QueryRequest.model_validate(payload)
    except ValidationError as exc:
        fields = ", ".join(QueryRequest.model_fields)
        problems = []
        for error in exc.errors():
            where = ".".join(str(p) for p in error["loc"]) or "body"
            valid = _valid_for(error["type"], where, fields)
            message = error["msg"]
            problems.append(Problem(where, cut(error.get("input")),
                                         message[:1].lower() + message[1:], valid))
        raise invalid(problems) from None


def _valid_for(error_type: str, where: str, fields: str) -> str:
    if error_type == "extra_forbidden":
        return fields
    if error_type in ("model_type", "model_attributes_type"):
        return "a JSON object with " + fields
    if where == "query":
        return "a non-empty string"
    if where.startswith("boosts"):
        return "an object {source_id: low|medium|high}"
    if where.startswith("sources"):
        return "a list of source ids"
    if where == "top_k":
        return "an integer >= 1"
    if where in ("idf", "explain", "vectors"):
        return "true or false"
    if where == "page":
        return f"an integer from 1 to {MAX_PAGE}"
    if where == "cursor":
        return "the next_cursor of an earlier response"
    return "see the OpenAPI schema at /openapi.json"
