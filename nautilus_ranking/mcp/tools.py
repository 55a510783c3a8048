"""The MCP tools ``search`` and ``list_sources``, over a server's shared state.

A ``search`` call is a ``POST /v1/query`` body: the same request model (its input
schema is the model's), answered by the same :meth:`ServerState.answer` — the same
fields, levels, ids, limits and messages, the same broker loop, deadline and
concurrency limit, the same Prometheus series. A bad argument
is a tool error (``isError``) whose text names the field, the bad value and the
valid choices — a model reads it and retries; never a traceback.
"""

from __future__ import annotations

import json
import textwrap
import time
from typing import Any

import mcp_types as types

from nautilus_ranking.config import NautilusSettings
from nautilus_ranking.errors import cut
from nautilus_ranking.log import get_logger
from nautilus_ranking.records import VECTOR_FIELDS, RankedRow
from nautilus_ranking.request.answer import Answer
from nautilus_ranking.request.errors import ProblemError
from nautilus_ranking.request.model import QueryRequest, parse_request
from nautilus_ranking.request.pages import MAX_PAGE
from nautilus_ranking.service import metrics
from nautilus_ranking.service.problems import strict_json
from nautilus_ranking.service.state import ServerState
from nautilus_ranking.sources.base import declared_order
from nautilus_ranking.synthesis.ranking_boost import BOOST_LEVELS

logger = get_logger("nautilus_ranking.mcp")

SEARCH = "search"
LIST_SOURCES = "list_sources"


class Tools:
    """The tools over a server's shared state (as a service worker has it)."""

    def __init__(self, state: ServerState) -> None:
        self.state = state

    @property
    def settings(self) -> NautilusSettings:
        return self.state.settings

    # --- the tools' listing ----------------------------------------------------------

    def tools(self) -> list[types.Tool]:
        ids = self.state.engine.source_ids
        boosts = ", ".join(f"{k}:{v}" for k, v in self.settings.source_boosts.items()) or "none"
        top_k = self.settings.ranking_top_k
        ranked = self.state.engine.broker.synthesizer.ranking_enabled
        order = (
            "one ranking of their rows, best first: each result has its source, its "
            "score and why it scored so (relevance to the query, agreement between "
            "sources, boost)"
            if ranked
            else "their rows in each source's own order (ranking is off on this server: "
            "no scores; passing top_k, boosts or idf turns it on for the call)"
        )
        search = types.Tool(
            name=SEARCH,
            title="Search every source" + (", ranked" if ranked else ""),
            description=(
                "Ask every source (" + ", ".join(ids) + ") at once and get " + order + ". "
                f"top_k keeps the K best (default {top_k if top_k else 'all rows'}). "
                "boosts tilts the ranking toward sources you trust more for this query: "
                "{source_id: level}, levels low < medium < high (and -low, -medium, -high to hold "
                "a noisy source back); a boosted source wins close "
                "calls but cannot lift an irrelevant row over clearly better ones. Boosts "
                f"given here replace the server's ({boosts}). sources limits the search to "
                "some sources. Results past the first top_k: pass page (2, 3, ...) or the "
                "next_cursor of the previous answer; the same query and settings always give "
                "the same pages. max_tokens hands over only the best results whose lines fit "
                "in that many tokens (the first always), so a short answer is not padded "
                "with poor rows; the answer says how many were left out. A source that "
                "fails is listed under sources_errored; the others still answer. A call gets "
                f"its answer within {self.settings.serve_request_timeout_s:g} s or a "
                "deadline error."
            ),
            input_schema=search_schema(ids, self.settings.serve_max_query_chars),
            output_schema=_SEARCH_OUTPUT,
            annotations=types.ToolAnnotations(
                read_only_hint=True,
                idempotent_hint=True,
                destructive_hint=False,
                open_world_hint=False,
            ),
        )
        listing = types.Tool(
            name=LIST_SOURCES,
            title="List the sources",
            description=(
                "The sources search asks: each one's id (what boosts and sources "
                "name), its type, whether it declares its own order as relevance "
                "(a full-text or vector index) or not (a table), its current boost, "
                "and whether it answered its last health probe."
            ),
            input_schema={"type": "object", "properties": {}, "additionalProperties": False},
            output_schema=_SOURCES_OUTPUT,
            annotations=types.ToolAnnotations(
                read_only_hint=True,
                idempotent_hint=True,
                destructive_hint=False,
                open_world_hint=False,
            ),
        )
        return [search, listing]

    # --- the tools' answers -----------------------------------------------------------

    async def call(self, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        started = time.perf_counter()
        status = 200
        known = name in (SEARCH, LIST_SOURCES)
        try:
            if name == SEARCH:
                result = await self.search(arguments or {})
            elif name == LIST_SOURCES:
                result = self.list_sources()
            else:
                raise ProblemError(
                    404,
                    "unknown-tool",
                    "Unknown tool",
                    f"no tool named {cut(name)!r} (valid: {SEARCH}, {LIST_SOURCES})",
                )
        except ProblemError as exc:
            status = exc.status
            result = _error(exc)
        finally:
            elapsed = time.perf_counter() - started
            # a tool name is the caller's text: only the known ones are metric labels
            route = f"mcp:{name}" if known else "mcp:other"
            metrics.REQUEST_DURATION.labels(route, str(status)).observe(elapsed)
            logger.info(
                "mcp_tool_call", tool=name[:64], status=status, duration_ms=round(elapsed * 1000, 2)
            )
        return result

    async def search(self, arguments: dict[str, Any]) -> types.CallToolResult:
        result = await self.state.answer(parse_request(arguments), row_text=_row_text)
        out = _search_content(result)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=_search_text(out))], structured_content=out
        )

    def list_sources(self) -> types.CallToolResult:
        failing = self.state.readiness.failing()
        types_by_id = self.state.source_types
        rows = [
            {
                "id": s.id,
                "type": types_by_id.get(s.id, "custom"),
                "declares_order": declared_order(s),
                "boost": self.settings.source_boosts.get(s.id.lower()),
                "healthy": s.id not in failing,
                "problem": failing.get(s.id),
            }
            for s in self.state.engine.sources
        ]
        lines = [
            f"{r['id']} ({r['type']}): "
            + (
                "ranked"
                if r["declares_order"]
                else "unranked"
                if r["declares_order"] is False
                else "order detected per query"
            )
            + (f", boost {r['boost']}" if r["boost"] else "")
            + (", healthy" if r["healthy"] else f", DOWN: {r['problem']}")
            for r in rows
        ]
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="\n".join(lines))],
            structured_content={"sources": rows},
        )


