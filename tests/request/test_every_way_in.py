"""One request model, one core: every way in takes the same fields and gives the same rows.

The request runs through the real command (a subprocess), a real ``nautilus-ranking serve`` and a
real ``nautilus-ranking mcp`` (stdio, the SDK's client) on loopback, and the LangChain retriever
over an in-process broker."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from nautilus_ranking.broker import Broker
from nautilus_ranking.cli import add_request_flags
from nautilus_ranking.mcp.definitions import search_schema
from nautilus_ranking.request.model import QueryRequest, arg_of
from nautilus_ranking.settings.model import NautilusSettings
from tools.servers import NAUTILUS, running

pytest.importorskip("mcp")
from cli_process import run_nautilus
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from plain_environment import plain_environment

from nautilus_ranking.retrievers import langchain

QUERY = "orders-db disk full"
SETTINGS = {"NAUTILUS_RANKING_TOP_K": "6", "NAUTILUS_RANKING_IDF": "true"}
#: One request with every override that changes the rows.
REQUEST: dict[str, Any] = {
    "query": QUERY,
    "top_k": 5,
    "boosts": {"runbooks": "high"},
    "sources": ["tickets", "runbooks", "graph"],
    "idf": True,
}
FLAGS = [
    "--top-k",
    "5",
    "--boost",
    "runbooks:high",
    "--source",
    "tickets",
    "--source",
    "runbooks",
    "--source",
    "graph",
    "--idf",
]
Row = tuple[str, Any, float]


def test_every_request_field_is_a_flag_and_in_the_mcp_schema() -> None:
    fields = list(QueryRequest.model_fields)
    schema = search_schema(["a", "b"], 1000)
    assert list(schema["properties"]) == fields
    parser = argparse.ArgumentParser()
    add_request_flags(parser)
    dests = {action.dest for action in parser._actions} - {"help"}
    assert dests == {"text", *fields[1:]}
    flags = {o for action in parser._actions for o in action.option_strings} - {"-h", "--help"}
    assert flags == {arg_of(name).flag for name in fields[1:]}
    # typed, every one; MCP's descriptions are its own, written for the agent
    # (tests/mcp/test_mcp_tokens.py), while the OpenAPI schema and --help keep the model's
    assert all("type" in spec for spec in schema["properties"].values())


def test_the_same_request_gives_the_same_rows_every_way_in(tmp_path: Path) -> None:
    env = plain_environment()
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.update(SETTINGS, NAUTILUS_DATA_DIR=str(tmp_path / "data"))

    out = run_nautilus("query", QUERY, "--json", *FLAGS, env=env, check=True)
    by_cli = [(r["source_id"], r["id"], r["score"]) for r in json.loads(out.stdout)["ranking"]]
    assert len(by_cli) == 5 and {s for s, _, _ in by_cli} <= set(REQUEST["sources"])

    with running(tmp_path, SETTINGS) as server:
        body = httpx.post(server.url + "/v1/query", json=REQUEST, timeout=30).json()
    by_http = [(r["source_id"], r["id"], r["score"]) for r in body["ranking"]]

    async def over_mcp() -> list[Row]:
        params = StdioServerParameters(command=NAUTILUS, args=["mcp"], env=env, cwd=tmp_path)
        with (tmp_path / "mcp.log").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                result = await client.call_tool("search", REQUEST)
        assert not result.is_error, result.content
        return [(r["source"], r["id"], r["score"]) for r in result.structured_content["results"]]

    by_mcp = asyncio.run(over_mcp())

    with pytest.MonkeyPatch.context() as patch:
        for name, value in SETTINGS.items():
            patch.setenv(name, value)
        with Broker.from_config(None, NautilusSettings()) as broker:
            retriever = langchain.NautilusRetriever(
                broker=broker, **{k: v for k, v in REQUEST.items() if k != "query"}
            )
            documents = retriever.invoke(QUERY)
    by_retriever = [
        (d.metadata["source"], d.metadata["id"], d.metadata["score"]) for d in documents
    ]

    assert by_http == by_cli
    assert by_mcp == by_cli
    assert by_retriever == by_cli
