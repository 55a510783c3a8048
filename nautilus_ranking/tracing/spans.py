"""The spans of one request, through the OpenTelemetry API, only when an SDK records them.

Tracing is **on** when the process has a real tracer provider (an SDK the operator, or
``opentelemetry-instrument``, or the host that embeds nautilus configured); it is read
from ``sys.modules`` and never imported here, so a process without one loads no
OpenTelemetry module on nautilus' account and creates no span object: each seam below
costs a function call that returns None.

Three kinds of span (names and attributes in docs/deployment.md, "Traces"):

- ``nautilus_ranking.request``: one request, opened by the request core
  (``request/answer.py``) under whatever span is current (FastAPI's server span, the MCP
  SDK's tool-call span);
- ``nautilus_ranking.source <id>``: one source call (``broker.py``), current while the
  source runs, so an HTTP engine request carries it onward as its ``traceparent``;
- ``nautilus_ranking.ranking``: every ranking stage that ran, as attributes (rows in and
  out, and each stage's facts). The stages call :func:`stages` to learn whether anyone
  records them; the span is written once the last stage (the page, the budget) is done,
  from the time the ranking started.

Nothing a user typed and no credential is recorded: no query text (unless
``NAUTILUS_TRACE_QUERY_TEXT=true``), no row, no URL or statement; every value is bounded
(:func:`bounded`).
"""

from __future__ import annotations

import sys
import time
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import Any

#: Our own attributes' prefix (the semantic conventions' names are used where one fits).
PREFIX = "nautilus_ranking."
#: The longest string value an attribute carries, and the most items in a list value.
MAX_CHARS = 128
MAX_ITEMS = 32
#: How much of the query an operator who turned query text on sees.
MAX_QUERY_CHARS = 256
#: The API's placeholder providers: no SDK behind them, so nothing is recorded.
_DEFERRED = frozenset(
    {("opentelemetry.trace", "ProxyTracerProvider"), ("opentelemetry.trace", "NoOpTracerProvider")}
)


@dataclass
class Options:
    """What the operator chose (``NAUTILUS_TRACE_*``), set once a process by :func:`configure`."""

    query_text: bool = False
    propagate: bool = True
    baggage: bool = False


OPTIONS = Options()
_tracer: tuple[object, Any] | None = None  # (the provider, its tracer for nautilus_ranking)


def configure(*, query_text: bool = False, propagate: bool = True, baggage: bool = False) -> None:
    """The process's tracing options (read from the settings where a broker is assembled)."""
    OPTIONS.query_text = query_text
    OPTIONS.propagate = propagate
    OPTIONS.baggage = baggage


def tracer() -> Any | None:
    """nautilus_ranking's tracer when an SDK records spans in this process, else None.

    Got once per provider (``trace.get_tracer("nautilus_ranking", __version__)``)."""
    global _tracer
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None or getattr(getattr(trace, "__spec__", None), "_initializing", False):
        # Not imported, or still being imported by another thread (the MCP SDK loads
        # beside the first requests): no provider can have been set yet.
        return None
    try:
        provider = trace.get_tracer_provider()
    except (AttributeError, NameError):  # a module another thread has half imported
        return None
    cached = _tracer
    if cached is not None and cached[0] is provider:
        return cached[1]
    kind = type(provider)
    if (kind.__module__, kind.__name__) in _DEFERRED:
        return None
    _tracer = (provider, provider.get_tracer("nautilus_ranking", _version()))
    return _tracer[1]


