"""``whole`` over the real MCP server (streamable HTTP, API keys and ranking profiles):
a handle goes through the same path as any search. The key's profile decides what is
ranked, so a handle gets nothing from a search whose own ranking does not hold its row,
naming a profile the key may not use is refused whatever else the call carries, and a
value that is not a handle is a tool error naming ``whole``.

An MCP budget counts a result's line (its row cut to 200 characters), so a long row
fits a budget of a few hundred tokens as a line and is handed over whole: the handle
here comes from the JSON way in (``query --json``), which counts the row itself and
hands the long row over in part. A handle names a row, not an answer, so it is the same
handle over MCP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from long_rows import LONG, QUERY, service_environment

from tools.servers import Server, running

pytest.importorskip("mcp")
from cli_process import run_nautilus
from mcp import Client
from mcp_support import connect
from mcp_types import CallToolResult

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    """The MCP server over HTTP, and the long row's handle from ``query --json``."""
    tmp = tmp_path_factory.mktemp("mcp-passages")
    env = service_environment(tmp)
    cli_env = {k: v for k, v in env.items() if k != "NAUTILUS_SERVE_API_KEYS_FILE"}
    cli_env["NAUTILUS_DATA_DIR"] = str(tmp / "cli-data")
    out = run_nautilus("query", QUERY, "--json", "--profile", "wide", env=cli_env, check=True)
    [entry] = [e for e in json.loads(out.stdout)["ranking"] if e["id"] == "long"]
    handle: str = entry["passage"]["handle"]
    with running(tmp, env, subcommand=("mcp", "--transport", "http")) as server:
        yield server, handle  # answering /healthz


def search(server: Server, key: str, **arguments: Any) -> CallToolResult:
    async def call() -> CallToolResult:
        http, client = connect(server.url, key)
        async with http, client:
            assert isinstance(client, Client)
            return await client.call_tool("search", {"query": QUERY, **arguments})

    return asyncio.run(call())


def rows_by_id(result: CallToolResult) -> dict[str, dict[str, Any]]:
    assert not result.is_error, result.content
    return {r["id"]: r["row"] for r in result.structured_content["results"]}


def test_whole_over_mcp_goes_through_the_keys_profile(served: tuple[Server, str]) -> None:
    server, handle = served
    plain = search(server, "k-wide")
    assert plain.structured_content["profile"] == "wide"
    assert plain.structured_content["budget"]["counted_as"] == "mcp_line"
    assert set(rows_by_id(plain)) == {"short", "long"}  # the long row is not left out
    # whole is no override: the wide profile, which allows none, takes it
    asked = search(server, "k-wide", whole=[handle])
    assert rows_by_id(asked)["long"]["body"] == LONG
    # the narrow profile ranks its top 1 only: the handle does not add the long row
    narrow = search(server, "k-narrow", whole=[handle])
    assert narrow.structured_content["profile"] == "narrow"
    assert list(rows_by_id(narrow)) == ["short"]
    refused = search(server, "k-narrow", profile="wide", whole=[handle])
    assert refused.is_error and refused.structured_content["error"]["field"] == "profile"
    bad = search(server, "k-wide", whole=["long"])
    assert bad.is_error and bad.structured_content["error"]["field"] == "whole.0"


@pytest.fixture(scope="module")
def served_with_the_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The MCP server ranking with the sentence model, which reads long rows as passages."""
    pytest.importorskip("onnxruntime")
    tmp = tmp_path_factory.mktemp("mcp-passages-model")
    # no embedding deadline: a busy machine must not leave the passages unscored
    env = {
        **service_environment(tmp),
        "NAUTILUS_EMBEDDER": "onnx",
        "NAUTILUS_EMBEDDER_DEADLINE_MS": "0",
    }
    with running(tmp, env, subcommand=("mcp", "--transport", "http")) as server:
        yield server


def test_a_long_rows_line_shows_the_passage_that_scored_it(served_with_the_model: Server) -> None:
    """The line an agent reads of a long row is the part that answers, marked as cut,
    not the filler the row starts with; the structured row stays whole."""
    plain = search(served_with_the_model, "k-wide")
    [text] = [c.text for c in plain.content if c.type == "text"]
    [line] = [x for x in text.splitlines() if "long —" in x]
    assert "failover script" in line, line
    assert "| …" in line  # marked as cut within its field
    assert rows_by_id(plain)["long"]["body"] == LONG
