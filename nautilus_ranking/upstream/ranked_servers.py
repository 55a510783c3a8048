"""The ranked route and tool, beside the broker's own: ``POST /v1/request/ranked`` and
the MCP tool ``nautilus_request_ranked``.

The broker's request model forbids unknown fields and its response model strips added
ones, so the ranked form is a route and a tool of its own, added by
``python -m nautilus_ranking.upstream serve`` to the apps the broker builds. Neither
re-implements anything the broker decides: each calls the stock handler itself

- REST: the stock ``POST /v1/request`` route's endpoint, under the stock route's own
  dependencies (``X-API-Key`` or proxy trust, the ``query`` capability, the session
  token), so auth, the agent binding, the audit entry and the attestation are the
  broker's;
- MCP: the stock ``nautilus_request`` tool's function, so the caller, capability,
  impersonation and session checks and ``mcp.max_response_bytes`` are the broker's
  (the bound trims each source's rows from its end, which are that source's
  lowest-ranked; ``NAUTILUS_RANKING_MAX_TOKENS`` is the budget that drops the
  lowest-ranked rows across sources). Its answer is one text block of compact JSON
  (the SDK would indent a dict, and send it twice);

inside a :func:`~.request_scope.ranked_call`, and answers with
:func:`~.ranked_answer.ranked_answer` of the response: rows in global rank order.
``explain`` (default false) adds each score's components; ``whole`` (passage handles
an earlier answer gave) hands those rows over whole, through the same handler. The
stock route and tool are untouched, except that
``NAUTILUS_UPSTREAM_REQUEST_TOOLS=ranked`` takes the stock tool out of the MCP server
(its definition is about ten times the ranked one's in an agent's context, and an agent
offered both may call the unranked one); the ranked tool keeps calling its function.
A seam that is not where the tested broker has it
(version.py) leaves the ranked route or tool out, with one warning.

No ``from __future__ import annotations`` here: FastAPI and FastMCP read the
handlers' annotations as objects (``Request``, ``Context``).
"""

import importlib
from typing import Annotated, Any

from pydantic import Field, StringConstraints

from nautilus_ranking.request.model import MAX_HANDLE_CHARS
from nautilus_ranking.settings.declaration import MAX_SOURCE_ITEMS
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.upstream.ranked_answer import (
    ATTESTATION_META,
    answer_text,
    attestation_out_of_text,
    ranked_answer,
    within_bytes,
)
from nautilus_ranking.upstream.ranked_cites import BrokerCiting
from nautilus_ranking.upstream.ranked_feedback import add_feedback_tool
from nautilus_ranking.upstream.request_scope import ranked_call
from nautilus_ranking.upstream.version import seam_missing

STOCK_PATH = "/v1/request"
RANKED_PATH = "/v1/request/ranked"
STOCK_TOOL = "nautilus_request"
RANKED_TOOL = "nautilus_request_ranked"

RANKED_TOOL_DESCRIPTION = (
    "Ask Nautilus for data, best rows first. The same request as nautilus_request "
    "(same policy, audit and signed attestation), answered with 'rows': one list in "
    "rank order across sources, each {source, rank, score, also_from, row}; read "
    "from the top. 'also_from' names other sources holding the same row. "
    "explain=true adds each score's components. 'truncated_sources' names sources "
    "cut short to fit this reply's size bound. A row too long for the token budget "
    "comes as its best part, marked 'passage' (field, start, end, length, handle); "
    "the same request with whole=[handle] returns those rows whole."
)

#: ``whole``: rows an earlier ranked answer gave as a passage, by ``passage.handle``
#: (bounded as the request model of ``serve`` bounds them).
WholeHandles = Annotated[
    list[Annotated[str, StringConstraints(max_length=MAX_HANDLE_CHARS)]] | None,
    Field(
        default=None,
        max_length=MAX_SOURCE_ITEMS,
        description="rows an earlier answer gave as a passage, by passage.handle: whole",
    ),
]


