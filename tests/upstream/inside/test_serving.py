"""Under the broker's own HTTP and MCP serving: ``python -m nautilus_ranking.upstream
serve`` is ``nautilus serve`` with the ranking attached, on loopback."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from conftest import AGENT, CONTEXT, RUNBOOKS, TICKETS, static_source, write_config
from serving import KEY, serving

QUERY = "ops: orders-db disk full"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[int]:
    config = write_config(
        tmp_path, [static_source("runbooks", RUNBOOKS), static_source("tickets", TICKETS)]
    )
    document = yaml.safe_load(config.read_text())
    document["api"] = {"keys": [KEY]}
    config.write_text(yaml.safe_dump(document))
    settings = {"NAUTILUS_RANKING_TOP_K": "2", "NAUTILUS_DATA_DIR": str(tmp_path / "data")}
    with serving(config, settings, tmp_path / "serve.log") as (port, _):
        yield port


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
