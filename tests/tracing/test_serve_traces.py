"""A real ``nautilus-ranking serve`` with the OpenTelemetry SDK started from the SDK's own
variables (the console exporter, so the test reads the spans it writes): a request with
a ``traceparent`` is one trace under the caller's span — FastAPI's server span, the
request span, every source's span, the ranking span — with the rows the JSON answer
reports; a timed-out and a raising source are error spans; an unsampled caller gets no
span; log lines carry the trace id; two workers trace alike."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from cli_process import run_nautilus

from nautilus_ranking.sources.factory import bundled_demo_config
from nautilus_ranking.tracing import PREFIX as P
from tools.json_engine import json_engine
from tools.servers import Server, free_port, running

pytestmark = pytest.mark.slow

QUERY = "orders-db disk full"
CALLER_SPAN = "b7ad6b7169203331"
SDK_ENV = {
    "OTEL_TRACES_EXPORTER": "console",
    "OTEL_SERVICE_NAME": "nautilus-under-test",
    "OTEL_BSP_SCHEDULE_DELAY": "50",
    "PYTHONUNBUFFERED": "1",  # one write per span: two workers' spans never interleave
}


def write_sources(folder: Path, slow_url: str) -> Path:
    demo = bundled_demo_config()
    document = yaml.safe_load(demo.read_text("utf-8"))
    for entry in document["sources"]:  # the demo's seeds, where the package keeps them
        for key in ("seed", "entities", "edges"):
            if key in entry:
                entry[key] = str(demo.parent / entry[key])
    document["sources"] += [
        {  # answers after 2 s: past its deadline
            "id": "slow",
            "type": "elasticsearch",
            "url": slow_url,
            "index": "docs",
            "fields": ["title"],
            "timeout_s": 0.3,
        },
        {  # nothing listens: the call raises
            "id": "down",
            "type": "elasticsearch",
            "url": f"http://127.0.0.1:{free_port()}",
            "index": "docs",
            "fields": ["title"],
            "timeout_s": 2,
        },
    ]
    path = folder / "nautilus.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False), "utf-8")
    return path


def exported_spans(text: str) -> list[dict[str, Any]]:
    """The spans the console exporter wrote (JSON objects over several lines) among the
    one-line JSON log events."""
    decoder = json.JSONDecoder()
    spans, at = [], 0
    while (at := text.find("{\n", at)) >= 0:
        value, end = decoder.raw_decode(text, at)
        if isinstance(value, dict) and "context" in value and "name" in value:
            spans.append(value)
        at = end
    return spans


def wait_for_spans(
    server: Server, trace_ids: set[str], timeout: float = 20.0
) -> list[dict[str, Any]]:
    """Every exported span, once each of ``trace_ids`` has its request span exported."""
    deadline = time.monotonic() + timeout
    while True:
        spans = exported_spans(server.logs())
        done = {s["context"]["trace_id"] for s in spans if s["name"] == f"{P}request"}
        if trace_ids <= done or time.monotonic() > deadline:
            return spans
        time.sleep(0.1)


def ask(server: Server, body: dict[str, Any], trace_id: str, flags: str = "01") -> dict[str, Any]:
    response = httpx.post(
        server.url + "/v1/query",
        json=body,
        headers={"traceparent": f"00-{trace_id}-{CALLER_SPAN}-{flags}"},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def trace_of(spans: list[dict[str, Any]], trace_id: str) -> dict[str, dict[str, Any]]:
    mine = [s for s in spans if s["context"]["trace_id"] == "0x" + trace_id]
    named = {s["name"]: s for s in mine}
    assert len(named) == len(mine), [s["name"] for s in mine]
    return named


def test_a_traced_request_through_serve_is_one_trace_under_the_callers(tmp_path: Path) -> None:
    with json_engine([{"id": "x", "title": "disk"}]) as engine:
        engine.delay_s = 2.0
        env = {"NAUTILUS_CONFIG": str(write_sources(tmp_path, engine.url)), **SDK_ENV}
        ranked_id, plain_id, unsampled_id = (f"{n:032x}" for n in (0xA1, 0xB2, 0xC3))
        with running(tmp_path, env) as server:
            ranked = ask(
                server,
                {"query": QUERY, "top_k": 5, "boosts": {"runbooks": "high"}, "max_tokens": 300},
                ranked_id,
            )
            plain = ask(server, {"query": QUERY}, plain_id)
            ask(server, {"query": QUERY, "top_k": 3}, unsampled_id, flags="00")
            spans = wait_for_spans(server, {"0x" + ranked_id, "0x" + plain_id})
            logs = server.logs()
    assert trace_of(spans, unsampled_id) == {}  # the caller's sampling decision holds
    named = trace_of(spans, ranked_id)
    request = named[f"{P}request"]
    # FastAPI's server span continues the caller's; ours is under it
    [server_span] = [s for s in named.values() if s["kind"] == "SpanKind.SERVER"]
    assert server_span["parent_id"] == "0x" + CALLER_SPAN
    ancestors, at = [], request
    while at["parent_id"] in {s["context"]["span_id"] for s in named.values()}:
        at = next(s for s in named.values() if s["context"]["span_id"] == at["parent_id"])
        ancestors.append(at["name"])
    assert server_span["name"] in ancestors
    assert request["resource"]["attributes"]["service.name"] == "nautilus-under-test"
    ids = ["tickets", "graph", "runbooks", "postmortems", "slow", "down"]
    for sid in ids:
        span = named[f"{P}source {sid}"]
        assert span["parent_id"] == request["context"]["span_id"]
    slow, down = named[f"{P}source slow"], named[f"{P}source down"]
    assert slow["status"]["status_code"] == down["status"]["status_code"] == "ERROR"
    errored = {e["source_id"]: e["error_type"] for e in ranked["sources_errored"]}
    assert {e["trace_id"] for e in ranked["sources_errored"]} == {ranked_id}
    assert slow["attributes"]["error.type"] == errored["slow"]
    assert down["attributes"]["error.type"] == errored["down"] == "HttpUnavailableError"
    assert errored["slow"] == "timeout"  # whichever deadline fired: the source's or the broker's
    # the rows: the answer's rows are the budget's rows out, the request span's count
    ranking = named[f"{P}ranking"]["attributes"]
    rows = sum(len(v) for v in ranked["data"].values())
    assert (
        ranking[f"{P}ranking.budget.rows_out"] == rows == request["attributes"][f"{P}response.rows"]
    )
    assert ranking[f"{P}ranking.budget.tokens_used"] == ranked["budget"]["tokens_used"]
    assert ranking[f"{P}ranking.fusion.boosted_sources"] == ["runbooks:high"]
    assert request["attributes"][f"{P}request.id"] == ranked["request_id"]
    # a passthrough: each source's span counts exactly the rows the answer holds for it
    passthrough = trace_of(spans, plain_id)
    for sid in ids:
        attributes = passthrough[f"{P}source {sid}"]["attributes"]
        assert attributes[f"{P}source.rows"] == len(plain["data"].get(sid, [])), sid
    assert passthrough[f"{P}ranking"]["attributes"][f"{P}ranking.enabled"] is False
    # every log line of the request carries its trace id
    failed = [
        json.loads(line)
        for line in logs.splitlines()
        if line.startswith("{") and '"source_failed"' in line and ranked_id in line
    ]
    assert {e["source_id"] for e in failed} == {"slow", "down"}
    for event in failed:
        assert (
            event["span_id"] == named[f"{P}source {event['source_id']}"]["context"]["span_id"][2:]
        )
    assert QUERY not in "\n".join(json.dumps(s) for s in spans)


def test_two_workers_each_start_the_sdk_and_trace_their_requests(tmp_path: Path) -> None:
    env = {"NAUTILUS_RANKING_TOP_K": "3", **SDK_ENV}
    trace_ids = ["%032x" % (0xD0 + n) for n in range(6)]
    with running(tmp_path, env, workers=2) as server:
        for trace_id in trace_ids:
            ask(server, {"query": QUERY}, trace_id)
        spans = wait_for_spans(server, {"0x" + t for t in trace_ids})
    for trace_id in trace_ids:
        named = trace_of(spans, trace_id)
        assert {f"{P}request", f"{P}ranking"} <= set(named)
        assert sum(name.startswith(f"{P}source ") for name in named) == 4


def test_an_exporter_that_is_not_installed_stops_serve_before_it_starts(tmp_path: Path) -> None:
    import os

    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("OTEL_")}
    env.update(NAUTILUS_DATA_DIR=str(tmp_path / "data"), OTEL_TRACES_EXPORTER="zipkin")
    done = run_nautilus("serve", "--port", str(free_port()), env=env, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "OTEL_TRACES_EXPORTER: no exporter 'zipkin' is installed" in done.stderr
    assert "pip install opentelemetry-exporter-zipkin" in done.stderr
    assert "Traceback" not in done.stderr
