"""With the defaults, no exported span holds a DSN's password, a header's value, a URL
with the query in it, or the query; an HTTP engine's request carries the source's span
as its ``traceparent`` unless ``NAUTILUS_TRACE_PROPAGATE=false``, and a caller's
``baggage`` only with ``NAUTILUS_TRACE_BAGGAGE=true``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from opentelemetry import baggage as baggage_api
from opentelemetry import context
from tracing_support import P, by_name, exported_text, recorded

from nautilus_ranking import NautilusSettings
from nautilus_ranking.request.answer import answer_sync
from nautilus_ranking.request.engine import Engine
from nautilus_ranking.request.model import parse_request
from tools.json_engine import json_engine

DOCS = [
    {"id": f"d{i}", "title": title, "body": body}
    for i, (title, body) in enumerate(
        [
            ("orders-db disk full", "the primary's disk is 91% full"),
            ("replica lag on orders-db", "replication lag after a disk stall"),
            ("disk cleanup", "delete old WAL segments from the disk"),
        ]
    )
]
QUERY = "quokka-4412 disk full"
HEADER_SECRET = "hdr-9f3c2e71aa"
DSN_PASSWORD = "pw-51ab7e0c9d"


def write_sources(folder: Path, url: str) -> Path:
    entries = [
        {  # a GET engine: the query is in the URL
            "id": "kb",
            "type": "http",
            "url": f"{url}/search",
            "method": "GET",
            "params": {"q": "{{query}}", "size": "{{size}}"},
            "headers": {"X-Api-Key": HEADER_SECRET},
            "response": {"hits": "results", "id": "_id"},
        },
        {  # nothing listens on port 1: the driver fails, with the DSN in hand
            "id": "pg",
            "type": "postgres_table",
            "dsn": f"postgresql://reader:{DSN_PASSWORD}@127.0.0.1:1/shop?connect_timeout=1",
            "table": "tickets",
            "columns": ["title"],
            "timeout_s": 3,
        },
    ]
    path = folder / "nautilus.yaml"
    path.write_text(yaml.safe_dump({"sources": entries}, sort_keys=False), "utf-8")
    return path


def traced_request(
    tmp_path: Path, baggage: dict[str, str] | None = None, **settings: Any
) -> tuple[str, dict[str, object], str]:
    """(every exported span as text, the kb span's ids, the engine's traceparent header),
    the request made inside a context holding the caller's ``baggage``."""
    with json_engine(DOCS) as engine:
        config = write_sources(tmp_path, engine.url)
        engine_ = Engine.assemble(
            NautilusSettings(_env_file=None, config=str(config), ranking_top_k=3, **settings)  # type: ignore[call-arg]
        )
        try:
            with recorded() as exporter:
                token = context.attach(_with_baggage(baggage or {}))
                try:
                    result = answer_sync(engine_, parse_request({"query": QUERY}))
                finally:
                    context.detach(token)
                spans = exporter.get_finished_spans()
        finally:
            engine_.broker.close()
        [request] = engine.requests
    assert [e.source_id for e in result.response.sources_errored] == ["pg"]
    assert result.response.data["kb"], "the engine answered"
    named = by_name(spans)
    kb = named[f"{P}source kb"]
    ids = {"trace": kb.context.trace_id, "span": kb.context.span_id}
    headers = {k.lower(): v for k, v in request["headers"].items()}
    assert headers["x-api-key"] == HEADER_SECRET  # the engine did get it
    ENGINE_HEADERS.clear()
    ENGINE_HEADERS.update(headers)
    return exported_text(spans), ids, headers.get("traceparent", "")


#: The last engine request's headers (lower-cased), as :func:`traced_request` saw them.
ENGINE_HEADERS: dict[str, str] = {}


def _with_baggage(entries: dict[str, str]) -> Any:
    current = context.get_current()
    for name, value in entries.items():
        current = baggage_api.set_baggage(name, value, current)
    return current


def test_no_credential_url_or_query_in_any_span_with_the_defaults(tmp_path: Path) -> None:
    text, ids, traceparent = traced_request(tmp_path)
    assert f"{P}source pg" in text and f"{P}source kb" in text
    for secret in (DSN_PASSWORD, HEADER_SECRET, "quokka", "/search?", "127.0.0.1:1"):
        assert secret not in text, secret
    assert "db.query.text" not in text and "url.full" not in text
    # onward: the engine's request is a child of the source's span, sampled
    version, trace_id, parent_id, flags = traceparent.split("-")
    assert (version, trace_id, parent_id) == ("00", f"{ids['trace']:032x}", f"{ids['span']:016x}")
    assert int(flags, 16) & 1  # sampled


def test_the_traceparent_is_not_sent_onward_when_turned_off(tmp_path: Path) -> None:
    text, _, traceparent = traced_request(tmp_path, trace_propagate=False)
    assert traceparent == ""
    assert f"{P}source kb" in text  # still traced here


def test_a_caller_s_baggage_goes_onward_only_when_the_operator_allows_it(
    tmp_path: Path,
) -> None:
    """A caller's baggage is whatever it wrote: by default only the trace context (the
    ``traceparent``) reaches an engine."""
    caller = {"tenant": "acme", "session": "s-77e1"}
    _, _, traceparent = traced_request(tmp_path, baggage=caller)
    assert traceparent and "baggage" not in ENGINE_HEADERS, ENGINE_HEADERS
    _, _, traceparent = traced_request(tmp_path, baggage=caller, trace_baggage=True)
    assert traceparent and ENGINE_HEADERS["baggage"] == "tenant=acme,session=s-77e1"
