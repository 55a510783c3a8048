"""What the tracing tests share: the OpenTelemetry SDK set up in this process with an
in-memory exporter for one test, and the global provider put back after it (the rest of
the suite runs with tracing off)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

from nautilus_ranking import tracing

P = tracing.PREFIX


@contextmanager
def recorded() -> Iterator[InMemorySpanExporter]:
    """An SDK tracer provider for the block, exporting to memory; tracing off after."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    saved = (trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE)
    trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = None, Once()
    trace.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        provider.shutdown()
        trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = saved
        tracing.configure()


def by_name(spans: Any) -> dict[str, ReadableSpan]:
    out = {span.name: span for span in spans}
    assert len(out) == len(spans), [s.name for s in spans]
    return out


def exported_text(spans: Any) -> str:
    """Every span as its exporter would write it (names, attributes, status, events)."""
    return "\n".join(span.to_json() for span in spans) + json.dumps(
        [dict(span.attributes or {}) for span in spans]
    )
