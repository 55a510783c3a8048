"""The MCP tools ``search`` and ``list_sources``, over a server's shared state.

A ``search`` call is a ``POST /v1/query`` body: the same request model (its input
schema is the model's), answered by the same :meth:`ServerState.answer` — the same
fields, levels, ids, limits and messages, the same broker loop, deadline and
concurrency limit, the same Prometheus series. A bad argument
is a tool error (``isError``) whose text names the field, the bad value and the
valid choices — a model reads it and retries; never a traceback. What the tools say of
themselves is ``definitions.py``; what a search answers, ``results.py``.
"""

from __future__ import annotations

import time
from typing import Any

import mcp_types as types

from nautilus_ranking.errors import cut
from nautilus_ranking.log import get_logger
from nautilus_ranking.mcp.definitions import FEEDBACK, LIST_SOURCES, SEARCH, definitions
from nautilus_ranking.mcp.results import (
    error_result,
    row_text,
    scored_passage,
    search_content,
    search_text,
)
from nautilus_ranking.request.errors import ProblemError
from nautilus_ranking.request.feedback import report_feedback
from nautilus_ranking.request.model import parse_request
from nautilus_ranking.request.profile_choice import allowed, take_profile
from nautilus_ranking.service import metrics
from nautilus_ranking.service.state import ServerState
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.sources.base import declared_order

logger = get_logger("nautilus_ranking.mcp")


class Tools:
    """The tools over a server's shared state (as a service worker has it)."""

    def __init__(self, state: ServerState) -> None:
        self.state = state

    @property
    def settings(self) -> NautilusSettings:
        return self.state.settings

    def tools(self) -> list[types.Tool]:
        return definitions(self.state)

    # --- the tools' listing ----------------------------------------------------------

    # --- the tools' answers -----------------------------------------------------------

    async def call(
        self, name: str, arguments: dict[str, Any] | None, key: bytes | None = None
    ) -> types.CallToolResult:
        """Answer one tool call; ``key``: the API key the HTTP transport checked (None
        over stdio), whose profiles the call may use."""
        started = time.perf_counter()
        status = 200
        known = name in (SEARCH, LIST_SOURCES, FEEDBACK)
        try:
            if name == SEARCH:
                result = await self.search(arguments or {}, key)
            elif name == LIST_SOURCES:
                result = self.list_sources(key)
            elif name == FEEDBACK and self.settings.feedback:
                result = self.feedback(arguments or {}, key)
            else:
                raise ProblemError(
                    404,
                    "unknown-tool",
                    "Unknown tool",
                    f"no tool named {cut(name)!r} (valid: {SEARCH}, {LIST_SOURCES})",
                )
        except ProblemError as exc:
            status = exc.status
            result = error_result(exc)
        finally:
            elapsed = time.perf_counter() - started
            # a tool name is the caller's text: only the known ones are metric labels
            route = f"mcp:{name}" if known else "mcp:other"
            metrics.REQUEST_DURATION.labels(route, str(status)).observe(elapsed)
            logger.info(
                "mcp_tool_call", tool=name[:64], status=status, duration_ms=round(elapsed * 1000, 2)
            )
        return result

    async def search(
        self, arguments: dict[str, Any], key: bytes | None = None
    ) -> types.CallToolResult:
        payload, profile = take_profile(arguments, bool(self.state.engine.profiles))
        result = await self.state.answer(
            parse_request(payload), row_text=row_text, profile=profile, key=key
        )
        out = search_content(result)
        text = search_text(out, [scored_passage(r) for r in result.response.ranking])
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structured_content=out
        )

    def feedback(self, arguments: dict[str, Any], key: bytes | None) -> types.CallToolResult:
        """Record an action on results by their cites (``request/feedback.py``)."""
        payload, profile = take_profile(arguments, bool(self.state.engine.profiles))
        out = report_feedback(self.settings, payload, key, None if key else profile)
        text = f"recorded {len(out['event_ids'])} {out['action']} event(s)"
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structured_content=out
        )

    def list_sources(self, key: bytes | None = None) -> types.CallToolResult:
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
        out: dict[str, Any] = {"sources": rows}
        if self.state.engine.profiles:  # what this caller's key may rank with
            out["profiles"] = allowed(self.state.engine.profiles, self.state.grant(key))
            lines.append(
                f"profiles: default {out['profiles']['default'] or '(none: the global knobs)'}"
                f"; may name: {', '.join(out['profiles']['allowed']) or 'none'}"
            )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="\n".join(lines))],
            structured_content=out,
        )
