"""``POST /v1/query``'s body, and its per-request overrides turned into a broker.

Overrides go through the same parsers as the environment variables
(``collect_source_boosts`` for ``boosts``, the integer and boolean parsers for
``top_k`` and ``idf``), so a level or an id means the same thing in a manifest
and in a request; a bad value is refused with 422 instead of being skipped,
because the caller is there to fix it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from nautilus.broker import Broker, synthesizer_for
from nautilus.config import NautilusSettings, collect_source_boosts
from nautilus.embedders import Embedder
from nautilus.errors import Problem, cut
from nautilus.pages import MAX_PAGE, PageError, Paging, paging
from nautilus.records import BrokerResponse
from nautilus.service.problems import ProblemError, invalid
from nautilus.settings_parsing import parse_bool, parse_int
from nautilus.synthesis.base import Synthesizer

OVERRIDES = ("top_k", "boosts", "idf", "sources")


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


@dataclass(frozen=True)
class Plan:
    """What one request runs: a broker (shared, or a light per-request one), and the
    page to cut from its answer when the request asked for one."""

    broker: Broker
    explain: dict[str, Any]
    paging: Paging | None = None


def plan(request: QueryRequest, broker: Broker, settings: NautilusSettings,
         embedder: Embedder | None, max_query_chars: int) -> Plan:
    """Validate the overrides against the settings' parsers and the broker's sources."""
    problems: list[Problem] = []
    if len(request.query) > max_query_chars:
        problems.append(Problem("query", f"({len(request.query)} characters)",
                                     "too long (NAUTILUS_SERVE_MAX_QUERY_CHARS)",
                                     f"at most {max_query_chars} characters"))
    ids = [s.id for s in broker.sources]
    known = {i.lower(): i for i in ids}
    update: dict[str, Any] = {}
    if request.top_k is not None:
        top_k, problem = parse_int("top_k", request.top_k)
        if problem:
            problems.append(Problem("top_k", problem.value, problem.reason,
                                         "an integer >= 1"))
        update["ranking_top_k"] = top_k
    if request.idf is not None:
        idf, problem = parse_bool("idf", request.idf, False)
        update["ranking_idf"] = idf
    if request.boosts is not None:
        boosts, boost_problems = collect_source_boosts(request.boosts)
        problems.extend(Problem("boosts", p.value, p.reason, p.valid)
                        for p in boost_problems)
        for sid in boosts:
            if sid not in known:
                problems.append(Problem("boosts", sid, f"no source has id {sid!r}",
                                             ", ".join(ids)))
        update["source_boosts"] = boosts
    chosen = list(broker.sources)
    if request.sources is not None:
        wanted = [s.strip().lower() for s in request.sources]
        for raw, sid in zip(request.sources, wanted, strict=True):
            if sid not in known:
                problems.append(Problem("sources", cut(raw), "unknown source id",
                                             ", ".join(ids)))
        if not wanted:
            problems.append(Problem("sources", "[]", "no source asked",
                                         "one or more of: " + ", ".join(ids)))
        chosen = [s for s in broker.sources if s.id.lower() in set(wanted)]
    effective = settings.model_copy(update=update) if update else settings
    pages = None
    if not problems:
        try:
            pages = paging(request.query, effective, [s.id for s in chosen],
                           page=request.page, cursor=request.cursor)
        except PageError as exc:
            problems.append(exc.problem)
    if problems:
        raise invalid(problems)
    explain = {"synthesizer": type(broker.synthesizer).__name__,
               "top_k": effective.ranking_top_k, "idf": effective.ranking_idf,
               "boosts": effective.source_boosts, "sources": [s.id for s in chosen],
               "overrides": [name for name in OVERRIDES if getattr(request, name) is not None]}
    if pages is not None:
        explain["page"] = pages.number
    if not update and request.sources is None and pages is None:
        return Plan(broker, explain)
    synthesizer: Synthesizer = broker.synthesizer
    if pages is not None:
        synthesizer = pages.synthesizer(effective, embedder)
    elif update:
        synthesizer = synthesizer_for(effective, embedder)
    explain["synthesizer"] = type(synthesizer).__name__
    return Plan(Broker(chosen, synthesizer, broker.limit), explain, pages)


def cut_page(run: Plan, response: BrokerResponse,
             ) -> tuple[BrokerResponse, dict[str, Any] | None]:
    """The asked page of ``response`` and its ``page`` object (the response as it is
    when no page was asked); 409 when the sources' answers moved under the cursor."""
    if run.paging is None:
        return response, None
    try:
        return run.paging.cut(response)
    except PageError as exc:
        raise ProblemError(409, "cursor-stale", "Cursor out of date", str(exc),
                           extra={"field": exc.field, "value": exc.value,
                                  "valid": exc.valid}) from None


def forbid_overrides(request: QueryRequest) -> None:
    """403 when the operator turned overrides off and the request carries one."""
    given = [name for name in OVERRIDES if getattr(request, name) is not None]
    if given:
        raise ProblemError(
            403, "overrides-forbidden", "Overrides forbidden",
            f"this service does not accept per-request overrides ({', '.join(given)}): "
            "NAUTILUS_SERVE_ALLOW_OVERRIDES=false",
            extra={"field": given[0], "setting": "NAUTILUS_SERVE_ALLOW_OVERRIDES"})
