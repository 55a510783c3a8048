"""The trace context across nautilus' own loops, onward to an HTTP engine, into log lines.

A request's spans are children of the caller's only if the context reaches where they
are opened: the broker runs on a loop of its own in the service
(``fanout/background_loop.py``), an HTTP source's calls on the HTTP loop, a PostgreSQL
query on the pool loop. :func:`carry` takes the caller's context (OpenTelemetry's and
the request being traced) and :meth:`Carried.into` runs a coroutine inside it on the
other loop. Everything here is a function call that returns at once when tracing is off.
"""

from __future__ import annotations

import re
from collections.abc import Coroutine, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from nautilus_ranking.tracing.spans import (
    OPTIONS,
    RequestTrace,
    current_request,
    resume_request,
    tracer,
)

T = TypeVar("T")


@dataclass(frozen=True)
class Carried:
    """A caller's trace context, to run a coroutine in on another loop."""

    context: Any
    request: RequestTrace | None

    async def _within(self, coro: Coroutine[Any, Any, T]) -> T:
        from opentelemetry import context

        # The task running this has a context of its own: nothing to restore after.
        context.attach(self.context)
        resume_request(self.request)
        return await coro

    def into(self, coro: Coroutine[Any, Any, T]) -> Coroutine[Any, Any, T]:
        return self._within(coro)


def carry() -> Carried | None:
    """The current trace context, to hand to another loop; None when tracing is off."""
    if tracer() is None:
        return None
    from opentelemetry import context

    return Carried(context.get_current(), current_request())


@contextmanager
def continued(headers: Mapping[str, str]) -> Iterator[None]:
    """The caller's trace (its ``traceparent``, by the configured propagator) current for
    the block, when no server span is: a FastAPI with telemetry of its own (or an
    instrumentation) continues it already, an older one does not, and the request span
    would start a trace of its own. Nothing when tracing is off."""
    if tracer() is None:
        yield
        return
    from opentelemetry import context, propagate, trace

    if trace.get_current_span().get_span_context().is_valid:
        yield
        return
    token = context.attach(propagate.extract(headers))
    try:
        yield
    finally:
        context.detach(token)


#: What a propagator writes that carries the caller's baggage (W3C, Jaeger, OpenTracing):
#: whatever a caller put there would reach every engine, so only on the operator's say.
_BAGGAGE = re.compile(r"baggage|uberctx-.*|ot-baggage-.*", re.IGNORECASE)


def outgoing_headers(headers: dict[str, str] | None) -> dict[str, str] | None:
    """``headers`` with the current span's ``traceparent`` (and ``tracestate``) added, as
    the operator's propagators write them; unchanged when tracing is off or
    ``NAUTILUS_TRACE_PROPAGATE=false``. The caller's ``baggage`` goes onward only with
    ``NAUTILUS_TRACE_BAGGAGE=true``."""
    if not OPTIONS.propagate or tracer() is None:
        return headers
    from opentelemetry.propagate import inject

    injected: dict[str, str] = {}
    inject(injected)
    if not OPTIONS.baggage:
        injected = {k: v for k, v in injected.items() if not _BAGGAGE.fullmatch(k)}
    out = {**(headers or {}), **injected}
    return out or headers


def current_trace_id() -> str:
    """The current recorded span's trace id (hex, as OTLP writes it); ``""`` when tracing
    is off or nothing records here."""
    if tracer() is None:
        return ""
    from opentelemetry.trace import get_current_span

    span_context = get_current_span().get_span_context()
    return format(span_context.trace_id, "032x") if span_context.is_valid else ""


def add_trace_ids(event: MutableMapping[str, Any]) -> None:
    """A log event gains ``trace_id`` and ``span_id`` (hex, as OTLP writes them) when it is
    logged inside a recorded span."""
    if tracer() is None:
        return
    from opentelemetry.trace import get_current_span

    span_context = get_current_span().get_span_context()
    if span_context.is_valid:
        event.setdefault("trace_id", format(span_context.trace_id, "032x"))
        event.setdefault("span_id", format(span_context.span_id, "016x"))
