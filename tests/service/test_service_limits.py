"""`nautilus-ranking serve` limits and failure paths, each on a real server: API keys,
forbidden overrides, CORS, a failing source and readiness, the deadline, a 500
without a stack trace, overload (503 + Retry-After), graceful shutdown, and
metrics summed over two workers."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from nautilus_ranking.sources.factory import bundled_demo_config
from tools.servers import Server, running, wait_failing, wait_ready

KEY = "k-3f9a1c7e5b"
DEMO = bundled_demo_config().parent


def sources_file(tmp: Path) -> Path:
    """The demo's four sources plus one whose seed is removed once the server has started
    (a valid file at start-up, then every request for it fails)."""
    text = bundled_demo_config().read_text()
    for seed in (
        "tickets.jsonl",
        "services.jsonl",
        "dependencies.jsonl",
        "runbooks.jsonl",
        "postmortems.jsonl",
    ):
        text = text.replace(f" {seed}", f" {DEMO / seed}")
    text += """  - id: broken
    type: sqlite_fts
    path: demo/broken.db
    seed: {seed}
    columns: [title]
    timeout_s: 1
"""
    seed = tmp / "broken.jsonl"
    seed.write_text('{"id": "b1", "title": "disk"}\n')
    path = tmp / "nautilus.yaml"
    path.write_text(text.replace("{seed}", str(seed)))
    return path


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Keys, overrides off, CORS for one origin, a broken source, postmortems slower
    than the deadline, and one query that makes the broker raise."""
    tmp = tmp_path_factory.mktemp("guarded")
    keys = tmp / "keys"
    keys.write_text(f"# rotated 2026-11\n{KEY}\nk-other\n")
    keys.chmod(0o600)  # a secret: owner-only
    env = {
        "NAUTILUS_CONFIG": str(sources_file(tmp)),
        "NAUTILUS_SERVE_API_KEYS_FILE": str(keys),
        "NAUTILUS_SERVE_ALLOW_OVERRIDES": "false",
        "NAUTILUS_SERVE_REQUEST_TIMEOUT_S": "0.5",
        # Stale after three intervals: room for the slowed source's 1 s probe on a busy
        # machine, so only the broken source is ever "not answering".
        "NAUTILUS_SERVE_PROBE_INTERVAL_S": "2",
        "NAUTILUS_SERVE_CORS_ORIGINS": "https://app.example.com",
    }
    with running(
        tmp, env, launcher=["--slow", "postmortems", "--delay", "1.0", "--explode-on", "boom"]
    ) as server:
        (tmp / "broken.jsonl").unlink()
        yield server


def query(server: Server, body: object, key: str | None = KEY, **headers: str) -> httpx.Response:
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return httpx.post(server.url + "/v1/query", json=body, headers=headers, timeout=30)


def problem(response: httpx.Response, status: int) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, object] = response.json()
    assert body["request_id"] == response.headers["x-request-id"]
    assert "Traceback" not in response.text
    return body


def test_a_missing_or_wrong_key_gets_the_same_uninformative_401(guarded: Server) -> None:
    answers = [
        query(guarded, {"query": "x"}, key=None),
        query(guarded, {"query": "x"}, key="k-3f9a1c7e5c"),
        query(guarded, {"query": "x"}, key=None, Authorization=f"Basic {KEY}"),
        httpx.get(guarded.url + "/v1/config", headers={"X-API-Key": "nope"}),
    ]
    bodies = [problem(r, 401) for r in answers]
    assert {b["detail"] for b in bodies} == {"missing or invalid credentials"}
    assert all(r.headers["www-authenticate"] == "Bearer" for r in answers)
    ok = httpx.get(guarded.url + "/v1/config", headers={"X-API-Key": "k-other"})
    assert ok.status_code == 200


def test_probes_and_metrics_need_no_key(guarded: Server) -> None:
    assert httpx.get(guarded.url + "/healthz").status_code == 200
    assert httpx.get(guarded.url + "/metrics").status_code == 200


