"""``nautilus-ranking mcp --transport http`` with the SDK started from its own variables:
a tool call continues the caller's ``traceparent`` header (an HTTP server span, the MCP
SDK's tool-call span, then ours), or the trace context in ``params._meta``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_serve_traces import SDK_ENV, exported_spans, trace_of

from nautilus_ranking.tracing import PREFIX as P
from tools.servers import Server, running

pytestmark = pytest.mark.slow

PROTOCOL_HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
}


def call_search(server: Server, query: str, headers: dict[str, str], meta: dict[str, str]) -> Any:
    body: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "search", "arguments": {"query": query}},
    }
    if meta:
        body["params"]["_meta"] = meta
    response = httpx.post(
        server.url + "/mcp", json=body, headers={**PROTOCOL_HEADERS, **headers}, timeout=60
    )
    assert response.status_code == 200, response.text
    return response.json()


def test_a_tool_call_continues_the_header_or_the_meta_trace_context(tmp_path: Path) -> None:
    by_header, by_meta = f"{0xE1:032x}", f"{0xE2:032x}"
    env = {"NAUTILUS_RANKING_TOP_K": "3", **SDK_ENV}
    with running(tmp_path, env, subcommand=("mcp", "--transport", "http")) as server:
        answer = call_search(
            server,
            "orders-db disk full",
            {"traceparent": f"00-{by_header}-00f067aa0ba902b7-01"},
            {},
        )
        assert "error" not in answer, answer
        call_search(server, "replica lag", {}, {"traceparent": f"00-{by_meta}-00f067aa0ba902b7-01"})
        spans: list[dict[str, Any]] = []
        for _ in range(200):
            spans = exported_spans(server.logs())
            traced = {s["context"]["trace_id"] for s in spans if s["name"] == f"{P}request"}
            if {"0x" + by_header, "0x" + by_meta} <= traced:
                break
            time.sleep(0.1)
    for trace_id in (by_header, by_meta):
        named = trace_of(spans, trace_id)
        request = named[f"{P}request"]
        tool = named["tools/call search"]
        assert request["parent_id"] == tool["context"]["span_id"]
        assert sum(name.startswith(f"{P}source ") for name in named) == 4
        assert f"{P}ranking" in named
    header_trace = trace_of(spans, by_header)
    [http_span] = [
        s
        for name, s in header_trace.items()
        if s["kind"] == "SpanKind.SERVER" and name != "tools/call search"
    ]
    assert http_span["parent_id"] == "0x00f067aa0ba902b7"
