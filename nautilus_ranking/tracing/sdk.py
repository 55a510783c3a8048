"""Who starts the OpenTelemetry SDK: the operator, through the SDK's own variables.

nautilus the library never configures the SDK (an application, ``opentelemetry-instrument``
or the host that embeds it does). The servers nautilus owns — ``nautilus-ranking serve``
and ``nautilus-ranking mcp --transport http`` — start it in each worker process when the
operator sets one of the SDK's own variables (:data:`SDK_VARIABLES`; never one of ours),
unless a tracer provider is already set (``opentelemetry-instrument`` ran first) or
``OTEL_SDK_DISABLED=true``. ``OTEL_TRACES_EXPORTER`` names the exporters (``otlp`` by
default, ``console``, ``none``, or an entry point's own name such as ``otlp_proto_http``);
``otlp`` is the exporter of ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` or
``OTEL_EXPORTER_OTLP_PROTOCOL``: ``http/protobuf`` (the specification's default, and the
package the docs install) or ``grpc``. The SDK's own auto-configuration picks gRPC when
no protocol is set; a server nautilus owns follows the specification. The sampler is
the SDK's (``OTEL_TRACES_SAMPLER``; by default it follows the caller's sampled flag).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

#: Any of these set turns tracing on in a server nautilus owns.
SDK_VARIABLES = (
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_SERVICE_NAME",
)
_EXTRA = "pip install 'nautilus-ranking[otel]' opentelemetry-sdk"
#: How long a stopping worker waits for its last spans to be exported. The SDK's own
#: bound is 30 s a processor (10 s an export, each batch in turn): a collector that is
#: down or hung would hold the worker past the documented drain.
FLUSH_S = 3.0
#: The package that provides each usual exporter name (said when it is missing).
_PROVIDED_BY = {
    "otlp": "opentelemetry-exporter-otlp-proto-http",
    "otlp_proto_http": "opentelemetry-exporter-otlp-proto-http",
    "otlp_proto_grpc": "opentelemetry-exporter-otlp-proto-grpc",
    "zipkin": "opentelemetry-exporter-zipkin",
}


def wanted(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the operator asked for traces (an SDK variable set, the SDK not disabled)."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(env.get(name, "").strip() for name in SDK_VARIABLES)


def start_sdk(environ: Mapping[str, str] | None = None) -> Any | None:
    """Set up the SDK's tracer provider from the environment and return it (to shut down
    when the server stops); None when not asked for or a provider is already set.

    A missing SDK or exporter is an ``ImportError`` naming what to install."""
    env = os.environ if environ is None else environ
    if not wanted(env):
        return None
    from opentelemetry import trace

    from nautilus_ranking.tracing.spans import tracer

    if tracer() is not None:  # the operator's own set-up (opentelemetry-instrument) wins
        return None
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise ImportError(_no_sdk(env)) from exc
    attributes = {} if env.get("OTEL_SERVICE_NAME") else {"service.name": "nautilus-ranking"}
    # stop_sdk shuts it down, within FLUSH_S; the SDK's own exit hook would wait again
    provider = TracerProvider(resource=Resource.create(attributes), shutdown_on_exit=False)
    for name in _exporter_names(env):
        provider.add_span_processor(BatchSpanProcessor(_exporter(name)()))
    trace.set_tracer_provider(provider)
    return provider


def stop_sdk(provider: Any, warn: Callable[..., Any], within_s: float = FLUSH_S) -> None:
    """Export the last spans and shut :func:`start_sdk`'s provider down, waiting at most
    ``within_s``: spans a collector has not taken by then are dropped (one
    ``trace_flush_abandoned`` warning through ``warn``, the server's logger), and the
    worker stops on time."""
    flush = threading.Thread(target=provider.shutdown, name="nautilus-trace-flush", daemon=True)
    flush.start()
    flush.join(within_s)
    if flush.is_alive():
        warn(
            "trace_flush_abandoned",
            waited_s=within_s,
            reason="the trace exporter did not finish: the spans not yet exported are dropped",
        )


def sdk_problem(environ: Mapping[str, str] | None = None) -> str | None:
    """Why :func:`start_sdk` would fail here (no SDK, an exporter not installed), checked
    before a server starts its workers; None when it would not (or is not asked for)."""
    env = os.environ if environ is None else environ
    if not wanted(env):
        return None
    try:
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        return _no_sdk(env)
    try:
        for name in _exporter_names(env):
            _exporter(name)
    except ImportError as exc:  # an exporter not installed, a protocol no exporter speaks
        return str(exc)
    return None


def _no_sdk(env: Mapping[str, str]) -> str:
    named = ", ".join(n for n in SDK_VARIABLES if env.get(n, "").strip())
    return f"tracing ({named} set) needs the OpenTelemetry SDK: {_EXTRA}"


#: ``OTEL_EXPORTER_OTLP_PROTOCOL``'s values and the entry point each names.
_OTLP_PROTOCOLS = {"http/protobuf": "otlp_proto_http", "grpc": "otlp_proto_grpc"}


def _exporter_names(env: Mapping[str, str]) -> list[str]:
    """The exporters' entry-point names (``otlp`` resolved to its protocol's)."""
    names = [n.strip() for n in env.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if n.strip()]
    if names == ["none"]:
        return []
    return [_otlp_exporter(env) if n == "otlp" else n for n in names or ["otlp"]]


def _otlp_exporter(env: Mapping[str, str]) -> str:
    """The entry point ``otlp`` means here: the OTLP protocol's, http/protobuf unless set."""
    for variable in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        protocol = env.get(variable, "").strip()
        if protocol:
            break
    else:
        return _OTLP_PROTOCOLS["http/protobuf"]
    if protocol not in _OTLP_PROTOCOLS:
        raise ImportError(
            f"{variable}: no OTLP exporter speaks {protocol!r} here "
            f"(valid: {', '.join(_OTLP_PROTOCOLS)})"
        )
    return _OTLP_PROTOCOLS[protocol]


def _exporter(name: str) -> Any:
    """The exporter class the SDK's entry point ``name`` names."""
    from importlib.metadata import entry_points

    found = list(entry_points(group="opentelemetry_traces_exporter", name=name))
    if not found:
        package = _PROVIDED_BY.get(name, "the package that provides it")
        raise ImportError(
            f"OTEL_TRACES_EXPORTER: no exporter {name!r} is installed (pip install {package}; "
            "console needs nothing more than the SDK; otlp is otlp_proto_http unless "
            "OTEL_EXPORTER_OTLP_PROTOCOL says grpc)"
        )
    return found[0].load()