def add_ranked_route(app: Any, broker: Any = None) -> bool:
    """Add ``POST /v1/request/ranked`` to the broker's FastAPI ``app``; False (one
    warning) when the stock route is not there to go through."""
    from fastapi import Request
    from fastapi.responses import JSONResponse
    from fastapi.routing import APIRoute
    from pydantic import create_model

    stock = next(
        (
            r
            for r in app.router.routes
            if isinstance(r, APIRoute) and r.path == STOCK_PATH and "POST" in (r.methods or ())
        ),
        None,
    )
    body_model = getattr(stock, "body_field", None) if stock is not None else None
    stock_request = getattr(getattr(body_model, "field_info", None), "annotation", None)
    if stock is None or stock_request is None:
        seam_missing(
            "APIRoute POST /v1/request: endpoint(body, request) and its dependencies",
            f"{RANKED_PATH} is not added; {STOCK_PATH} answers as the broker does",
        )
        return False
    ranked_request = create_model(
        "RankedBrokerRequest",
        __base__=stock_request,
        explain=(bool, False),
        whole=WholeHandles,
    )

    citing = BrokerCiting.of(NautilusSettings())  # None with feedback off

    async def post_request_ranked(body: Any, request: Request) -> JSONResponse:
        stock_body = stock_request.model_validate(body.model_dump(exclude={"explain", "whole"}))
        with ranked_call(tuple(body.whole or ())) as call:
            response = await stock.endpoint(stock_body, request)
        answer = ranked_answer(response, call.outcome, bool(body.explain))
        if citing is not None:
            answer = citing.cite(answer, call.outcome, str(getattr(body, "agent_id", "")))
        return JSONResponse(answer)

    post_request_ranked.__annotations__["body"] = ranked_request
    app.add_api_route(
        RANKED_PATH,
        post_request_ranked,
        methods=["POST"],
        dependencies=list(stock.dependencies),
        tags=list(stock.tags) or ["broker"],
        summary="The broker's request, its rows in global rank order",
        description=(
            f"{STOCK_PATH}'s request (plus `explain` and `whole`), through the same auth, "
            "audit and attestation; `rows` replaces `data`: one list, best first, each "
            "with its source, rank, score and also_from; a row too large for the token "
            "budget as its passage, which `whole: [handle]` asks for whole."
        ),
    )
    return True


def add_ranked_tool(mcp: Any, broker: Any = None) -> bool:
    """Add the ``nautilus_request_ranked`` tool to the broker's FastMCP server (the
    broker's SDK, ``mcp<2``); False (one warning) when the stock tool is not there.
    Its answers are held to ``broker``'s ``mcp.max_response_bytes`` (the broker's
    default when it does not say: :func:`max_response_bytes`)."""
    manager = getattr(mcp, "_tool_manager", None)
    get_tool = getattr(manager, "get_tool", None)
    stock = get_tool(STOCK_TOOL) if callable(get_tool) else None
    stock_fn = getattr(stock, "fn", None)
    if not callable(stock_fn):
        seam_missing(
            "FastMCP._tool_manager.get_tool('nautilus_request').fn",
            f"the {RANKED_TOOL} tool is not added; {STOCK_TOOL} answers as the broker does",
        )
        return False

    # the broker's SDK (mcp<2), not ours: its Context marks the argument it fills
    context_class = importlib.import_module("mcp.server.fastmcp").Context
    max_bytes = max_response_bytes(broker)

    settings = NautilusSettings()  # read once, at start-up
    in_meta = settings.upstream_attestation_in_meta
    citing = BrokerCiting.of(settings)  # None with feedback off
    result_class = importlib.import_module("mcp.types").CallToolResult
    text_class = importlib.import_module("mcp.types").TextContent

    async def nautilus_request_ranked(
        agent_id: str,
        intent: str,
        context: dict[str, Any] | None = None,
        explain: bool = False,
        whole: WholeHandles = None,
        ctx: Any = None,
    ) -> Any:
        with ranked_call(tuple(whole or ())) as call:
            response = await stock_fn(agent_id=agent_id, intent=intent, context=context, ctx=ctx)
        answer = ranked_answer(response, call.outcome, bool(explain))
        if citing is not None:
            answer = citing.cite(answer, call.outcome, agent_id)
        if not in_meta:
            return answer_text(within_bytes(answer, max_bytes))
        token, text = attestation_out_of_text(answer)
        meta = {ATTESTATION_META: token} if token is not None else None
        return result_class(
            content=[text_class(type="text", text=answer_text(within_bytes(text, max_bytes)))],
            _meta=meta,
        )

    nautilus_request_ranked.__annotations__["ctx"] = context_class
    mcp.add_tool(
        nautilus_request_ranked,
        name=RANKED_TOOL,
        description=RANKED_TOOL_DESCRIPTION,
        structured_output=False,
    )
    if citing is not None:  # feedback on: the tool to report use of the cites, beside
        add_feedback_tool(mcp, stock_fn, citing)
    if settings.upstream_request_tools == "ranked":
        _remove_stock_tool(manager)
    return True


def _remove_stock_tool(manager: Any) -> None:
    """The stock tool out of ``tools/list`` and out of reach (the ranked tool holds
    its function); one warning, and both listed, when the manager cannot remove one."""
    remove = getattr(manager, "remove_tool", None)
    if not callable(remove):
        seam_missing(
            "FastMCP._tool_manager.remove_tool('nautilus_request')",
            f"{STOCK_TOOL} stays listed beside {RANKED_TOOL}",
        )
        return
    remove(STOCK_TOOL)


#: The broker's own default ``mcp.max_response_bytes`` (``MCPConfig``, 0.3.0).
DEFAULT_MAX_RESPONSE_BYTES = 262_144


def max_response_bytes(broker: Any) -> int | None:
    """``broker.config.mcp.max_response_bytes`` (None: unbounded, as the broker's own
    tool then is); the broker's default when there is no broker or no such setting."""
    mcp_config = getattr(getattr(broker, "config", None), "mcp", None)
    value = getattr(mcp_config, "max_response_bytes", DEFAULT_MAX_RESPONSE_BYTES)
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value > 0):
        return value
    return DEFAULT_MAX_RESPONSE_BYTES
