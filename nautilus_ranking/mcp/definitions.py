"""What the MCP tools say of themselves: ``tools/list``'s names, descriptions and schemas.

Kept apart from the calls (``tools.py``) and the answers (``results.py``): every word
here is read by the agent on every connection, so it is written, and counted, as one.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types

from nautilus_ranking.feedback.cites import MAX_CITE_CHARS
from nautilus_ranking.feedback.events import QUERY_ACTIONS, ROW_ACTIONS
from nautilus_ranking.request.feedback import MAX_CITES
from nautilus_ranking.request.model import QueryRequest
from nautilus_ranking.request.pages import MAX_PAGE
from nautilus_ranking.service.state import ServerState
from nautilus_ranking.synthesis.ranking_boost import BOOST_LEVELS

SEARCH = "search"
LIST_SOURCES = "list_sources"
#: Listed only with NAUTILUS_FEEDBACK on (off, tools/list is as without it).
FEEDBACK = "feedback"


def definitions(state: ServerState) -> list[types.Tool]:
    """The tools as ``tools/list`` describes them, for this server's sources and settings."""
    settings = state.settings
    ids = state.engine.source_ids
    top_k = settings.ranking_top_k
    ranked = state.engine.broker.synthesizer.ranking_enabled
    order = (
        "one list, best first, each with its source, score and why"
        if ranked
        else "each source's rows in its own order (ranking is off here: top_k, boosts "
        "or idf turn it on)"
    )
    search = types.Tool(
        name=SEARCH,
        title="Search every source" + (", ranked" if ranked else ""),
        description=(
            f"Ask every source; get {order}. "
            f"Returns {f'the {top_k} best' if top_k else 'every row'} unless top_k says. "
            "boosts: {source: level}, low < medium < high favours a trusted source "
            "(close calls only), -low … -high holds one back. More: page or next_cursor. "
            "Failed sources: sources_errored."
        ),
        input_schema=search_schema(
            ids, settings.serve_max_query_chars, profiled=bool(state.engine.profiles)
        ),
        output_schema=_SEARCH_OUTPUT,
        annotations=_READ_ONLY,
    )
    listing = types.Tool(
        name=LIST_SOURCES,
        title="List the sources",
        description="Each source: id, type, whether its order is relevance, boost, health.",
        input_schema={"type": "object", "properties": {}, "additionalProperties": False},
        output_schema=_SOURCES_OUTPUT,
        annotations=_READ_ONLY,
    )
    if not settings.feedback:
        return [search, listing]
    feedback = types.Tool(
        name=FEEDBACK,
        title="Report what was done with results",
        description=(
            "Records an action on search results, by their cite values: cited, used, "
            "fetched or rejected for those rows; retried, task_success or task_failure "
            "for the answer they came from."
        ),
        input_schema=FEEDBACK_INPUT,
        annotations=types.ToolAnnotations(
            read_only_hint=False,
            idempotent_hint=True,
            destructive_hint=False,
            open_world_hint=False,
        ),
    )
    return [search, listing, feedback]


_READ_ONLY = types.ToolAnnotations(
    read_only_hint=True, idempotent_hint=True, destructive_hint=False, open_world_hint=False
)

#: Each argument of search as the agent reads it: its type as accepted and a few words
#: on what to pass, written for MCP alone (POST /v1/query's OpenAPI schema and --help keep
#: QueryRequest's own descriptions, which speak to an operator). Every field of
#: QueryRequest, in its order (tests/mcp checks both).
_ARGUMENTS: dict[str, dict[str, Any]] = {
    "query": {"type": "string", "minLength": 1},
    "top_k": {"type": "integer", "minimum": 1, "description": "rows to return"},
    "boosts": {"type": "object"},
    "idf": {"type": "boolean", "description": "discount common words"},
    "sources": {"type": "array", "minItems": 1, "description": "only these"},
    "max_tokens": {
        "type": "integer",
        "minimum": 1,
        "description": "fit in N tokens",
    },
    "whole": {"type": "array", "description": "passage handles to get whole"},
    "cut": {
        "type": "string",
        "description": "relative:0.8, floor:0.6, gap:0.1",
    },
    "near_duplicates": {
        "type": ["number", "string"],
        "description": "merge near copies: (0,1] or on",
    },
    "diversity": {
        "type": ["number", "string"],
        "description": "0-1: favour novel rows",
    },
    "max_per_source": {
        "type": "integer",
        "minimum": 1,
        "description": "rows per source, a page",
    },
    "canonical_sources": {
        "type": "array",
        "description": "whose copy to keep",
    },
    "min_confidence": {"type": "number", "description": "0-1: abstain below"},
    "recency": {"type": "string", "description": "newer first: half_life:90d"},
    "as_of": {"type": "string"},
    "explain": {"type": "boolean", "description": "score components"},
    "vectors": {"type": "boolean"},
    "page": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE},
    "cursor": {"type": "string", "description": "next_cursor"},
}


def search_schema(ids: list[str], max_chars: int, profiled: bool = False) -> dict[str, Any]:
    """The ``search`` tool's input schema: every field of :class:`QueryRequest`, typed as
    it accepts and described for the agent (:data:`_ARGUMENTS`), with this server's
    source ids, boost levels and query length filled in; ``profiled``: a ``profile``
    argument too (a server with ranking profiles)."""
    properties = {name: dict(_ARGUMENTS[name]) for name in QueryRequest.model_fields}
    properties["query"]["maxLength"] = max_chars
    properties["boosts"].update(
        propertyNames={"enum": ids},
        additionalProperties={"enum": list(BOOST_LEVELS)},
    )
    properties["sources"]["items"] = {"enum": ids}
    properties["canonical_sources"]["items"] = {"enum": ids}
    if profiled:  # no names listed: a caller learns its own from its key's operator
        properties["profile"] = {"type": "string", "description": "ranking profile"}
    return {
        "type": "object",
        "properties": properties,
        "required": ["query"],
        "additionalProperties": False,
    }


#: What a search answers, in the few words an agent needs (the description says the rest).
_SEARCH_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "results": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "rank": {"type": "integer"},
                    "source": {"type": "string"},
                    "id": {},
                    "score": {"type": ["number", "null"]},
                    "why": {"type": "object"},
                    "row": {"type": "object"},
                    "passage": {"type": "object"},
                },
            },
        },
        "next_cursor": {"type": ["string", "null"]},
    },
}

#: The ``feedback`` tool's input: an action and the cites it is about.
FEEDBACK_INPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"enum": [*ROW_ACTIONS, *QUERY_ACTIONS]},
        "cites": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_CITES,
            "items": {"type": "string", "maxLength": MAX_CITE_CHARS},
        },
    },
    "required": ["action", "cites"],
    "additionalProperties": False,
}

_SOURCES_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {"sources": {"type": "array", "items": {"type": "object"}}},
}
