"""Every way in carries the ranked answer's hash beside ``response_hash``, the same
for the same request: the real command (a subprocess), a real ``nautilus-ranking serve``
and ``nautilus-ranking mcp`` (stdio, the SDK's client) on loopback, and the LangChain
retriever in-process and over HTTP; a passthrough answer carries none."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from nautilus_ranking.broker import Broker
from nautilus_ranking.ranking_hash import ranking_hash_of_json
from nautilus_ranking.settings.model import NautilusSettings
from tools.servers import NAUTILUS, running

pytest.importorskip("mcp")
pytest.importorskip("langchain_core")
from cli_process import run_nautilus
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from plain_environment import plain_environment

from nautilus_ranking.retrievers import langchain

QUERY = "orders-db disk full"
AS_OF = "2025-01-01"
SETTINGS = {"NAUTILUS_RANKING_TOP_K": "5"}


def _cli(env: dict[str, str], *flags: str) -> dict[str, Any]:
    out = run_nautilus("query", QUERY, "--json", *flags, env=env, check=True)
    answer: dict[str, Any] = json.loads(out.stdout)
    return answer


def test_every_way_in_carries_the_same_ranking_hash(tmp_path: Path) -> None:
    env = plain_environment()
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.update(NAUTILUS_DATA_DIR=str(tmp_path / "data"))
    passthrough = _cli(env)
    assert passthrough["ranking_enabled"] is False and "ranking_hash" not in passthrough
    env.update(SETTINGS)
    by_cli = _cli(env, "--as-of", AS_OF)
    hashed = by_cli["ranking_hash"]
    assert hashed.startswith("sha256:") and hashed != by_cli["response_hash"]
    assert ranking_hash_of_json(by_cli, as_of=AS_OF) == hashed
    assert _cli(env)["ranking_hash"] != hashed  # as_of is part of it

    body = {"query": QUERY, "as_of": AS_OF}
    with running(tmp_path, SETTINGS) as server:
        by_http = httpx.post(server.url + "/v1/query", json=body, timeout=30).json()
        remote = langchain.NautilusRetriever(url=server.url, as_of=AS_OF).invoke(QUERY)
    assert by_http["ranking_hash"] == hashed
    assert by_http["response_hash"] == by_cli["response_hash"]
    assert {d.metadata["ranking_hash"] for d in remote} == {hashed}

    async def over_mcp() -> dict[str, Any]:
        params = StdioServerParameters(command=NAUTILUS, args=["mcp"], env=env, cwd=tmp_path)
        with (tmp_path / "mcp.log").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                result = await client.call_tool("search", body)
        assert not result.is_error, result.content
        content: dict[str, Any] = result.structured_content
        return content

    assert asyncio.run(over_mcp())["ranking_hash"] == hashed

    with pytest.MonkeyPatch.context() as patch:
        for name, value in SETTINGS.items():
            patch.setenv(name, value)
        with Broker.from_config(None, NautilusSettings()) as broker:
            local = langchain.NautilusRetriever(broker=broker, as_of=AS_OF).invoke(QUERY)
    assert {d.metadata["ranking_hash"] for d in local} == {hashed}


def test_a_passthrough_retriever_hit_carries_no_ranking_hash() -> None:
    with Broker.from_config(None, NautilusSettings()) as broker:
        documents = langchain.NautilusRetriever(broker=broker).invoke(QUERY)
    assert documents and all("ranking_hash" not in d.metadata for d in documents)
