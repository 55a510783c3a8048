"""The MCP tools ``search`` and ``list_sources``, over the service's broker and limits.

A ``search`` call is a ``POST /v1/query`` body: it is parsed by the same
``parse_request``/``plan`` (so the same fields, levels, ids and limits, and the
same messages), runs on the same private broker loop under the same deadline and
concurrency limit, and is counted in the same Prometheus series. A bad argument
is a tool error (``isError``) whose text names the field, the bad value and the
valid choices — a model reads it and retries; never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import textwrap
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mcp_types as types

from nautilus.blas import limit_blas_threads
from nautilus.broker import Broker
from nautilus.config import NautilusSettings
from nautilus.embedders import Embedder
from nautilus.log import get_logger
from nautilus.pages import MAX_PAGE
from nautilus.ranking_boost import BOOST_LEVELS
from nautilus.records import VECTOR_FIELDS, BrokerResponse, RankedRow
from nautilus.request.errors import ProblemError
from nautilus.request.model import QueryRequest, parse_request
from nautilus.request.plan import cut_page, forbid_overrides, plan
from nautilus.service import metrics
from nautilus.service.limits import ConcurrencyLimit
from nautilus.service.readiness import Readiness
from nautilus.service.runner import BrokerLoop
from nautilus.service.served import serve_broker
from nautilus.sources.base import declared_order
from nautilus.sources.factory import bundled_demo_config, load_sources

logger = get_logger("nautilus.mcp")

SEARCH = "search"
LIST_SOURCES = "list_sources"


@dataclass
class Engine:
    """What the server builds once and every tool call shares (as a service worker)."""

    settings: NautilusSettings
    broker: Broker
    embedder: Embedder | None
    limit: ConcurrencyLimit
    readiness: Readiness
    runner: BrokerLoop
    source_types: dict[str, str]

    @classmethod
    def build(cls, settings: NautilusSettings) -> Engine:
        """The broker from the settings (as ``nautilus serve`` builds it); a bad sources
        file or a strict-mode problem raises here, before anything is served."""
        served = serve_broker(settings)
        effective, broker, raw, embedder = (served.settings, served.broker,
                                            served.raw_sources, served.embedder)
        path = Path(settings.config or bundled_demo_config()).expanduser()
        types_by_id = {spec.id: spec.type for spec in load_sources(path).specs}
        return cls(effective, broker, embedder, ConcurrencyLimit(settings.serve_max_concurrency),
                   Readiness(raw, settings.serve_probe_interval_s), BrokerLoop(), types_by_id)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Engine]:
        """Probe the sources in the background while serving; release everything after."""
        limit_blas_threads(1)
        metrics.start([s.id for s in self.broker.sources], len(self.settings.problems))
        prober = asyncio.create_task(self.readiness.run())
        logger.info("mcp_ready", sources=[s.id for s in self.broker.sources],
                    synthesizer=type(self.broker.synthesizer).__name__)
        try:
            yield self
        finally:
            prober.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await prober
            self.runner.stop()
            self.broker.close()
            logger.info("mcp_stopped")

    # --- the tools' listing ----------------------------------------------------------

    def tools(self) -> list[types.Tool]:
        ids = [s.id for s in self.broker.sources]
        boosts = ", ".join(f"{k}:{v}" for k, v in self.settings.source_boosts.items()) or "none"
        top_k = self.settings.ranking_top_k
        search = types.Tool(
            name=SEARCH, title="Search every source, ranked",
            description=(
                "Ask every source (" + ", ".join(ids) + ") at once and get one ranking of "
                "their rows, best first: each result has its source, its score and why it "
                "scored so (relevance to the query, agreement between sources, boost). "
                f"top_k keeps the K best (default {top_k if top_k else 'all rows'}). "
                "boosts tilts the ranking toward sources you trust more for this query: "
                "{source_id: level}, levels low < medium < high; a boost adds a fixed bump "
                "to that source's rows, so a boosted source wins close calls but cannot lift "
                "an irrelevant row over clearly better ones. Boosts given here replace the "
                f"server's ({boosts}). sources limits the search to some sources. Results "
                "past the first top_k: pass page (2, 3, ...) or the next_cursor of the "
                "previous answer; the same query and settings always give the same pages. "
                "A source that fails is listed under sources_errored; the others still "
                f"answer. A call gets its answer within {self.settings.serve_request_timeout_s:g} "
                "s or a deadline error."),
            input_schema=self._search_schema(ids),
            output_schema=_SEARCH_OUTPUT,
            annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=True,
                                              destructive_hint=False, open_world_hint=False))
        listing = types.Tool(
            name=LIST_SOURCES, title="List the sources",
            description=("The sources search asks: each one's id (what boosts and sources "
                         "name), its type, whether it declares its own order as relevance "
                         "(a full-text or vector index) or not (a table), its current boost, "
                         "and whether it answered its last health probe."),
            input_schema={"type": "object", "properties": {}, "additionalProperties": False},
            output_schema=_SOURCES_OUTPUT,
            annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=True,
                                              destructive_hint=False, open_world_hint=False))
        return [search, listing]

    def _search_schema(self, ids: list[str]) -> dict[str, Any]:
        max_chars = self.settings.serve_max_query_chars
        properties: dict[str, Any] = {
            "query": {"type": "string", "minLength": 1, "maxLength": max_chars,
                      "description": f"what to look for, in plain words (at most {max_chars} "
                                     "characters)"},
            "top_k": {"type": "integer", "minimum": 1,
                      "description": "how many results to return (the page size when paging)"},
            "boosts": {"type": "object", "propertyNames": {"enum": ids},
                       "additionalProperties": {"type": "string", "enum": list(BOOST_LEVELS)},
                       "description": "{source_id: low|medium|high}: favour these sources "
                                      "(replaces the server's boosts for this call)"},
            "idf": {"type": "boolean", "description": "down-weight words that recur across "
                                                       "the candidate rows"},
            "sources": {"type": "array", "minItems": 1, "items": {"type": "string", "enum": ids},
                        "description": "ask only these sources (default: all)"},
            "explain": {"type": "boolean", "description": "add every score component and the "
                                                         "effective settings"},
            "vectors": {"type": "boolean", "description": "keep each row's vector (1,024 "
                                                         "floats in 'embedding'); off by default"},
            "page": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE,
                     "description": "page number: page 2 is results top_k+1 to 2*top_k"},
            "cursor": {"type": "string", "description": "the next_cursor of the previous "
                                                        "answer to the same call: its next page"},
        }
        return {"type": "object", "properties": properties, "required": ["query"],
                "additionalProperties": False}

    # --- the tools' answers -----------------------------------------------------------

    async def call(self, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        started = time.perf_counter()
        status = 200
        try:
            if name == SEARCH:
                result = await self.search(arguments or {})
            elif name == LIST_SOURCES:
                result = self.list_sources()
            else:
                raise ProblemError(404, "unknown-tool", "Unknown tool",
                                   f"no tool named {name!r} (valid: {SEARCH}, {LIST_SOURCES})")
        except ProblemError as exc:
            status = exc.status
            result = _error(exc)
        finally:
            elapsed = time.perf_counter() - started
            metrics.REQUEST_DURATION.labels(f"mcp:{name[:32]}", str(status)).observe(elapsed)
            logger.info("mcp_tool_call", tool=name[:64], status=status,
                        duration_ms=round(elapsed * 1000, 2))
        return result

    async def search(self, arguments: dict[str, Any]) -> types.CallToolResult:
        settings = self.settings
        parsed = parse_request(arguments)
        if not settings.serve_allow_overrides:
            forbid_overrides(parsed)
        run = plan(parsed, self.broker, settings, self.embedder, settings.serve_max_query_chars)
        self.limit.acquire()
        metrics.IN_FLIGHT.inc()
        deadline = settings.serve_request_timeout_s
        try:
            response = await asyncio.wait_for(
                self.runner.run(run.broker.arequest(parsed.query)), deadline)
        except TimeoutError:
            metrics.REJECTED.labels("deadline").inc()
            raise ProblemError(504, "deadline", "Deadline exceeded",
                               f"no answer within {deadline:g} s "
                               "(NAUTILUS_SERVE_REQUEST_TIMEOUT_S)") from None
        finally:
            self.limit.release()
            metrics.IN_FLIGHT.dec()
        response, page = cut_page(run, response)
        metrics.record_response(response)
        ranked = run.broker.synthesizer.ranking_enabled
        out = _search_content(parsed, response, page, ranked)
        if parsed.explain:
            out["explain"] = run.explain
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=_search_text(out))],
            structured_content=out)

    def list_sources(self) -> types.CallToolResult:
        failing = self.readiness.failing()
        rows = [{"id": s.id, "type": self.source_types.get(s.id, "custom"),
                 "declares_order": declared_order(s),
                 "boost": self.settings.source_boosts.get(s.id.lower()),
                 "healthy": s.id not in failing, "problem": failing.get(s.id)}
                for s in self.broker.sources]
        lines = [f"{r['id']} ({r['type']}): "
                 + ("ranked" if r["declares_order"] else "unranked" if r["declares_order"]
                    is False else "order detected per query")
                 + (f", boost {r['boost']}" if r["boost"] else "")
                 + (", healthy" if r["healthy"] else f", DOWN: {r['problem']}") for r in rows]
        return types.CallToolResult(content=[types.TextContent(type="text",
                                                               text="\n".join(lines))],
                                    structured_content={"sources": rows})


def _search_content(parsed: QueryRequest, response: BrokerResponse,
                    page: dict[str, Any] | None, ranked: bool) -> dict[str, Any]:
    return {"query": parsed.query,
            "results": [_result(r, bool(parsed.explain), ranked, bool(parsed.vectors))
                        for r in response.ranking],
            "page": page,
            "sources_queried": list(response.sources_queried),
            "sources_errored": [{"source_id": e.source_id, "error_type": e.error_type,
                                 "message": e.message} for e in response.sources_errored],
            "response_hash": response.response_hash,
            "request_id": response.request_id}


def _result(r: RankedRow, explain: bool, ranked: bool, vectors: bool) -> dict[str, Any]:
    components = r.explain()
    why = ({k: v for k, v in components.items() if k not in ("source_id", "rank", "score")}
           if explain else r.why())
    why["also_from"] = [{"source": s, "source_rank": n} for s, n in r.also_from]
    # A vector source's 1,024 floats are for the ranker: most of what a model would read.
    row = r.row if vectors else {k: v for k, v in r.row.items() if k not in VECTOR_FIELDS}
    return {"rank": r.rank, "source": r.source_id, "id": r.row.get("id"),
            "score": r.score if ranked else None, "source_rank": r.source_rank,
            "why": why, "row": row}


def _search_text(out: dict[str, Any]) -> str:
    """The compact form an agent reads: one line a result, then errors and paging."""
    results = out["results"]
    lines = [f"{len(results)} result(s) for {out['query']!r}"]
    for r in results:
        score = "" if r["score"] is None else f" score {r['score']:.4f}"
        also = "".join(f", also {a['source']}#{a['source_rank']}" for a in r["why"]["also_from"])
        lines.append(f"{r['rank']}. [{r['source']}]{score}{also}: {_line(r['row'])}")
    for e in out["sources_errored"]:
        lines.append(f"source {e['source_id']} failed ({e['error_type']}): {e['message']}")
    page = out["page"]
    if page is not None:
        lines.append(f"page {page['number']}; " + (f"next_cursor: {page['next_cursor']}"
                                                    if page["next_cursor"] else "last page"))
    return "\n".join(lines)


def _line(row: dict[str, Any], width: int = 200) -> str:
    """A row in one line: its id, then its text fields (a model reads the whole line)."""
    ident = row.get("id")
    texts = [" ".join(v.split()) for k, v in row.items()
             if isinstance(v, str) and k != "id" and v.strip() and v != ident]
    line = (f"{ident} — " if ident is not None else "") + " | ".join(texts)
    return textwrap.shorten(line, width=width, placeholder="…") if line else "(no text)"


def _error(exc: ProblemError) -> types.CallToolResult:
    """A tool error: the problem's text for the model, its fields for a program."""
    body = {"status": exc.status, "type": exc.slug, "title": exc.title, "detail": exc.detail,
            **{k: v for k, v in exc.extra.items() if k in ("field", "value", "valid", "errors",
                                                           "setting")}}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{exc.title}: {exc.detail}")],
        structured_content={"error": body}, is_error=True)


