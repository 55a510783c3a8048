"""`nautilus-ranking serve` under attack, each on a real server on loopback: clients that stall
their bodies (raw sockets), what an unauthenticated caller learns with API keys on,
bodies past the JSON parser's limits, and non-finite numbers in the answer."""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from nautilus_ranking.sources.factory import bundled_demo_config
from tools.servers import Server, running, wait_failing, wait_ready

KEY = "k-7d1e0b2a94"
BODY_TIMEOUT_S = 2
STALLED = 64  # the default NAUTILUS_SERVE_MAX_CONCURRENCY
STALLED_REQUEST = (
    b"POST /v1/query HTTP/1.1\r\nHost: nautilus\r\n"
    b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    b'{"query":"'
)


def stall(server: Server, count: int, sent: bytes = STALLED_REQUEST) -> list[socket.socket]:
    """``count`` connections that send ``sent`` (by default: announce a 100-byte body and
    send 10 bytes of it) and wait."""
    address = urlsplit(server.url)
    sockets = []
    for _ in range(count):
        sock = socket.create_connection((address.hostname, address.port), timeout=60)
        if sent:
            sock.sendall(sent)
        sockets.append(sock)
    return sockets


def answer_of(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    chunks = []
    with sock:
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def trickler_answer(sock: socket.socket) -> bytes | None:
    """The trickling client's answer, or None when the server's close reset it."""
    try:
        return answer_of(sock)
    except ConnectionResetError:
        return None


def assert_cut_with_a_408(raw: bytes) -> None:
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), raw[:300]
    assert b"content-type: application/problem+json" in head.lower()
    assert b"connection: close" in head.lower()
    problem = json.loads(body)
    assert problem["status"] == 408 and "NAUTILUS_SERVE_BODY_TIMEOUT_S" in problem["detail"]


def test_stalled_bodies_hold_no_slot_are_cut_at_the_deadline_and_do_not_hold_shutdown(
    tmp_path: Path,
) -> None:
    env = {
        "NAUTILUS_SERVE_BODY_TIMEOUT_S": str(BODY_TIMEOUT_S),
        "NAUTILUS_SERVE_REQUEST_TIMEOUT_S": "10",
    }
    with running(tmp_path, env) as server:
        assert wait_ready(server).status_code == 200
        stalled = stall(server, STALLED)
        # Headers that never end, and a connection that sends nothing: closed all the same.
        silent = stall(server, 8, STALLED_REQUEST.split(b"Content-Length")[0]) + stall(
            server, 8, b""
        )
        time.sleep(0.5)  # every stalled request has reached the application
        # A client that trickles its body, one byte at a time, is cut all the same.
        trickler = stall(server, 1)[0]
        stop = threading.Event()

        def trickle() -> None:
            # Stops once the server has answered: a byte sent after the server closed
            # the socket draws a TCP reset, which can discard the 408 before it is read.
            while not stop.wait(0.2):
                try:  # (closed under us once read: ValueError for its fd of -1)
                    if select.select([trickler], [], [], 0)[0]:
                        return
                    trickler.sendall(b"x")
                except (OSError, ValueError):
                    return

        threading.Thread(target=trickle, daemon=True).start()
        with httpx.Client(base_url=server.url, timeout=10) as client:  # the request timeout
            answers = [client.post("/v1/query", json={"query": f"disk full {i}"}) for i in range(8)]
            assert [a.status_code for a in answers] == [200] * 8, answers[-1].text
            assert client.get("/healthz").status_code == 200
        with ThreadPoolExecutor(16) as pool:
            cut = list(pool.map(answer_of, stalled))
            trickled = pool.submit(trickler_answer, trickler)
            cut_trickler = trickled.result()
        stop.set()
        for raw in cut:
            assert_cut_with_a_408(raw)
        # a byte that arrives as the server closes the trickler's socket is unread there,
        # so the kernel may reset the connection and drop the 408 with it: the metric
        # below counts the trickler among the bodies cut at the deadline all the same
        if cut_trickler is not None:
            assert_cut_with_a_408(cut_trickler)
        with ThreadPoolExecutor(16) as pool:
            assert list(pool.map(answer_of, silent)) == [b""] * 16  # closed, nothing said
        scrape = httpx.get(server.url + "/metrics").text
        assert (
            f'nautilus_requests_rejected_total{{reason="body_timeout"}} {STALLED + 1}.0' in scrape
        )
        assert 'nautilus_requests_rejected_total{reason="header_timeout"} 16.0' in scrape

        # At SIGTERM, stalled clients are cut at the same deadline: a clean drain, exit 0.
        stalled = stall(server, STALLED)
        time.sleep(0.5)
        assert server.stop(timeout=60) == 0
        with ThreadPoolExecutor(16) as pool:
            cut = list(pool.map(answer_of, stalled))
        for raw in cut:
            assert_cut_with_a_408(raw)
        logged = [json.loads(line) for line in server.logs().splitlines() if line.startswith("{")]
        assert logged[-1]["event"] == "serve_stopped"
        assert not [e for e in logged if e["event"] == "request_failed"]
        statuses = [
            e["status"] for e in logged if e["event"] == "http_request" and e["path"] == "/v1/query"
        ]
        assert statuses.count(408) == 2 * STALLED + 1 and statuses.count(200) == 8


