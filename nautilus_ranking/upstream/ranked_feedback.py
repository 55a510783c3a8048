"""Inside the broker, with ``NAUTILUS_FEEDBACK`` on: the ``nautilus_feedback`` tool, beside
``nautilus_request_ranked``, through which an agent reports what it did with the rows
of a ranked answer, by their ``cite`` handles.

The report is the one ``serve``'s ``POST /v1/feedback`` and MCP ``feedback`` tool take
(``request/feedback.py``: the same actions, bounds, signature, lifetime and errors
naming the field) and goes to the same sinks. Who may report on a cite is the broker's
to say: a cite made inside the broker names the agent its answer was made for
(:func:`~.ranked_cites.agent_client`), and the tool takes that ``agent_id`` through the
broker's own caller checks, those of its stock ``nautilus_request`` tool (the
credential's ``query`` capability; a credential bound to an agent may name only that
agent). The stock function is called with the ranked call marked ``check_only``: once
its checks pass and it asks the broker, the attachment's ``arequest`` raises
:class:`~.request_scope.CallerChecked` in place of the request, so no request is made
and none is audited. A cite from another agent's answer is refused (403,
``cite-not-yours``).

No ``from __future__ import annotations`` here: FastMCP reads the handler's
annotations as objects (``Context``).
"""

import importlib
from typing import Annotated, Any, Literal

from pydantic import Field

from nautilus_ranking.errors import NautilusError
from nautilus_ranking.feedback.events import QUERY_ACTIONS, ROW_ACTIONS
from nautilus_ranking.request.errors import ProblemError
from nautilus_ranking.request.feedback import MAX_CITES, report_feedback
from nautilus_ranking.upstream.ranked_answer import answer_text
from nautilus_ranking.upstream.ranked_cites import BrokerCiting, agent_client
from nautilus_ranking.upstream.request_scope import CallerChecked, ranked_call

FEEDBACK_TOOL = "nautilus_feedback"

FEEDBACK_TOOL_DESCRIPTION = (
    "Records an action on rows of nautilus_request_ranked answers, by their cite "
    "values: cited, used, fetched or rejected for those rows; retried, task_success or "
    "task_failure for the answer they came from. agent_id: the agent that asked."
)

#: The actions, as the tool's schema lists them (``request/feedback.py`` checks them;
#: ``ACTIONS`` is what a test holds it to).
Action = Literal["cited", "used", "fetched", "rejected", "retried", "task_success", "task_failure"]
ACTIONS = (*ROW_ACTIONS, *QUERY_ACTIONS)


class CallerNotCheckedError(NautilusError, RuntimeError):
    """The broker's handler returned without asking: its caller checks did not run as
    the attachment expects, so nothing is recorded."""


def add_feedback_tool(mcp: Any, stock_fn: Any, citing: BrokerCiting) -> None:
    """Add ``nautilus_feedback`` to the broker's FastMCP server (``mcp<2``), its caller
    checks those of ``stock_fn`` (the stock ``nautilus_request`` tool's function)."""
    context_class = importlib.import_module("mcp.server.fastmcp").Context
    result_class = importlib.import_module("mcp.types").CallToolResult
    text_class = importlib.import_module("mcp.types").TextContent

    async def nautilus_feedback(
        agent_id: str,
        action: Action,
        cites: Annotated[list[str], Field(min_length=1, max_length=MAX_CITES)],
        ctx: Any = None,
    ) -> Any:
        await _broker_checks(stock_fn, agent_id, ctx)
        try:
            out = report_feedback(
                citing.settings,
                {"action": action, "cites": cites},
                caller=agent_client(citing.keys, agent_id),
            )
        except ProblemError as exc:
            body = {"status": exc.status, "type": exc.slug, "title": exc.title}
            body |= {"detail": exc.detail, **exc.extra}
            text = f"{exc.title}: {exc.detail}"
            return result_class(
                content=[text_class(type="text", text=text)],
                structuredContent={"error": body},
                isError=True,
            )
        return result_class(
            content=[text_class(type="text", text=answer_text(out))], structuredContent=out
        )

    nautilus_feedback.__annotations__["ctx"] = context_class
    mcp.add_tool(
        nautilus_feedback,
        name=FEEDBACK_TOOL,
        description=FEEDBACK_TOOL_DESCRIPTION,
        structured_output=False,
    )


async def _broker_checks(stock_fn: Any, agent_id: str, ctx: Any) -> None:
    """The stock tool's caller checks for ``agent_id`` (its refusal raised as it raises
    it), without the request it would make."""
    try:
        with ranked_call(check_only=True):
            await stock_fn(agent_id=agent_id, intent="", context=None, ctx=ctx)
    except CallerChecked:
        return
    raise CallerNotCheckedError(
        "the broker's nautilus_request answered without asking the broker: "
        "the caller could not be checked, so nothing is recorded"
    )