def search_schema(ids: list[str], max_chars: int) -> dict[str, Any]:
    """The ``search`` tool's input schema: :class:`QueryRequest`'s own, in the plain
    types a model reads (an optional field is its type, not a union with null), with
    this server's source ids, boost levels and query length filled in."""
    schema = QueryRequest.model_json_schema()
    properties: dict[str, Any] = {}
    for name, spec in schema["properties"].items():
        spec = {k: v for k, v in spec.items() if k not in ("title", "default")}
        options = [o for o in spec.pop("anyOf", []) if o.get("type") != "null"]
        if options:
            spec = {**options[0], **spec}
        properties[name] = spec
    properties["query"]["maxLength"] = max_chars
    properties["query"]["description"] += f" (at most {max_chars} characters)"
    properties["top_k"]["minimum"] = 1
    properties["page"].update(minimum=1, maximum=MAX_PAGE)
    properties["boosts"].update(
        propertyNames={"enum": ids},
        additionalProperties={"type": "string", "enum": list(BOOST_LEVELS)},
    )
    properties["sources"]["items"] = {"type": "string", "enum": ids}
    return {
        "type": "object",
        "properties": properties,
        "required": ["query"],
        "additionalProperties": False,
    }


def _search_content(result: Answer) -> dict[str, Any]:
    request, response = result.request, result.response
    out = {
        "query": request.query,
        "results": [
            _result(r, bool(request.explain), result.ranked, bool(request.vectors))
            for r in response.ranking
        ],
        "page": result.page,
        "sources_queried": list(response.sources_queried),
        "sources_errored": [
            {"source_id": e.source_id, "error_type": e.error_type, "message": e.message}
            for e in response.sources_errored
        ],
        "response_hash": response.response_hash,
        "request_id": response.request_id,
    }
    if response.budget is not None:
        out["budget"] = response.budget
    if response.cut is not None:
        out["cut"] = response.cut
    if request.explain:
        out["explain"] = result.plan.explain
    return out


def _result(r: RankedRow, explain: bool, ranked: bool, vectors: bool) -> dict[str, Any]:
    components = r.explain()
    why = (
        {k: v for k, v in components.items() if k not in ("source_id", "rank", "score")}
        if explain
        else r.why()
    )
    why["also_from"] = [c.as_dict() for c in r.also_from]
    # A vector source's 1,024 floats are for the ranker: most of what a model would read.
    row = r.row if vectors else {k: v for k, v in r.row.items() if k not in VECTOR_FIELDS}
    return {
        "rank": r.rank,
        "source": r.source_id,
        "id": _as_http(r.row.get("id")),
        "score": r.score if ranked else None,
        "source_rank": r.source_rank,
        "why": why,
        "row": _as_http(row),
    }


def _as_http(value: Any) -> Any:
    """``value`` as ``POST /v1/query`` writes it: JSON, a value JSON does not know (bytes,
    an object) as its text, a NaN as null. A row the broker kept is answered, never the
    reason the whole call fails (the SDK could not serialise it)."""
    return json.loads(strict_json(value))