def _version() -> str | None:
    """The installed distribution's version (the package's ``__version__``), read from
    its metadata: importing the package from here would make an import cycle."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nautilus-ranking")
    except PackageNotFoundError:
        return None


def bounded(value: Any) -> Any:
    """An attribute value of bounded size: strings cut to ``MAX_CHARS``, lists to
    ``MAX_ITEMS`` items of strings (a list of mixed types becomes strings)."""
    if isinstance(value, str):
        return value[:MAX_CHARS]
    if isinstance(value, list | tuple):
        items = list(value)[:MAX_ITEMS]
        if (
            all(isinstance(item, bool | int | float) for item in items)
            and len({type(item) for item in items}) <= 1
        ):
            return items
        return [str(item)[:MAX_CHARS] for item in items]
    return value


@dataclass
class Stages:
    """The ranking's stages as they ran: a name each, rows in and out, and their facts."""

    started_ns: int = field(default_factory=time.time_ns)
    names: list[str] = field(default_factory=list)
    attributes: dict[str, Any] = field(default_factory=dict)

    def add(self, name: str, rows_in: int, rows_out: int, **facts: Any) -> None:
        """Stage ``name`` ran on ``rows_in`` rows and kept ``rows_out``; ``facts``: its own
        numbers (copies collapsed, tokens used…), None values left out."""
        if name not in self.names:
            self.names.append(name)
        at = f"{PREFIX}ranking.{name}."
        self.attributes[at + "rows_in"] = rows_in
        self.attributes[at + "rows_out"] = rows_out
        for key, value in facts.items():
            if value is not None:
                self.attributes[at + key] = bounded(value)


#: The stages being recorded in this context (None: nobody records them).
_STAGES: ContextVar[Stages | None] = ContextVar("nautilus_ranking_stages", default=None)
#: The request being traced in this context (None: none, or tracing is off).
_REQUEST: ContextVar[RequestTrace | None] = ContextVar("nautilus_ranking_request", default=None)


def stages() -> Stages | None:
    """Where a ranking stage records what it did; None when nobody records (tracing off)."""
    return _STAGES.get()


def current_request() -> RequestTrace | None:
    return _REQUEST.get()


def resume_request(request: RequestTrace | None) -> None:
    """Make ``request`` the traced request of this context (a task on another loop)."""
    _REQUEST.set(request)


def _status_error(span: Any, error_type: str) -> None:
    from opentelemetry.trace import StatusCode

    span.set_attribute("error.type", bounded(error_type))
    span.set_status(StatusCode.ERROR, bounded(error_type))


class RequestTrace:
    """A traced request: its span (current while it runs) and its ranking's stages."""

    def __init__(self, tracer: Any, attributes: dict[str, Any]) -> None:
        from opentelemetry import context, trace

        self.tracer = tracer
        self.span = tracer.start_span(f"{PREFIX}request", attributes=attributes)
        self.stages = Stages()
        self.ranking_started_ns: int | None = None
        self._context = context.attach(trace.set_span_in_context(self.span))
        self._token: Token[RequestTrace | None] = _REQUEST.set(self)

    def rank_started(self) -> Stages:
        self.ranking_started_ns = time.time_ns()
        self.stages.started_ns = self.ranking_started_ns
        return self.stages

    def ranking_done(self, ranked: bool) -> None:
        """Write the ranking span: from the start of the ranking to now (its last stage)."""
        if self.ranking_started_ns is None:  # the broker never ranked (it failed first)
            return
        emit_ranking(self.tracer, self.stages, ranked)

    def finish(self, attributes: dict[str, Any]) -> None:
        if self.span.is_recording():
            self.span.set_attributes(
                {k: bounded(v) for k, v in attributes.items() if v is not None}
            )

    def close(self, error: BaseException | None) -> None:
        from opentelemetry import context

        if error is not None and self.span.is_recording():
            status = getattr(error, "status", None)
            slug = getattr(error, "slug", None)
            if isinstance(status, int) and isinstance(slug, str) and status < 500:
                # refused (a bad field, a stale cursor): the caller's error, not ours
                self.span.set_attribute(f"{PREFIX}problem", bounded(slug))
            else:  # a deadline (504, "deadline"), an overload, a failure
                _status_error(self.span, slug if isinstance(slug, str) else type(error).__name__)
        self.span.end()
        _REQUEST.reset(self._token)
        context.detach(self._context)


