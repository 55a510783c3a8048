"""The docs' OTLP set-up exactly as docs/deployment.md writes it ("Turning it on"): the
packages its ``pip install`` line names (the ``dev`` extra installs them), its ``export``
lines and its ``nautilus-ranking serve --workers 2``, against a real OTLP/HTTP receiver
on loopback in the collector's place. The request's spans arrive there, in protobuf."""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path

import httpx
import pytest
from otlp_receiver import otlp_receiver

from nautilus_ranking.tracing import PREFIX as P
from tools.servers import running

pytestmark = pytest.mark.slow

DOCS = Path(__file__).parents[2] / "docs" / "deployment.md"
COLLECTOR = "http://otel-collector:4318"
CALLER = (f"{0xE8:032x}", "b7ad6b7169203331")


def documented_set_up() -> tuple[str, dict[str, str], str]:
    """The docs' pip line, their ``export`` variables and the command after them."""
    text = DOCS.read_text("utf-8")
    section = text[text.index("### Turning it on") : text.index("### In your trace")]
    [pip] = re.findall(r"^pip install .*$", section, re.M)
    block = section[section.index("export OTEL_") :]
    env: dict[str, str] = {}
    lines = block.splitlines()
    for line in lines:
        if not line.startswith("export "):
            command = line
            break
        for word in line.split("#")[0].split()[1:]:
            name, _, value = word.partition("=")
            env[name] = value
    return pip, env, command


def test_the_documented_otlp_set_up_exports_to_a_collector(tmp_path: Path) -> None:
    pip, env, command = documented_set_up()
    assert pip.endswith("opentelemetry-sdk opentelemetry-exporter-otlp-proto-http")
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == COLLECTOR
    assert command == "nautilus-ranking serve --workers 2"
    with otlp_receiver() as receiver:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.url  # the collector, on loopback
        with running(tmp_path, env, workers=2) as server:
            answer = httpx.post(
                server.url + "/v1/query",
                json={"query": "orders-db disk full"},
                headers={"traceparent": f"00-{CALLER[0]}-{CALLER[1]}-01"},
                timeout=60,
            )
            assert answer.status_code == 200, answer.text
            receiver.until(CALLER[0], f"{P}request", server.logs)
        spans = receiver.of_trace(CALLER[0])
    request = spans[f"{P}request"]
    assert request.service == "nautilus-ranking"
    assert spans[f"{P}ranking"].parent_id == request.span_id
    assert {f"{P}source {sid}" for sid in ("tickets", "graph", "runbooks", "postmortems")} <= set(
        spans
    )
    # the caller's trace is continued: its span is an ancestor of the request span
    by_id = {s.span_id: s for s in spans.values()}
    at = request
    while at.parent_id in by_id:
        at = by_id[at.parent_id]
    assert at.parent_id == CALLER[1]


def test_a_collector_that_never_answers_delays_shutdown_at_most_the_documented_15_s(
    tmp_path: Path,
) -> None:
    """A collector that accepts connections and never answers (a hung one, or a
    firewall that drops): the last spans are given up on, the worker still stops
    within the documented drain (15 s with the default deadlines). Small batches: the
    SDK waits for each export in turn (10 s each here), up to 30 s a processor."""
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(64)  # connections complete in the kernel; nothing ever reads them
        env = {
            "OTEL_SERVICE_NAME": "nautilus-ranking",
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{hung.getsockname()[1]}",
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "2",
        }
        with running(tmp_path, env) as server:
            answer = httpx.post(
                server.url + "/v1/query",
                json={"query": "orders-db disk full"},
                headers={"traceparent": f"00-{CALLER[0]}-{CALLER[1]}-01"},
                timeout=60,
            )
            assert answer.status_code == 200, answer.text
            started = time.monotonic()
            assert server.stop(timeout=60) == 0, server.logs()
            took = time.monotonic() - started
    assert took < 15, f"{took:.1f} s to stop:\n{server.logs()}"
    assert "trace_flush_abandoned" in server.logs()