def _search_text(out: dict[str, Any]) -> str:
    """The compact form an agent reads: one line a result, then errors, budget, paging."""
    results = out["results"]
    lines = [f"{len(results)} result(s) for {out['query']!r}"]
    lines.extend(_result_line(r) for r in results)
    for e in out["sources_errored"]:
        lines.append(f"source {e['source_id']} failed ({e['error_type']}): {e['message']}")
    budget = out.get("budget")
    if budget is not None:
        lines.append(
            f"budget: {budget['tokens_used']} of {budget['max_tokens']} tokens "
            f"({'estimated' if budget.get('tokenizer', 'estimate') == 'estimate' else 'exact'}), "
            f"{budget['rows_left_out']} more result(s) left out"
            + (
                " (the first result alone is over the budget)"
                if budget["first_row_over_budget"]
                else ""
            )
        )
    cut = out.get("cut")
    if cut is not None:
        lines.append(f"cut: {cut['setting']} left out {cut['rows_left_out']} more result(s)")
    page = out["page"]
    if page is not None:
        lines.append(
            f"page {page['number']}; "
            + (f"next_cursor: {page['next_cursor']}" if page["next_cursor"] else "last page")
        )
    return "\n".join(lines)


def _result_line(r: dict[str, Any]) -> str:
    score = "" if r["score"] is None else f" score {r['score']:.4f}"
    copies = r["why"]["also_from"]
    also = (
        "; also in: "
        + ", ".join(
            f"{a['source_id']}:{a['id']}" + (" (near)" if a["copy"] == "near" else "")
            for a in copies
        )
        if copies
        else ""
    )
    return f"{r['rank']}. [{r['source']}]{score}{also}: {_line(r['row'])}"


def _row_text(row: RankedRow, request: QueryRequest, ranked: bool) -> str:
    """A row as the tool's text hands it to a model: its result line (what a token
    budget counts)."""
    return _result_line(_result(row, bool(request.explain), ranked, bool(request.vectors)))


#: Fields a row's line leaves out: its id (shown first) and the name of the model that
#: made its vector (a vector source's rows carry it; it says nothing about the row).
_NOT_TEXT = frozenset({"id", "embedding_model"})


def _line(row: dict[str, Any], width: int = 200) -> str:
    """A row in one line: its id, then its text fields (a model reads the whole line)."""
    ident = row.get("id")
    texts = [
        " ".join(v.split())
        for k, v in row.items()
        if isinstance(v, str) and k not in _NOT_TEXT and v.strip() and v != ident
    ]
    line = (f"{ident} — " if ident is not None else "") + " | ".join(texts)
    return textwrap.shorten(line, width=width, placeholder="…") if line else "(no text)"


def _error(exc: ProblemError) -> types.CallToolResult:
    """A tool error: the problem's text for the model, its fields for a program."""
    body = {
        "status": exc.status,
        "type": exc.slug,
        "title": exc.title,
        "detail": exc.detail,
        **{
            k: v
            for k, v in exc.extra.items()
            if k in ("field", "value", "valid", "errors", "setting")
        },
    }
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{exc.title}: {exc.detail}")],
        structured_content={"error": body},
        is_error=True,
    )


_SEARCH_OUTPUT: dict[str, Any] = {
    "type": "object",
    "required": [
        "query",
        "results",
        "page",
        "sources_queried",
        "sources_errored",
        "response_hash",
        "request_id",
    ],
    "properties": {
        "query": {"type": "string"},
        "results": {
            "type": "array",
            "description": "best first",
            "items": {
                "type": "object",
                "required": ["rank", "source", "id", "score", "why", "row"],
                "properties": {
                    "rank": {"type": "integer", "description": "1 is the best overall"},
                    "source": {"type": "string"},
                    "id": {"description": "the row's own id, null if it has none"},
                    "score": {
                        "type": ["number", "null"],
                        "description": "null when ranking "
                        "is off (rows passed through in the sources' order)",
                    },
                    "source_rank": {"type": "integer"},
                    "why": {"type": "object", "description": "the score's components"},
                    "row": {
                        "type": "object",
                        "description": "the row as its source gave it "
                        "(its vector left out unless vectors is true)",
                    },
                },
            },
        },
        "page": {"type": ["object", "null"]},
        "sources_queried": {"type": "array", "items": {"type": "string"}},
        "sources_errored": {"type": "array", "items": {"type": "object"}},
        "response_hash": {"type": "string"},
        "request_id": {"type": "string"},
        "budget": {
            "type": "object",
            "description": "with max_tokens: the budget, the "
            "tokens used and how many ranked results were left out",
        },
        "cut": {
            "type": "object",
            "description": "with cut: the setting and how many ranked results it left out",
        },
        "explain": {"type": "object"},
    },
}

_SOURCES_OUTPUT: dict[str, Any] = {
    "type": "object",
    "required": ["sources"],
    "properties": {
        "sources": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["id", "type", "declares_order", "healthy"],
                "properties": {
                    "id": {"type": "string"},
                    "type": {"type": "string"},
                    "declares_order": {"type": ["boolean", "null"]},
                    "boost": {"type": ["string", "null"]},
                    "healthy": {"type": "boolean"},
                    "problem": {"type": ["string", "null"]},
                },
            },
        }
    },
}
