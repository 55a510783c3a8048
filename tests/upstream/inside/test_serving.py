"""Under the broker's own HTTP and MCP serving: ``python -m nautilus_ranking.upstream
serve`` is ``nautilus serve`` with the ranking attached, on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from conftest import AGENT, CONTEXT, RUNBOOKS, TICKETS, static_source, write_config

KEY = "test-key-0123456789abcdef"
QUERY = "ops: orders-db disk full"


def free_port() -> int:
    """A port with the next one free too (MCP listens on port + 1)."""
    for _ in range(50):
        with socket.socket() as one:
            one.bind(("127.0.0.1", 0))
            port = int(one.getsockname()[1])
        with socket.socket() as two:
            try:
                two.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no two adjacent free ports on loopback")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[int]:
    config = write_config(
        tmp_path, [static_source("runbooks", RUNBOOKS), static_source("tickets", TICKETS)]
    )
    document = yaml.safe_load(config.read_text())
    document["api"] = {"keys": [KEY]}
    config.write_text(yaml.safe_dump(document))
    with serving(tmp_path, config, {"NAUTILUS_RANKING_TOP_K": "2"}) as port:
        yield port


@contextlib.contextmanager
def serving(tmp_path: Path, config: Path, settings: dict[str, str]) -> Iterator[int]:
    """``python -m nautilus_ranking.upstream serve`` of ``config`` on loopback with these
    ``NAUTILUS_*`` settings (only), ready when entered (its port), stopped when left."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NAUTILUS_")}
    env |= {**settings, "NAUTILUS_DATA_DIR": str(tmp_path / "data")}
    log = (tmp_path / "serve.log").open("w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nautilus_ranking.upstream",
            "serve",
            "--config",
            str(config),
            "--transport",
            "both",
            "--mcp-mode",
            "http",
            "--bind",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
        ],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise AssertionError((tmp_path / "serve.log").read_text())
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("not ready in 60 s:\n" + (tmp_path / "serve.log").read_text())
            time.sleep(0.2)
        yield port
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def rows(data: dict[str, list[dict[str, Any]]]) -> list[str]:
    return [row["id"] for source in data.values() for row in source]


def test_the_brokers_http_api_answers_ranked(served: int) -> None:
    answer = httpx.post(
        f"http://127.0.0.1:{served}/v1/request",
        headers={"X-API-Key": KEY},
        json={"agent_id": AGENT, "intent": QUERY, "context": CONTEXT},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    data = answer.json()["data"]
    assert len(rows(data)) == 2 and rows(data)[0] == "INC-2"  # the top 2, best first
    assert next(iter(data)) == "tickets"


def test_the_brokers_mcp_server_answers_ranked(served: int) -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async def call() -> Any:
        url = f"http://127.0.0.1:{served + 1}/mcp"
        async with (
            streamablehttp_client(url, headers={"X-API-Key": KEY}) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await session.call_tool(
                "nautilus_request", {"agent_id": AGENT, "intent": QUERY, "context": CONTEXT}
            )

    result = asyncio.run(call())
    assert not result.isError, result
    body = result.structuredContent or json.loads(result.content[0].text)
    data = body.get("result", body)["data"]
    assert len(rows(data)) == 2 and rows(data)[0] == "INC-2"