def test_overrides_are_forbidden_naming_the_setting(guarded: Server) -> None:
    body = problem(query(guarded, {"query": "x", "boosts": {"graph": "high"}}), 403)
    assert body["setting"] == "NAUTILUS_SERVE_ALLOW_OVERRIDES" and body["field"] == "boosts"
    assert "NAUTILUS_SERVE_ALLOW_OVERRIDES=false" in str(body["detail"])
    problem(query(guarded, {"query": "x", "sources": ["tickets"]}), 403)


def test_as_of_is_forbidden_as_recency_is(guarded: Server) -> None:
    """``as_of`` moves every row's age and the revision in force: an override."""
    for field, value in (("recency", "off"), ("as_of", "1990-01-01")):
        body = problem(query(guarded, {"query": "x", field: value}), 403)
        assert body["field"] == field and body["setting"] == "NAUTILUS_SERVE_ALLOW_OVERRIDES"


def test_past_the_deadline_is_a_504(guarded: Server) -> None:
    body = problem(query(guarded, {"query": "orders-db disk full"}), 504)
    assert "0.5 s" in str(body["detail"])


def test_an_unexpected_error_is_a_500_with_only_the_request_id(guarded: Server) -> None:
    response = query(guarded, {"query": "boom"}, **{"X-Request-ID": "explode-1"})
    body = problem(response, 500)
    assert body["request_id"] == "explode-1"
    assert "internal detail" not in response.text and "RuntimeError" not in response.text
    logged = [json.loads(line) for line in guarded.logs().splitlines() if line.startswith("{")]
    failure = [e for e in logged if e["event"] == "request_failed"]
    assert failure and failure[-1]["request_id"] == "explode-1"
    assert "internal detail" in failure[-1]["error"]  # the detail is in the log


def test_a_failing_source_makes_readyz_503_listing_it(guarded: Server) -> None:
    failing = wait_failing(guarded, {"X-API-Key": KEY}, ["broken"], "SeedError")
    assert list(failing) == ["broken"] and "SeedError" in failing["broken"]
    assert problem(httpx.get(guarded.url + "/readyz", headers={"X-API-Key": KEY}), 503)
    assert httpx.get(guarded.url + "/healthz").status_code == 200  # alive all the same


def test_config_lists_the_sources_and_never_a_key(guarded: Server) -> None:
    config = httpx.get(guarded.url + "/v1/config", headers={"X-API-Key": KEY}).json()
    assert config["sources"][-1] == "broken"
    assert config["settings"]["NAUTILUS_SERVE_ALLOW_OVERRIDES"] is False
    assert KEY not in json.dumps(config)


def test_cors_answers_only_the_configured_origin(guarded: Server) -> None:
    preflight = {"Access-Control-Request-Method": "POST"}
    allowed = httpx.options(
        guarded.url + "/v1/query", headers={"Origin": "https://app.example.com", **preflight}
    )
    assert allowed.headers["access-control-allow-origin"] == "https://app.example.com"
    other = httpx.options(
        guarded.url + "/v1/query", headers={"Origin": "https://evil.example.com", **preflight}
    )
    assert "access-control-allow-origin" not in other.headers


async def until_in_flight(client: httpx.AsyncClient) -> None:
    """Wait until the server is answering a query (its in-flight gauge says so)."""
    for _ in range(200):
        if "nautilus_requests_in_flight 1.0" in (await client.get("/metrics")).text:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the first query never reached the server")