_SEARCH_OUTPUT: dict[str, Any] = {
    "type": "object",
    "required": ["query", "results", "page", "sources_queried", "sources_errored",
                 "response_hash", "request_id"],
    "properties": {
        "query": {"type": "string"},
        "results": {"type": "array", "description": "best first", "items": {
            "type": "object", "required": ["rank", "source", "id", "score", "why", "row"],
            "properties": {
                "rank": {"type": "integer", "description": "1 is the best overall"},
                "source": {"type": "string"},
                "id": {"description": "the row's own id, null if it has none"},
                "score": {"type": ["number", "null"], "description": "null when ranking "
                          "is off (rows passed through in the sources' order)"},
                "source_rank": {"type": "integer"},
                "why": {"type": "object", "description": "the score's components"},
                "row": {"type": "object", "description": "the row as its source gave it "
                        "(its vector left out unless vectors is true)"}}}},
        "page": {"type": ["object", "null"]},
        "sources_queried": {"type": "array", "items": {"type": "string"}},
        "sources_errored": {"type": "array", "items": {"type": "object"}},
        "response_hash": {"type": "string"},
        "request_id": {"type": "string"},
        "explain": {"type": "object"},
    },
}

_SOURCES_OUTPUT: dict[str, Any] = {
    "type": "object", "required": ["sources"],
    "properties": {"sources": {"type": "array", "items": {
        "type": "object", "required": ["id", "type", "declares_order", "healthy"],
        "properties": {"id": {"type": "string"}, "type": {"type": "string"},
                       "declares_order": {"type": ["boolean", "null"]},
                       "boost": {"type": ["string", "null"]},
                       "healthy": {"type": "boolean"},
                       "problem": {"type": ["string", "null"]}}}}},
}
