"""`nautilus-ranking mcp --transport http` has the service's edge: slow headers and slow bodies
are cut (so half-sent requests cannot use up the process's files), no standing GET
stream, idle connections are kept as long as `serve` keeps them, and an unknown tool
name adds no metric series. A real server on loopback, raw sockets where the bytes
matter. Before the server shared serve's edge, slow connections were held 45 s and
more, GET streams were unbounded and keep-alive closed at 5 s."""

from __future__ import annotations

import asyncio
import http.client
import resource
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tools.servers import NAUTILUS, free_port

pytest.importorskip("mcp")
from fakes import sources_file
from mcp_support import connect, environment

DEADLINE_S = 1.0


def start(
    tmp: Path,
    fd_limit: int | None = None,
) -> tuple[subprocess.Popen[bytes], str, Path]:
    """A real ``nautilus-ranking mcp --transport http`` with a 1 s body deadline (and, if given, a
    limit on its open files), answering ``/healthz``."""
    sources_file(tmp)
    env = environment(tmp, NAUTILUS_SERVE_BODY_TIMEOUT_S=str(DEADLINE_S))
    port = free_port()
    log = tmp / f"mcp-{port}.log"

    def limit_files() -> None:
        if fd_limit is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, fd_limit))

    with log.open("w") as sink:
        process = subprocess.Popen(
            [NAUTILUS, "mcp", "--transport", "http", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            cwd=tmp,
            stdout=sink,
            stderr=subprocess.STDOUT,
            preexec_fn=limit_files,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        assert process.poll() is None, log.read_text()
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return process, url, log
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)


def stop(process: subprocess.Popen[bytes], log: Path) -> None:
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0, log.read_text()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    process, url, log = start(tmp_path_factory.mktemp("edge"))
    try:
        yield url, int(url.rsplit(":", 1)[1])
    finally:
        stop(process, log)


def _closed_within(sock: socket.socket, seconds: float) -> tuple[bool, bytes]:
    """Whether the server closed ``sock`` within ``seconds``, and what it sent first."""
    sock.settimeout(seconds)
    got = b""
    try:
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                return True, got
            got += chunk
    except TimeoutError:
        return False, got
    except ConnectionResetError:
        return True, got


def test_headers_that_never_finish_are_closed_at_the_deadline(server: tuple[str, int]) -> None:
    _, port = server
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\n")  # and never the end
        started = time.monotonic()
        closed, _ = _closed_within(sock, DEADLINE_S + 9)
    assert closed and time.monotonic() - started < DEADLINE_S + 5


def test_a_body_that_never_finishes_is_a_408_at_the_deadline(server: tuple[str, int]) -> None:
    _, port = server
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(
            b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\n"
            b'Content-Length: 200\r\n\r\n{"jsonrpc"'
        )
        started = time.monotonic()
        _, answer = _closed_within(sock, DEADLINE_S + 9)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"body-timeout" in answer and time.monotonic() - started < DEADLINE_S + 5


def test_half_sent_requests_past_the_file_limit_do_not_starve_healthz(tmp_path: Path) -> None:
    """320 connections that never finish their headers, against a 300-file limit: they
    are cut at the deadline, and /healthz answers again."""
    process, url, log = start(tmp_path, fd_limit=300)
    port = int(url.rsplit(":", 1)[1])
    held: list[socket.socket] = []
    try:
        for _ in range(320):
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            except OSError:
                break
            held.append(sock)
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\n")
        time.sleep(DEADLINE_S + 4)  # every stalled connection is cut by now
        assert httpx.get(url + "/healthz", timeout=5).status_code == 200
    finally:
        for sock in held:
            sock.close()
        stop(process, log)


def test_get_opens_no_stream(server: tuple[str, int]) -> None:
    url, _ = server
    response = httpx.get(url + "/mcp", headers={"Accept": "text/event-stream"}, timeout=5)
    assert response.status_code == 405 and response.headers["allow"] == "POST, DELETE"
    assert response.json()["type"] == "urn:nautilus:problem:method-not-allowed"


def test_an_idle_connection_is_kept_past_five_seconds(server: tuple[str, int]) -> None:
    _, port = server
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", "/healthz")
        first = connection.getresponse()
        assert first.status == 200 and first.read()  # the whole answer: the socket is idle
        sock = connection.sock
        time.sleep(6)  # uvicorn's default keep-alive (5 s) would have closed it
        connection.request("GET", "/healthz")  # on the same socket, not a new one
        assert connection.sock is sock
        second = connection.getresponse()
        assert second.status == 200 and second.read()
    finally:
        connection.close()


def test_unknown_tool_names_add_no_metric_series(server: tuple[str, int]) -> None:
    url, _ = server

    async def call_unknown() -> None:
        http, client = connect(url, None)
        async with http, client:
            for i in range(30):
                result = await client.call_tool(f"nope-{i}", {})
                assert result.is_error

    asyncio.run(call_unknown())
    metrics = httpx.get(url + "/metrics", timeout=5).text
    assert "nope-" not in metrics
    assert 'route="mcp:other",status="404"' in metrics
