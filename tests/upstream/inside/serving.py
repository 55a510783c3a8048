"""A real ``python -m nautilus_ranking.upstream serve`` on loopback (REST on a port,
MCP over HTTP on the next one), started and stopped by the tests."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx

KEY = "test-key-0123456789abcdef"


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


@contextlib.contextmanager
def serving(
    config: Path, env: Mapping[str, str], log: Path, log_level: str = "warning"
) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """The ranked broker serving ``config`` (REST and MCP), with ``env``'s ``NAUTILUS_*``
    variables; yields its REST port and the process."""
    port = free_port()
    environment = {k: v for k, v in os.environ.items() if not k.startswith("NAUTILUS_")}
    environment["NAUTILUS_EMBEDDER"] = "hashing"  # as the suite (tests/conftest.py)
    environment |= dict(env)
    with log.open("w") as out:
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
                log_level,
            ],
            cwd=config.parent,
            env=environment,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                if process.poll() is not None:
                    raise AssertionError(log.read_text())
                try:
                    ready = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                    if ready.status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise AssertionError("not ready in 60 s:\n" + log.read_text())
                time.sleep(0.2)
            yield port, process
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextlib.asynccontextmanager
async def mcp_session(port: int, key: str = KEY) -> AsyncIterator[Any]:
    """An initialised MCP session with the broker served on ``port`` (its MCP server is
    on the next port, ``/mcp``), sending ``key`` (the test key by default)."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async with (
        streamablehttp_client(f"http://127.0.0.1:{port + 1}/mcp", headers={"X-API-Key": key}) as (
            read,
            write,
            _,
        ),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session
