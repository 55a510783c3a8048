"""Inside the broker, traced: with the broker's ``otel`` extra and the SDK set up (an
in-memory exporter), our ranking span is a child of the broker's ``synthesis`` span, in
the broker's ``broker.request`` trace, and says what each stage kept."""

from __future__ import annotations

from pathlib import Path

from conftest import AGENT, CONTEXT

from nautilus_ranking import NautilusSettings
from nautilus_ranking.upstream import attach_ranking

QUERY = "ops: orders-db disk full"


def test_our_ranking_span_is_a_child_of_the_brokers_synthesis_span(ops_config: Path) -> None:
    from nautilus import Broker
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    b = Broker.from_config(ops_config)
    try:
        attached = attach_ranking(b, NautilusSettings(ranking_top_k=3))
        response = b.request(AGENT, QUERY, dict(CONTEXT))
    finally:
        b.close()
    provider.force_flush()
    spans = {span.name: span for span in exporter.get_finished_spans()}
    synthesis, ranking = spans["synthesis"], spans["nautilus_ranking.ranking"]
    assert ranking.parent is not None
    assert ranking.parent.span_id == synthesis.context.span_id
    assert ranking.context.trace_id == spans["broker.request"].context.trace_id
    attributes = ranking.attributes or {}
    kept = attached.ranking(response.request_id)
    assert kept is not None
    assert attributes["nautilus_ranking.ranking.top_k.rows_out"] == len(kept.ranking) == 3
    assert attributes["nautilus_ranking.ranking.fusion.rows_in"] == 5 + 4
    assert "nautilus_ranking.ranking.fusion.boosted_sources" not in attributes
