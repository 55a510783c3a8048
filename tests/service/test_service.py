"""`nautilus-ranking serve` as a real subprocess on loopback, driven with httpx: the API,
its error bodies, metrics, request ids and concurrency. One server for the module."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_process import run_nautilus
from plain_environment import plain_environment

from nautilus_ranking.request.model import QueryRequest
from tools.servers import Server, running, wait_ready

QUERY = "orders-db disk full"
SETTINGS = {
    "NAUTILUS_RANKING_TOP_K": "5",
    "NAUTILUS_RANKING_IDF": "true",
    "NAUTILUS_SERVE_MAX_QUERY_CHARS": "200",
    "NAUTILUS_SERVE_MAX_BODY_BYTES": "4096",
    "NAUTILUS_SERVE_API_KEYS_FILE": "",
}
SOURCES = ["tickets", "graph", "runbooks", "postmortems"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("serve")
    with running(tmp, SETTINGS) as srv:
        assert wait_ready(srv).status_code == 200, srv.logs()
        yield srv


def post(server: Server, body: object, **kwargs: object) -> httpx.Response:
    return httpx.post(server.url + "/v1/query", json=body, timeout=30, **kwargs)  # type: ignore[arg-type]


def problem(response: httpx.Response, status: int) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, object] = response.json()
    assert body["status"] == status and body["request_id"] == response.headers["x-request-id"]
    assert str(body["type"]).startswith("urn:nautilus:problem:")
    assert "Traceback" not in response.text
    return body


def test_query_answers_the_same_object_as_nautilus_query_json(server: Server) -> None:
    response = post(server, {"query": QUERY})
    assert response.status_code == 200, response.text
    body = response.json()
    env = plain_environment()
    env.update(SETTINGS, NAUTILUS_DATA_DIR=os.environ["NAUTILUS_DATA_DIR"])
    cli = run_nautilus("query", QUERY, "--json", env=env, check=True)
    expected = json.loads(cli.stdout)
    assert set(body) == set(expected)
    for key in ("data", "ranking", "response_hash", "source_response_hashes", "sources_queried"):
        assert body[key] == expected[key], key
    assert len(body["ranking"]) == 5 and body["sources_errored"] == []


def test_a_json_body_is_accepted_without_a_json_content_type(server: Server) -> None:
    body = json.dumps({"query": QUERY, "top_k": 3})
    for headers in (
        {},
        {"content-type": "application/x-www-form-urlencoded"},
        {"content-type": "text/plain"},
    ):
        response = httpx.post(server.url + "/v1/query", content=body, headers=headers, timeout=30)
        assert response.status_code == 200, response.text
        assert len(response.json()["ranking"]) == 3


def test_request_id_is_echoed_and_used_as_the_response_request_id(server: Server) -> None:
    response = post(server, {"query": QUERY}, headers={"X-Request-ID": "trace-42.a"})
    assert response.headers["x-request-id"] == "trace-42.a"
    assert response.json()["request_id"] == "trace-42.a"
    unsafe = post(
        server, {"query": QUERY}, headers={"X-Request-ID": "a b\u00e9".encode("latin-1") * 60}
    )
    assert len(unsafe.headers["x-request-id"]) == 32  # replaced, never echoed raw
    assert httpx.get(server.url + "/healthz").headers["x-request-id"]


def test_overrides_choose_sources_top_k_boosts_and_explain(server: Server) -> None:
    body = post(
        server,
        {
            "query": QUERY,
            "sources": ["GRAPH", "runbooks"],
            "top_k": 2,
            "boosts": {"runbooks": "high"},
            "idf": False,
            "explain": True,
        },
    ).json()
    assert body["sources_queried"] == ["graph", "runbooks"]
    assert set(body["data"]) == {"graph", "runbooks"} and len(body["ranking"]) == 2
    explain = body["explain"]
    assert explain["top_k"] == 2 and explain["boosts"] == {"runbooks": "high"}
    assert explain["idf"] is False and explain["sources"] == ["graph", "runbooks"]
    assert set(explain["overrides"]) == {"top_k", "boosts", "idf", "sources"}
    plain = post(server, {"query": QUERY}).json()
    assert "explain" not in plain and plain["sources_queried"] == SOURCES


#: Every field of the request, as a refusal lists them.
FIELDS = ", ".join(QueryRequest.model_fields)


@pytest.mark.parametrize(
    ("body", "field", "value", "valid"),
    [
        (
            {"query": "x", "boosts": {"graph": "hgih"}},
            "boosts",
            "graph:hgih",
            "-high, -medium, -low, low, medium, high",
        ),
        (
            {"query": "x", "boosts": {"grpah": "high"}},
            "boosts",
            "grpah",
            "tickets, graph, runbooks, postmortems",
        ),
        (
            {"query": "x", "sources": ["tickets", "nope"]},
            "sources",
            "nope",
            "tickets, graph, runbooks, postmortems",
        ),
        (
            {"query": "x", "sources": []},
            "sources",
            "[]",
            "one or more of: tickets, graph, runbooks, postmortems",
        ),
        ({"query": "x", "top_k": 0}, "top_k", "0", "an integer >= 1"),
        ({"query": "x", "top_k": "ten"}, "top_k", "ten", "an integer >= 1"),
        ({"query": "x", "idf": "maybe"}, "idf", "maybe", "true or false"),
        ({"query": "x", "topk": 3}, "topk", "3", FIELDS),
        ({"query": ""}, "query", "", "a non-empty string"),
        ({"top_k": 3}, "query", "{'top_k': 3}", "a non-empty string"),
        (["query"], "body", "['query']", "a JSON object with " + FIELDS),
        ({"query": "x", "max_tokens": 0}, "max_tokens", "0", "an integer >= 1"),
        (
            {"query": "x", "cut": "steep:2"},
            "cut",
            "steep:2",
            "relative:A, floor:T or gap:G with a number in (0, 1], e.g. relative:0.8; or off",
        ),
        ({"query": "q" * 201}, "query", "(201 characters)", "at most 200 characters"),
    ],
)
def test_a_bad_request_is_a_422_naming_field_value_and_valid_choices(
    server: Server, body: object, field: str, value: str, valid: str
) -> None:
    got = problem(post(server, body), 422)
    assert (got["field"], got["value"], got["valid"]) == (field, value, valid)
    assert f"{field}: {value!r}" in str(got["detail"])


def test_invalid_json_is_a_422_and_every_problem_is_listed(server: Server) -> None:
    got = problem(httpx.post(server.url + "/v1/query", content=b'{"query": ', timeout=10), 422)
    assert got["field"] == "body" and "not valid JSON" in str(got["detail"])
    got = problem(post(server, {"query": "x", "top_k": 0, "sources": ["nope"]}), 422)
    assert [e["field"] for e in got["errors"]] == ["top_k", "sources"]  # type: ignore[union-attr]


def test_a_body_over_the_limit_is_a_413_declared_or_streamed(server: Server) -> None:
    big = json.dumps({"query": "x", "pad": "y" * 5000}).encode()
    got = problem(httpx.post(server.url + "/v1/query", content=big, timeout=10), 413)
    assert "4096 bytes" in str(got["detail"])

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while read
        yield b'{"query": "'
        for _ in range(10):
            yield b"z" * 1000
        yield b'"}'

    problem(httpx.post(server.url + "/v1/query", content=chunks(), timeout=10), 413)


def test_unknown_routes_and_methods_are_problems_too(server: Server) -> None:
    problem(httpx.get(server.url + "/v2/nothing"), 404)
    got = problem(httpx.get(server.url + "/v1/query"), 405)
    assert "GET /v1/query" in str(got["detail"])


def test_health_readiness_and_config(server: Server) -> None:
    assert httpx.get(server.url + "/healthz").json() == {"status": "ok"}
    ready = httpx.get(server.url + "/readyz").json()
    assert ready == {"status": "ready", "sources": sorted(SOURCES)}
    config = httpx.get(server.url + "/v1/config").json()
    assert config["settings"]["NAUTILUS_RANKING_TOP_K"] == 5
    assert config["settings"]["NAUTILUS_SERVE_MAX_BODY_BYTES"] == 4096
    assert config["sources"] == SOURCES and config["skipped"] == []
    assert config["synthesizer"] == "RankingSynthesizer"


def test_metrics_show_latency_source_latency_and_top_k_share(server: Server) -> None:
    for _ in range(3):
        post(server, {"query": QUERY})
    text = httpx.get(server.url + "/metrics").text
    samples = {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }
    assert samples['nautilus_request_duration_seconds_count{route="/v1/query",status="200"}'] >= 3
    for source in SOURCES:
        assert samples[f'nautilus_source_duration_seconds_count{{source="{source}"}}'] >= 3
    shares = {s: samples[f'nautilus_source_topk_share{{source="{s}"}}'] for s in SOURCES}
    assert sum(shares.values()) == pytest.approx(1.0) and all(0 <= v <= 1 for v in shares.values())
    rows = {s: samples[f'nautilus_source_topk_rows_total{{source="{s}"}}'] for s in SOURCES}
    assert shares["graph"] == pytest.approx(rows["graph"] / sum(rows.values()))
    assert samples["nautilus_config_problems"] == 0
    assert 'route="/v2/nothing"' not in text  # bounded labels: unknown paths are "other"


def test_each_request_logs_one_structured_access_line(server: Server) -> None:
    post(server, {"query": QUERY}, headers={"X-Request-ID": "access-log-check"})

    def access_lines() -> list[dict[str, Any]]:
        lines = [json.loads(x) for x in server.logs().splitlines() if x.startswith("{")]
        return [
            e
            for e in lines
            if e["event"] == "http_request" and e.get("request_id") == "access-log-check"
        ]

    # the line is written after the answer is sent: on a loaded machine, a moment later
    deadline = time.monotonic() + 30
    while not access_lines() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)  # a second line, were there one, would be written by now too
    access = access_lines()
    assert len(access) == 1
    assert access[0]["status"] == 200 and access[0]["path"] == "/v1/query"
    assert access[0]["method"] == "POST" and access[0]["duration_ms"] > 0


def test_concurrent_queries_all_answer_with_their_own_request_ids(server: Server) -> None:
    async def burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
            return await asyncio.gather(
                *(
                    client.post(
                        "/v1/query",
                        json={"query": f"{QUERY} {i % 4}"},
                        headers={"X-Request-ID": f"burst-{i}"},
                    )
                    for i in range(40)
                )
            )

    responses = asyncio.run(burst())
    assert [r.status_code for r in responses] == [200] * 40
    assert [r.json()["request_id"] for r in responses] == [f"burst-{i}" for i in range(40)]


def test_openapi_fuzzing_finds_no_server_error(server: Server, tmp_path: Path) -> None:
    """schemathesis drives every operation from /openapi.json; no response may be a 5xx."""
    schemathesis = Path(sys.executable).with_name("schemathesis")
    # Bounded: at most 20 cases per operation and phase; under CI the same cases every run.
    randomness = (
        ["--generation-deterministic"]
        if os.environ.get("CI")
        else ["--generation-database", "none"]
    )
    result = subprocess.run(
        [
            str(schemathesis),
            "run",
            server.url + "/openapi.json",
            "--checks",
            "not_a_server_error",
            "--max-examples",
            "20",
            *randomness,
            "--phases",
            "examples,coverage,fuzzing",
            "--suppress-health-check",
            "all",
            "--request-timeout",
            "20",
            "--workers",
            "1",
            "--no-color",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "SCHEMATHESIS_TELEMETRY": "false"},
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "No issues found" in result.stdout, result.stdout[-4000:]
    assert re.search(r"Tested:\s+5\b", result.stdout), result.stdout[-4000:]  # every operation


def test_cors_is_off_unless_configured(server: Server) -> None:
    preflight = httpx.options(
        server.url + "/v1/query",
        headers={"Origin": "https://app.example.com", "Access-Control-Request-Method": "POST"},
    )
    assert "access-control-allow-origin" not in preflight.headers
    assert (
        "access-control-allow-origin"
        not in post(server, {"query": QUERY}, headers={"Origin": "https://app.example.com"}).headers
    )
