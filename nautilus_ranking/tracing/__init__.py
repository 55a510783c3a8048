"""OpenTelemetry traces of a request: where its time and rows went.

Free when off: nothing here imports OpenTelemetry until a tracer provider exists in the
process, and every seam (``request/answer.py``, ``broker.py``, the ranking stages, the
loops, the HTTP engine's requests, the log lines) is one call that returns at once.
``spans.py`` opens the spans, ``carry.py`` moves the context across loops and onward,
``sdk.py`` is how a server nautilus owns starts the SDK. docs/deployment.md ("Traces")
lists every span and attribute.
"""

from nautilus_ranking.tracing.carry import Carried, add_trace_ids, carry, outgoing_headers
from nautilus_ranking.tracing.spans import (
    PREFIX,
    RankingScope,
    RequestTrace,
    Stages,
    configure,
    current_request,
    ranking_begin,
    ranking_end,
    request_trace,
    source_span,
    stages,
    tracer,
)

__all__ = [
    "PREFIX",
    "Carried",
    "RankingScope",
    "RequestTrace",
    "Stages",
    "add_trace_ids",
    "carry",
    "configure",
    "current_request",
    "outgoing_headers",
    "ranking_begin",
    "ranking_end",
    "request_trace",
    "source_span",
    "stages",
    "tracer",
]