def demo_sources(tmp: Path, extra: str = "") -> Path:
    """The demo's sources (seeds by absolute path) plus ``extra`` entries."""
    demo = bundled_demo_config()
    text = demo.read_text()
    for seed in sorted({p.name for p in demo.parent.glob("*.jsonl")}):
        text = text.replace(f" {seed}", f" {demo.parent / seed}")
    path = tmp / "nautilus.yaml"
    path.write_text(text + extra, encoding="utf-8")
    return path


NAN_SOURCE = """  - id: numbers
    type: sqlite_table
    path: numbers.db
    seed: {seed}
    table: numbers
    search_columns: [title]
"""


def strict_json(text: str) -> object:
    """Parse as a strict parser would: NaN and Infinity are errors."""

    def refuse(name: str) -> object:
        raise AssertionError(f"bare {name} in the body")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """No API keys (the default), plus a source whose seed holds NaN and infinities."""
    tmp = tmp_path_factory.mktemp("open")
    seed = tmp / "numbers.jsonl"
    seed.write_text(
        '{"id": "n1", "title": "disk full", "ratio": NaN, "peak": Infinity, '
        '"floor": -Infinity}\n{"id": "n2", "title": "disk fine", "ratio": 0.5}\n'
    )
    env = {"NAUTILUS_CONFIG": str(demo_sources(tmp, NAN_SOURCE.format(seed=seed)))}
    with running(tmp, env) as server:
        assert wait_ready(server).status_code == 200, server.logs()
        yield server


def post_raw(server: Server, body: bytes) -> httpx.Response:
    return httpx.post(
        server.url + "/v1/query",
        content=body,
        timeout=30,
        headers={"Content-Type": "application/json"},
    )


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"[" * 5000 + b"]" * 5000, "nested too deeply"),
        (b'{"query": "x", "boosts": ' + b"[" * 5000 + b"]" * 5000 + b"}", "nested too deeply"),
        (b'{"query": "x", "top_k": 1' + b"0" * 5000 + b"}", "digits"),
        (b'{"query": "x", "top_k": NaN}', "NaN is not a JSON number"),
        (b'{"query": "x", "top_k": -Infinity}', "-Infinity is not a JSON number"),
    ],
)
def test_bodies_past_the_json_parsers_limits_are_a_422(
    open_server: Server, body: bytes, reason: str
) -> None:
    response = post_raw(open_server, body)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["field"] == "body" and reason in problem["detail"], problem
    assert "Traceback" not in response.text


def test_nested_values_the_parser_accepts_are_a_422_not_a_500(open_server: Server) -> None:
    for field in ("boosts", "sources", "query", "top_k"):
        depth = 900  # parsed, then refused by the model: the message must not recurse
        body = f'{{"query": "x", "{field}": {"[" * depth}{"]" * depth}}}'.encode()
        response = post_raw(open_server, body)
        assert response.status_code == 422, (field, response.text[:300])
        assert response.json()["field"].startswith(field)


def test_non_finite_numbers_from_a_seed_are_null_in_the_body(open_server: Server) -> None:
    response = post_raw(open_server, b'{"query": "disk full", "sources": ["numbers"]}')
    assert response.status_code == 200, response.text
    body = strict_json(response.text)
    rows = {r["id"]: r for r in body["data"]["numbers"]}  # type: ignore[index]
    assert rows["n1"]["peak"] is None and rows["n1"]["floor"] is None
    assert rows["n1"]["ratio"] is None and rows["n2"]["ratio"] == 0.5


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"query": "disk", "top_k": True}, 422, "top_k"),
        ({"query": "disk", "top_k": False}, 422, "top_k"),
        ({"query": "disk", "explain": None}, 200, None),
        ({"query": "disk", "idf": None, "boosts": None, "sources": None, "top_k": None}, 200, None),
    ],
)
def test_booleans_are_not_numbers_and_every_field_accepts_null(
    open_server: Server, body: object, status: int, field: str | None
) -> None:
    response = httpx.post(open_server.url + "/v1/query", json=body, timeout=30)
    assert response.status_code == status, response.text
    if field is not None:
        assert response.json()["field"] == field


