"""One request's trace as text: the demo query with a boost and a token budget, traced
in this process with the OpenTelemetry SDK and an in-memory exporter, printed as a tree
(what docs/deployment.md shows).

    python -m tools.trace_text [QUERY]
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

QUERY = "orders-db disk full"
SETTINGS = {
    "NAUTILUS_RANKING_TOP_K": "5",
    "NAUTILUS_SOURCE_BOOSTS": "runbooks:high",
    "NAUTILUS_RANKING_MAX_TOKENS": "400",
}


def traced(query: str) -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    for name in [n for n in os.environ if n.startswith("NAUTILUS_")]:
        del os.environ[name]
    os.environ.update(SETTINGS, NAUTILUS_DATA_DIR=tempfile.mkdtemp(prefix="nautilus-trace-"))
    from nautilus_ranking.request.answer import answer_sync
    from nautilus_ranking.request.engine import Engine
    from nautilus_ranking.request.model import parse_request

    engine = Engine.assemble()
    answer_sync(engine, parse_request({"query": query}))  # builds the databases
    exporter.clear()
    with trace.get_tracer("caller").start_as_current_span("caller"):
        answer_sync(engine, parse_request({"query": query}))
    engine.broker.close()
    return list(exporter.get_finished_spans())


def _value(value: Any) -> str:
    if isinstance(value, tuple | list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


def render(spans: list[ReadableSpan]) -> str:
    children: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in spans}
    for span in sorted(spans, key=lambda s: (s.start_time or 0, s.name)):
        parent = span.parent.span_id if span.parent and span.parent.span_id in ids else None
        children.setdefault(parent, []).append(span)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in children.get(parent, []):
            ms = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
            status = "" if span.status.is_ok else f"  status={span.status.status_code.name}"
            lines.append(f"{'  ' * depth}{span.name}  {ms:.1f} ms{status}")
            for key, value in (span.attributes or {}).items():
                lines.append(f"{'  ' * depth}    {key} = {_value(value)}")
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(traced(sys.argv[1] if len(sys.argv) > 1 else QUERY)))