def emit_ranking(tracer: Any, recorded: Stages, ranked: bool) -> None:
    span = tracer.start_span(f"{PREFIX}ranking", start_time=recorded.started_ns)
    if span.is_recording():
        span.set_attributes(
            {
                f"{PREFIX}ranking.enabled": ranked,
                f"{PREFIX}ranking.stages": list(recorded.names),
                **recorded.attributes,
            }
        )
    span.end()


@dataclass
class RankingScope:
    """The ranking of one broker call: the stages it records into, and who writes the span
    (the broker itself when no request core traces it: a library call, inside a host)."""

    stages: Stages
    token: Token[Stages | None]
    own: bool


def ranking_begin() -> RankingScope | None:
    """Start recording the ranking's stages in this context; None when tracing is off."""
    request = _REQUEST.get()
    if request is not None:
        recorded = request.rank_started()
        return RankingScope(recorded, _STAGES.set(recorded), own=False)
    if tracer() is None:
        return None
    recorded = Stages()
    return RankingScope(recorded, _STAGES.set(recorded), own=True)


def ranking_end(scope: RankingScope | None, ranked: bool) -> None:
    """Stop recording; a broker that owns its ranking span writes it now."""
    if scope is None:
        return
    _STAGES.reset(scope.token)
    if scope.own:
        traced = tracer()
        if traced is not None:
            emit_ranking(traced, scope.stages, ranked)


#: ``db.system.name`` (semantic conventions) of the source types that query a database.
_DB_SYSTEMS = {"sqlite": "sqlite", "postgres": "postgresql", "pgvector": "postgresql"}


class SourceSpan:
    """One source call's span, current in the calling task until :meth:`done`."""

    def __init__(self, tracer: Any, kind: str, source_id: str, timeout_s: float) -> None:
        from opentelemetry import context, trace
        from opentelemetry.trace import SpanKind

        db = _DB_SYSTEMS.get(kind.split("_")[0])
        remote = db == "postgresql" or kind in ("http", "elasticsearch", "typesense")
        attributes: dict[str, Any] = {
            f"{PREFIX}source.id": bounded(source_id),
            f"{PREFIX}source.type": bounded(kind),
            f"{PREFIX}source.timeout_s": float(timeout_s),
        }
        if db is not None:
            attributes["db.system.name"] = db
        self.span = tracer.start_span(
            bounded(f"{PREFIX}source {source_id}"),
            kind=SpanKind.CLIENT if remote else SpanKind.INTERNAL,
            attributes=attributes,
        )
        self._context = context.attach(trace.set_span_in_context(self.span))

    def done(self, rows: int, error_type: str | None, dropped: int = 0) -> None:
        from opentelemetry import context

        if self.span.is_recording():
            self.span.set_attribute(f"{PREFIX}source.rows", rows)
            if dropped:
                self.span.set_attribute(f"{PREFIX}source.rows_dropped", dropped)
            if error_type is not None:
                _status_error(self.span, error_type)
        self.span.end()
        context.detach(self._context)


def source_span(kind: str, source_id: str, timeout_s: float) -> SourceSpan | None:
    """A span for one call of a source of type ``kind`` (as its sources file names it:
    ``sources.base.type_of``); None when tracing is off."""
    traced = tracer()
    if traced is None:
        return None
    return SourceSpan(traced, kind, source_id, timeout_s)


def request_trace(attributes: dict[str, Any], query: str) -> RequestTrace | None:
    """The request span, current from now until :meth:`RequestTrace.close`; None when
    tracing is off. ``query`` is recorded only when the operator turned query text on."""
    traced = tracer()
    if traced is None:
        return None
    kept = {k: bounded(v) for k, v in attributes.items() if v is not None}
    if OPTIONS.query_text:
        kept[f"{PREFIX}query.text"] = query[:MAX_QUERY_CHARS]
    return RequestTrace(traced, kept)
