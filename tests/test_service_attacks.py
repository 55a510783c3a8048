"""`nautilus serve` under attack, each on a real server on loopback: clients that stall
their bodies (raw sockets), what an unauthenticated caller learns with API keys on,
bodies past the JSON parser's limits, and non-finite numbers in the answer."""

from __future__ import annotations

import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from servers import Server, running, wait_ready

KEY = "k-7d1e0b2a94"
BODY_TIMEOUT_S = 2
STALLED = 64  # the default NAUTILUS_SERVE_MAX_CONCURRENCY
STALLED_REQUEST = (b"POST /v1/query HTTP/1.1\r\nHost: nautilus\r\n"
                   b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
                   b'{"query":"')


def stall(server: Server, count: int) -> list[socket.socket]:
    """``count`` connections that announce a 100-byte body, send 10 bytes and wait."""
    address = urlsplit(server.url)
    sockets = []
    for _ in range(count):
        sock = socket.create_connection((address.hostname, address.port), timeout=60)
        sock.sendall(STALLED_REQUEST)
        sockets.append(sock)
    return sockets


def answer_of(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    chunks = []
    with sock:
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def assert_cut_with_a_408(raw: bytes) -> None:
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), raw[:300]
    assert b"content-type: application/problem+json" in head.lower()
    assert b"connection: close" in head.lower()
    problem = json.loads(body)
    assert problem["status"] == 408 and "NAUTILUS_SERVE_BODY_TIMEOUT_S" in problem["detail"]


def test_stalled_bodies_hold_no_slot_are_cut_at_the_deadline_and_do_not_hold_shutdown(
        tmp_path: Path) -> None:
    env = {"NAUTILUS_SERVE_BODY_TIMEOUT_S": str(BODY_TIMEOUT_S),
           "NAUTILUS_SERVE_REQUEST_TIMEOUT_S": "10"}
    with running(tmp_path, env) as server:
        assert wait_ready(server).status_code == 200
        stalled = stall(server, STALLED)
        time.sleep(0.5)  # every stalled request has reached the application
        # A client that trickles its body, one byte at a time, is cut all the same.
        trickler = stall(server, 1)[0]
        stop = threading.Event()

        def trickle() -> None:
            while not stop.wait(0.2):
                try:
                    trickler.sendall(b"x")
                except OSError:
                    return

        threading.Thread(target=trickle, daemon=True).start()
        with httpx.Client(base_url=server.url, timeout=10) as client:  # the request timeout
            answers = [client.post("/v1/query", json={"query": f"disk full {i}"})
                       for i in range(8)]
            assert [a.status_code for a in answers] == [200] * 8, answers[-1].text
            assert client.get("/healthz").status_code == 200
        with ThreadPoolExecutor(16) as pool:
            cut = list(pool.map(answer_of, [*stalled, trickler]))
        stop.set()
        for raw in cut:
            assert_cut_with_a_408(raw)

        # At SIGTERM, stalled clients are cut at the same deadline: a clean drain, exit 0.
        stalled = stall(server, STALLED)
        time.sleep(0.5)
        assert server.stop(timeout=60) == 0
        with ThreadPoolExecutor(16) as pool:
            cut = list(pool.map(answer_of, stalled))
        for raw in cut:
            assert_cut_with_a_408(raw)
        logged = [json.loads(line) for line in server.logs().splitlines()
                  if line.startswith("{")]
        assert logged[-1]["event"] == "serve_stopped"
        assert not [e for e in logged if e["event"] == "request_failed"]
        statuses = [e["status"] for e in logged if e["event"] == "http_request"
                    and e["path"] == "/v1/query"]
        assert statuses.count(408) == 2 * STALLED + 1 and statuses.count(200) == 8