def test_overload_is_a_503_with_retry_after_and_shutdown_lets_in_flight_finish(
    tmp_path: Path,
) -> None:
    env = {"NAUTILUS_SERVE_MAX_CONCURRENCY": "1", "NAUTILUS_SERVE_REQUEST_TIMEOUT_S": "5"}
    with running(tmp_path, env, launcher=["--slow", "runbooks", "--delay", "1.0"]) as server:
        assert wait_ready(server).status_code == 200

        async def two_at_once() -> tuple[httpx.Response, httpx.Response]:
            async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
                first = asyncio.create_task(client.post("/v1/query", json={"query": "disk"}))
                await until_in_flight(client)
                second = await client.post("/v1/query", json={"query": "disk"})
                return await first, second

        first, second = asyncio.run(two_at_once())
        assert first.status_code == 200
        body = problem(second, 503)
        assert second.headers["retry-after"] == "1"
        assert "NAUTILUS_SERVE_MAX_CONCURRENCY" in str(body["detail"])
        assert httpx.get(server.url + "/healthz").status_code == 200  # probes never refused

        async def stop_mid_request() -> httpx.Response:
            async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
                pending = asyncio.create_task(client.post("/v1/query", json={"query": "disk"}))
                await until_in_flight(client)
                await asyncio.to_thread(server.process.send_signal, 15)  # SIGTERM
                return await pending

        in_flight = asyncio.run(stop_mid_request())
        assert in_flight.status_code == 200 and in_flight.json()["data"]["runbooks"]
        assert server.process.wait(30) == 0  # the first SIGTERM: drain, then a clean exit
        logged = [json.loads(line) for line in server.logs().splitlines() if line.startswith("{")]
        assert logged[-1]["event"] == "serve_stopped"
        assert not Path(logged[0]["metrics_dir"]).exists()  # its temporary directory removed


def test_metrics_are_summed_over_two_workers(tmp_path: Path) -> None:
    with running(tmp_path, {"NAUTILUS_RANKING_TOP_K": "3"}, workers=2) as server:
        assert wait_ready(server).status_code == 200

        async def load() -> list[int]:
            async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
                answers = await asyncio.gather(
                    *(client.post("/v1/query", json={"query": f"disk full {i}"}) for i in range(24))
                )
                return [a.status_code for a in answers]

        assert asyncio.run(load()) == [200] * 24
        for _ in range(4):  # whichever worker answers the scrape, the totals are the same
            text = httpx.get(server.url + "/metrics").text
            assert (
                'nautilus_request_duration_seconds_count{route="/v1/query",status="200"} 24.0'
                in text
            )
            rows = sum(
                float(line.rsplit(" ", 1)[1])
                for line in text.splitlines()
                if line.startswith("nautilus_source_topk_rows_total{")
            )
            assert rows == 24 * 3


def test_a_client_that_goes_mid_query_frees_its_slot(tmp_path: Path) -> None:
    """A caller that closes its connection while its query runs gives its slot back at
    once: the work is abandoned, and the next caller is answered, not refused with 503."""
    env = {"NAUTILUS_SERVE_MAX_CONCURRENCY": "1", "NAUTILUS_SERVE_REQUEST_TIMEOUT_S": "60"}
    # not waited ready: the slow source's probe would hold /readyz for as long
    slow = ["--slow", "runbooks", "--delay", "30", "--timeout", "60"]
    with running(tmp_path, env, launcher=slow) as server:
        host, port = server.url.removeprefix("http://").split(":")

        async def leave_mid_query() -> float:
            body = json.dumps({"query": "disk"}).encode()
            _reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(
                b"POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            await writer.drain()
            async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
                await until_in_flight(client)
                writer.close()
                await writer.wait_closed()
                left = time.monotonic()
                for _ in range(200):
                    if "nautilus_requests_in_flight 0.0" in (await client.get("/metrics")).text:
                        return time.monotonic() - left
                    await asyncio.sleep(0.05)
            raise AssertionError("the slot was still held 10 s after the client left")

        asyncio.run(leave_mid_query())
        # the slow source is not asked: this query answers at once if the slot is free
        after = httpx.post(
            server.url + "/v1/query", json={"query": "disk", "sources": ["tickets"]}, timeout=30
        )
        assert after.status_code == 200, after.text
        events = [json.loads(x) for x in server.logs().splitlines() if x.startswith("{")]
        assert [e["path"] for e in events if e["event"] == "client_disconnected"] == ["/v1/query"]