def test_the_schema_says_what_the_service_does(open_server: Server) -> None:
    schema = httpx.get(open_server.url + "/openapi.json").json()
    metrics = schema["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    assert list(metrics) == ["text/plain"]
    query = schema["paths"]["/v1/query"]["post"]["requestBody"]["content"]["application/json"]
    assert query["schema"]["properties"]["sources"]["minItems"] == 1
    assert httpx.get(open_server.url + "/docs").status_code == 404  # no CDN page, ever


def test_config_reports_the_port_actually_bound(open_server: Server) -> None:
    settings = httpx.get(open_server.url + "/v1/config").json()["settings"]
    assert settings["NAUTILUS_SERVE_PORT"] == urlsplit(open_server.url).port


UNICODE_KEY = "k-schlüssel-ключ"
BROKEN_SOURCE = """  - id: broken
    type: sqlite_fts
    path: broken.db
    seed: {seed}
    columns: [title]
"""


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """API keys on, and a source whose seed is removed once the server is up."""
    tmp = tmp_path_factory.mktemp("keyed")
    keys = tmp / "keys"
    keys.write_text(f"{KEY}\n{UNICODE_KEY}\n", encoding="utf-8")
    keys.chmod(0o600)  # a secret: owner-only
    seed = tmp / "secret-folder" / "broken.jsonl"
    seed.parent.mkdir()
    seed.write_text('{"id": "b1", "title": "disk"}\n')
    env = {
        "NAUTILUS_CONFIG": str(demo_sources(tmp, BROKEN_SOURCE.format(seed=seed))),
        "NAUTILUS_SERVE_API_KEYS_FILE": str(keys),
        # Stale after three intervals: long enough that a healthy source's probe on a
        # busy machine still lands in time, so "not answering" names only the broken one.
        "NAUTILUS_SERVE_PROBE_INTERVAL_S": "2",
    }
    with running(tmp, env) as server:
        seed.unlink()
        # Wait for the broken source's own failure, not any 503: before the first probe
        # (or while a model loads) /readyz answers 503 too, and a probe that succeeded
        # before the seed went keeps the source ready for three intervals.
        wait_failing(server, {"X-API-Key": KEY}, ["broken"], "SeedError")
        yield server


def test_without_a_key_readyz_tells_the_status_and_nothing_else(keyed: Server) -> None:
    anonymous = httpx.get(keyed.url + "/readyz")
    assert anonymous.status_code == 503 and anonymous.headers["retry-after"] == "5"
    problem = anonymous.json()
    assert problem["detail"] == "1 source(s) not answering" and "failing" not in problem
    for secret in ("broken", "secret-folder", "SeedError", "tickets"):
        assert secret not in anonymous.text
    with_key = httpx.get(keyed.url + "/readyz", headers={"Authorization": f"Bearer {KEY}"})
    assert with_key.status_code == 503
    assert list(with_key.json()["failing"]) == ["broken"]
    assert "SeedError" in with_key.json()["failing"]["broken"]


def test_without_a_key_the_schema_and_its_pages_are_closed(keyed: Server) -> None:
    assert httpx.get(keyed.url + "/openapi.json").status_code == 401
    for page in ("/docs", "/redoc"):  # a browser page cannot send a key: off
        assert httpx.get(keyed.url + page).status_code == 404
        assert httpx.get(keyed.url + page, headers={"X-API-Key": KEY}).status_code == 404
    schema = httpx.get(keyed.url + "/openapi.json", headers={"X-API-Key": KEY})
    assert schema.status_code == 200 and "/v1/query" in schema.json()["paths"]
    assert httpx.get(keyed.url + "/healthz").status_code == 200
    assert httpx.get(keyed.url + "/metrics").headers["content-type"].startswith("text/plain")


@pytest.mark.parametrize(
    "headers",
    [
        {"X-API-Key": "", "Authorization": f"Bearer {KEY}"},
        {"X-API-Key": "k-wrong", "Authorization": f"Bearer {KEY}"},
        {"X-API-Key": KEY, "Authorization": "Bearer k-wrong"},
        {"Authorization": b"Bearer " + UNICODE_KEY.encode("utf-8")},
        {"X-API-Key": UNICODE_KEY.encode("utf-8")},
    ],
)
def test_any_header_with_a_good_key_is_let_in(
    keyed: Server, headers: dict[str, str | bytes]
) -> None:
    response = httpx.get(keyed.url + "/v1/config", headers=headers)
    assert response.status_code == 200, response.text
