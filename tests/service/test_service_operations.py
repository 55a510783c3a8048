"""What an operator sees of ``nautilus-ranking serve``: one request id per request on every log
line, no docs page that needs a CDN, a port already in use, ``--config``. Real servers
on loopback."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cli_process import run_nautilus
from fakes import sources_file
from plain_environment import plain_environment

from tools.servers import NAUTILUS, Server, free_port, running, wait_ready


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("serve-ops")
    with running(tmp, {"NAUTILUS_RANKING_TOP_K": "5"}) as srv:
        assert wait_ready(srv).status_code == 200, srv.logs()
        yield srv


def log_lines(server: Server) -> list[dict[str, object]]:
    return [json.loads(line) for line in server.logs().splitlines() if line.startswith("{")]


def test_every_line_of_a_request_carries_its_x_request_id(server: Server) -> None:
    response = httpx.post(
        server.url + "/v1/query",
        json={"query": "orders-db disk full", "explain": True},
        headers={"X-Request-ID": "one-id-7"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    deadline = time.monotonic() + 10  # the access line is written once the answer is sent
    while True:
        lines = [e for e in log_lines(server) if e.get("request_id") == "one-id-7"]
        events = [e["event"] for e in lines]
        if "http_request" in events or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert "request_served" in events and "http_request" in events
    served = next(e for e in lines if e["event"] == "request_served")
    # the broker's own id is kept under its own name, and it is the one the explain shows
    assert served["broker_request_id"] == response.json()["explain"]["broker_request_id"]
    assert not [
        e
        for e in log_lines(server)
        if e["event"] == "request_served" and e["request_id"] == served["broker_request_id"]
    ]


def test_no_docs_page_loads_scripts_from_a_cdn(server: Server) -> None:
    for path in ("/docs", "/redoc"):
        page = httpx.get(server.url + path, timeout=10)
        assert page.status_code == 404, (path, page.text[:200])
        assert "cdn" not in page.text.lower()
    schema = httpx.get(server.url + "/openapi.json", timeout=10)
    assert schema.status_code == 200 and "/v1/query" in schema.json()["paths"]


def _serve(
    tmp: Path,
    *args: str,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    base = plain_environment()
    base.pop("PROMETHEUS_MULTIPROC_DIR", None)
    return run_nautilus(
        "serve",
        *args,
        env={
            **base,
            "NAUTILUS_DATA_DIR": str(tmp / "data"),
            "NAUTILUS_LOG_FORMAT": "json",
            **(env or {}),
        },
        cwd=tmp,
        timeout=60,
    )


def test_a_port_in_use_is_one_clear_error_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _serve(tmp_path, "--port", str(port))
    assert result.returncode == 1, result.stderr
    assert (
        f"nautilus-ranking: cannot listen on 127.0.0.1:{port}: the port is already in use"
        in result.stderr
    )
    assert "--port or NAUTILUS_SERVE_PORT" in result.stderr
    assert "serve_ready" not in result.stderr and "serve_starting" not in result.stderr
    assert "Errno" not in result.stderr and "Traceback" not in result.stderr


def test_serve_takes_config_like_every_other_command(tmp_path: Path) -> None:
    seed = tmp_path / "faqs.jsonl"
    seed.write_text(
        json.dumps(
            {
                "id": "faq-1",
                "question": "how do I reset my password",
                "answer": "use the reset link",
            }
        )
        + "\n",
        encoding="utf-8",
    )
    config = tmp_path / "shop.yaml"
    config.write_text(
        f"sources:\n  - {{id: faqs, type: sqlite_fts, path: shop/faqs.db, "
        f"seed: {seed}, columns: [question, answer]}}\n",
        encoding="utf-8",
    )
    port = free_port()
    log = tmp_path / "serve.log"
    base = plain_environment()
    with log.open("w") as sink:
        process = subprocess.Popen(
            [NAUTILUS, "serve", "--config", str(config), "--port", str(port)],
            env={
                **base,
                "NAUTILUS_DATA_DIR": str(tmp_path / "data"),
                "NAUTILUS_LOG_FORMAT": "json",
            },
            cwd=tmp_path,
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
        )
    server = Server(f"http://127.0.0.1:{port}", process, log)
    try:
        assert wait_ready_or_exit(server).status_code == 200, server.logs()
        answer = httpx.post(
            server.url + "/v1/query", json={"query": "reset password"}, timeout=30
        ).json()
        assert answer["sources_queried"] == ["faqs"]
        assert answer["data"]["faqs"][0]["id"] == "faq-1"
    finally:
        assert server.stop() == 0, server.logs()


def wait_ready_or_exit(server: Server) -> httpx.Response:
    deadline = time.monotonic() + 60
    while True:
        assert server.process.poll() is None, server.logs()
        try:
            return wait_ready(server)
        except httpx.TransportError:
            assert time.monotonic() < deadline, server.logs()
            time.sleep(0.2)


def test_serve_refuses_a_sources_file_with_no_sources(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("sources: []\n", encoding="utf-8")
    result = _serve(tmp_path, "--config", str(empty), "--port", str(free_port()))
    assert result.returncode == 1
    assert "the sources file lists no sources" in result.stderr
    assert "serve_ready" not in result.stderr


# --- a source that raises what a source should not -------------------------------------


def raising_sources(tmp: Path, raises: str, where: str = "search") -> Path:
    """The demo's sources plus ``boom``, a registered type (tools/slow_serve.py) whose
    calls raise ``raises``."""
    path = sources_file(tmp)
    path.write_text(
        path.read_text()
        + f"  - {{id: boom, type: raising_test, raises: {raises}, where: {where}, timeout_s: 1}}\n"
    )
    return path


def probes_failed(server: Server) -> int:
    """How many probes of the raising source the server has logged as failed."""
    return server.logs().count('"source_probe_failed"')


def failing_sources(server: Server) -> dict[str, str]:
    response = httpx.get(server.url + "/readyz", timeout=10)
    failing: dict[str, str] = response.json().get("failing", {}) if response.is_error else {}
    return failing


@pytest.mark.parametrize(
    ("raises", "where"),
    [
        ("SystemExit", "search"),
        ("KeyboardInterrupt", "search"),
        ("CancelledError", "search"),
        ("SystemExit", "worker"),
        ("KeyboardInterrupt", "prepare"),
        ("BaseException", "search"),
        ("GeneratorExit", "search"),
        ("GeneratorExit", "worker"),
        ("GeneratorExit", "prepare"),
    ],
)
def test_a_source_that_raises_stops_neither_readiness_nor_the_server(
    tmp_path: Path, raises: str, where: str
) -> None:
    """Before: ``CancelledError`` from a source ended the readiness prober (503 for good,
    every source stale); ``SystemExit`` or ``KeyboardInterrupt`` shut the server down;
    ``GeneratorExit`` made every query a plain-text 500 and ended the prober ("not
    probed yet" for good)."""
    env = {
        "NAUTILUS_CONFIG": str(raising_sources(tmp_path, raises, where)),
        # Stale after three intervals (3 s): a busy machine's probe of a healthy source
        # still lands in time, so "failing" names only the raising source.
        "NAUTILUS_SERVE_PROBE_INTERVAL_S": "1",
    }
    with running(tmp_path, env, launcher=[]) as server:
        for _ in range(3):
            answer = httpx.post(server.url + "/v1/query", json={"query": "disk"}, timeout=30)
            assert answer.status_code == 200, answer.text
            errors = [(e["source_id"], e["error_type"]) for e in answer.json()["sources_errored"]]
            assert errors == [("boom", raises)]
        for _ in range(300):  # bounded: until every other source has answered a probe
            if list(failing_sources(server)) == ["boom"]:
                break
            time.sleep(0.1)
        assert failing_sources(server)["boom"].startswith(raises)
        probes = probes_failed(server)
        for _ in range(600):  # bounded: until two more probes have run, whatever the load
            if probes_failed(server) >= probes + 2:
                break
            time.sleep(0.1)
        assert probes_failed(server) >= probes + 2  # the prober still runs
        assert list(failing_sources(server)) == ["boom"]  # and the others stay ready
        assert httpx.get(server.url + "/healthz", timeout=10).status_code == 200
        assert server.process.poll() is None
        assert server.stop() == 0  # SIGTERM still stops it, cleanly
    assert '"serve_stopped"' in server.logs() or "serve_stopped" in server.logs()


def test_ctrl_c_still_stops_a_server_whose_source_raises_keyboard_interrupt(
    tmp_path: Path,
) -> None:
    env = {"NAUTILUS_CONFIG": str(raising_sources(tmp_path, "KeyboardInterrupt"))}
    with running(tmp_path, env, launcher=[]) as server:
        answer = httpx.post(server.url + "/v1/query", json={"query": "disk"}, timeout=30)
        assert answer.status_code == 200, answer.text
        server.process.send_signal(signal.SIGINT)
        assert server.process.wait(60) == 0
    assert "serve_stopped" in server.logs()


@pytest.mark.parametrize("raised", ["RuntimeError", "GeneratorExit", "BaseException"])
def test_whatever_escapes_a_query_is_a_problem_500(tmp_path: Path, raised: str) -> None:
    """The last line of defence answers problem+json whatever the query raised; before,
    a ``GeneratorExit`` (not an ``Exception``) reached the server as a plain-text 500."""
    env = {"NAUTILUS_CONFIG": str(sources_file(tmp_path))}
    launcher = ["--explode-on", "boom", "--explode-with", raised]
    with running(tmp_path, env, launcher=launcher) as server:
        answer = httpx.post(server.url + "/v1/query", json={"query": "boom"}, timeout=30)
        assert answer.status_code == 500, answer.text
        assert answer.headers["content-type"] == "application/problem+json"
        assert answer.json()["request_id"] == answer.headers["x-request-id"]
        assert "internal detail" not in answer.text and raised not in answer.text
        after = httpx.post(server.url + "/v1/query", json={"query": "disk"}, timeout=30)
        assert after.status_code == 200, after.text
