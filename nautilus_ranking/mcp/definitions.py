"""What the MCP tools say of themselves: ``tools/list``'s names, descriptions and schemas.

Kept apart from the calls (``tools.py``) and the answers (``results.py``): every word
here is read by the agent on every connection, so it is written, and counted, as one.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types

from nautilus_ranking.request.model import QueryRequest
from nautilus_ranking.request.pages import MAX_PAGE
from nautilus_ranking.service.state import ServerState
from nautilus_ranking.synthesis.ranking_boost import BOOST_LEVELS

SEARCH = "search"
LIST_SOURCES = "list_sources"


def definitions(state: ServerState) -> list[types.Tool]:
    """The tools as ``tools/list`` describes them, for this server's sources and settings."""
    settings = state.settings
    ids = state.engine.source_ids
    boosts = ", ".join(f"{k}:{v}" for k, v in settings.source_boosts.items()) or "none"
    top_k = settings.ranking_top_k
    ranked = state.engine.broker.synthesizer.ranking_enabled
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
            f"its answer within {settings.serve_request_timeout_s:g} s or a "
            "deadline error."
        ),
        input_schema=search_schema(
            ids, settings.serve_max_query_chars, profiled=bool(state.engine.profiles)
        ),
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


def search_schema(ids: list[str], max_chars: int, profiled: bool = False) -> dict[str, Any]:
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
    if profiled:  # no names listed: a caller learns its own from its key's operator
        properties["profile"] = {"type": "string", "description": "ranking profile"}
    return {
        "type": "object",
        "properties": properties,
        "required": ["query"],
        "additionalProperties": False,
    }


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
