"""`nautilus-ranking mcp` driven by the real MCP SDK client: over stdio (the command started as
a subprocess, as a desktop agent starts it) and over streamable HTTP on loopback."""

from __future__ import annotations

import asyncio
import json
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

from tools.servers import NAUTILUS, free_port

pytest.importorskip("mcp")
from cli_process import run_nautilus
from fakes import sources_file
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_support import SOURCES, connect, environment
from mcp_types import CallToolResult

from nautilus_ranking.request.model import QueryRequest

QUERY = "orders-db disk full"
KEY = "k-mcp-7d41"


_CLI: dict[tuple[str, ...], list[tuple[str, Any, float]]] = {}


def cli_ranking(env: dict[str, str], *args: str) -> list[tuple[str, Any, float]]:
    """(source, id, score) of each row of ``nautilus-ranking query --json`` with the same env
    (asked once a module: both transports' servers have the same sources and settings)."""
    if args not in _CLI:
        out = run_nautilus("query", QUERY, "--json", *args, env=env, check=True)
        _CLI[args] = [
            (r["source_id"], r["id"], r["score"]) for r in json.loads(out.stdout)["ranking"]
        ]
    return _CLI[args]


def rows(result: CallToolResult) -> list[tuple[str, Any, float]]:
    assert not result.is_error, result.content
    return [(r["source"], r["id"], r["score"]) for r in result.structured_content["results"]]


def text(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def check_tools(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {"search", "list_sources"}
    schema = tools["search"].input_schema
    assert list(schema["properties"]) == list(QueryRequest.model_fields)  # POST /v1/query's
    assert schema["required"] == ["query"] and schema["additionalProperties"] is False
    assert schema["properties"]["boosts"]["additionalProperties"]["enum"] == [
        "-high",
        "-medium",
        "-low",
        "low",
        "medium",
        "high",
    ]
    assert schema["properties"]["sources"]["items"]["enum"] == SOURCES
    assert schema["properties"]["query"]["maxLength"] == 1000
    description = tools["search"].description or ""
    assert "low < medium < high" in description and "next_cursor" in description


async def check_search(client: Client, env: dict[str, str]) -> None:
    """Boosts and top_k change the ranking exactly as they do on the command line."""
    boosted = await client.call_tool(
        "search", {"query": QUERY, "top_k": 4, "boosts": {"graph": "high"}}
    )
    assert rows(boosted) == cli_ranking(env, "--top-k", "4", "--boost", "graph:high")
    plain = await client.call_tool("search", {"query": QUERY, "top_k": 4})
    assert rows(plain) == cli_ranking(env, "--top-k", "4")
    assert len(rows(boosted)) == 4 and rows(plain)[0][0] != "graph"
    plain_scores = {(r["source"], r["id"]): r["score"] for r in plain.structured_content["results"]}
    lifted = [
        (r["score"], plain_scores[(r["source"], r["id"])])
        for r in boosted.structured_content["results"]
        if r["source"] == "graph" and (r["source"], r["id"]) in plain_scores
    ]
    assert lifted and all(b > p for b, p in lifted)  # the boost lifts the graph's rows,
    # graph:high lets the graph's rows pass rows of similar relevance, never the top
    # ticket, which leads them clearly: it stays in the top 4
    assert rows(plain)[0][:2] in [r[:2] for r in rows(boosted)]
    # runbooks:high lifts the runbooks from below the top 4 into it (README's example)
    placed = await client.call_tool(
        "search", {"query": QUERY, "top_k": 4, "explain": True, "boosts": {"runbooks": "high"}}
    )
    places = [(r["rank"], r["why"]["unboosted_rank"]) for r in placed.structured_content["results"]]
    assert all(without >= 1 for _, without in places)  # each row's place without the boost
    assert any(rank != without for rank, without in places)  # and what the boost changed
    explained = await client.call_tool(
        "search",
        {
            "query": QUERY,
            "top_k": 2,
            "idf": True,
            "sources": ["graph", "runbooks"],
            "explain": True,
        },
    )
    settings = explained.structured_content["explain"]
    assert (settings["top_k"], settings["idf"], settings["sources"]) == (
        2,
        True,
        ["graph", "runbooks"],
    )
    assert {"content_rank", "stage1_key"} <= set(explained.structured_content["results"][0]["why"])
    vectors = await client.call_tool(
        "search", {"query": QUERY, "top_k": 2, "sources": ["postmortems"]}
    )
    assert [r[0] for r in rows(vectors)] == ["postmortems", "postmortems"]
    assert all(
        "embedding" not in r["row"] and r["row"]["id"]
        for r in vectors.structured_content["results"]
    )  # no 1,024 floats to read
    kept = await client.call_tool(
        "search", {"query": QUERY, "top_k": 1, "vectors": True, "sources": ["postmortems"]}
    )
    assert len(kept.structured_content["results"][0]["row"]["embedding"]) == 1024
    first = boosted.structured_content["results"][0]
    assert set(first["why"]) >= {"relevance", "similarity", "boost_bump", "also_from"}
    assert f"1. [{first['source']}] score {first['score']:.4f}" in text(boosted)


async def check_bad_boost(client: Client) -> None:
    result = await client.call_tool("search", {"query": QUERY, "boosts": {"graph": "hgih"}})
    assert result.is_error
    error = result.structured_content["error"]
    assert (error["status"], error["field"], error["value"], error["valid"]) == (
        422,
        "boosts",
        "graph:hgih",
        "-high, -medium, -low, low, medium, high",
    )
    assert "boosts: 'graph:hgih'" in text(result)
    assert "-high, -medium, -low, low, medium, high" in text(result)
    assert "Traceback" not in text(result)
    unknown = await client.call_tool("search", {"query": QUERY, "boosts": {"grpah": "high"}})
    assert unknown.is_error and unknown.structured_content["error"]["valid"] == ", ".join(SOURCES)
    extra = await client.call_tool("search", {"query": QUERY, "topk": 3})
    assert extra.is_error and extra.structured_content["error"]["field"] == "topk"


async def check_source_down(client: Client, seed: Path) -> None:
    """With one source failing, search still answers from the others and says which
    failed; list_sources reports it down once a probe has seen it."""
    seed.unlink()
    result = await client.call_tool("search", {"query": QUERY, "top_k": 3})
    assert not result.is_error
    [error] = result.structured_content["sources_errored"]
    assert error["source_id"] == "broken" and error["error_type"] == "SeedError"
    assert len(result.structured_content["results"]) == 3
    assert "broken" not in {r[0] for r in rows(result)}
    assert "source broken failed (SeedError)" in text(result)
    deadline = time.monotonic() + 20
    while True:
        listing = (await client.call_tool("list_sources", {})).structured_content["sources"]
        health = {s["id"]: s["healthy"] for s in listing}
        if not health["broken"] or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    assert health == {
        "tickets": True,
        "graph": True,
        "runbooks": True,
        "postmortems": True,
        "broken": False,
    }
    by_id = {s["id"]: s for s in listing}
    assert by_id["runbooks"]["declares_order"] is True and by_id["runbooks"]["type"] == "sqlite_fts"


async def check_pages(client: Client) -> None:
    """Three pages by cursor are the unpaged top 9; a cursor for other settings is refused."""
    whole = rows(await client.call_tool("search", {"query": QUERY, "top_k": 9}))
    seen: list[tuple[str, Any, float]] = []
    arguments: dict[str, Any] = {"query": QUERY, "top_k": 3, "page": 1}
    cursor = None
    for _ in range(3):
        page = await client.call_tool("search", arguments)
        seen += rows(page)
        cursor = page.structured_content["page"]["next_cursor"]
        arguments = {"query": QUERY, "top_k": 3, "cursor": cursor}
    assert seen == whole and len(whole) == 9
    other = await client.call_tool("search", {"query": QUERY, "top_k": 4, "cursor": cursor})
    assert other.is_error and other.structured_content["error"]["field"] == "cursor"
    assert "made for pages of 3 rows, not 4" in text(other)
    other = await client.call_tool("search", {"query": "another", "cursor": cursor})
    assert other.is_error and other.structured_content["error"]["field"] == "cursor"
    assert "another query or other settings" in text(other)


@pytest.fixture
def stdio_setup(tmp_path: Path) -> tuple[StdioServerParameters, dict[str, str]]:
    sources_file(tmp_path)
    env = environment(tmp_path)
    return StdioServerParameters(command=NAUTILUS, args=["mcp"], env=env, cwd=tmp_path), env


def test_stdio_tools_search_boosts_errors_pages_and_a_source_down(
    stdio_setup: tuple[StdioServerParameters, dict[str, str]], tmp_path: Path
) -> None:
    params, env = stdio_setup

    async def session() -> None:
        with (tmp_path / "stderr.log").open("w") as errlog:  # the server's stderr: its logs
            async with Client(stdio_client(params, errlog=errlog)) as client:
                await check_tools(client)
                await check_search(client, env)
                await check_bad_boost(client)
                await check_pages(client)
                await check_source_down(client, tmp_path / "broken.jsonl")

    asyncio.run(session())
    events = [
        json.loads(line)["event"]
        for line in (tmp_path / "stderr.log").read_text().splitlines()
        if line.startswith("{")
    ]
    assert "mcp_ready" in events and "mcp_tool_call" in events and "source_failed" in events


# --- streamable HTTP ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def http_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, dict[str, str], Path]]:
    """One server for the module; its ``broken`` source fails once a test removes the
    seed (the key test does not care)."""
    tmp_path = tmp_path_factory.mktemp("mcp-http")
    sources_file(tmp_path)
    (tmp_path / "keys").write_text(f"# agents\n{KEY}\n")
    (tmp_path / "keys").chmod(0o600)  # a secret: owner-only
    env = environment(tmp_path, NAUTILUS_SERVE_API_KEYS_FILE=str(tmp_path / "keys"))
    port = free_port()
    log = tmp_path / "mcp-http.log"
    with log.open("w") as sink:
        process = subprocess.Popen(
            [NAUTILUS, "mcp", "--transport", "http", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            cwd=tmp_path,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, log.read_text()
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield url, env, log
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, log.read_text()


def test_http_tools_search_boosts_errors_pages_and_a_source_down(
    http_server: tuple[str, dict[str, str], Path],
) -> None:
    url, env, log = http_server

    async def session() -> None:
        http, client = connect(url, KEY)
        async with http, client:
            await check_tools(client)
            await check_search(client, env)
            await check_bad_boost(client)
            await check_pages(client)
            await check_source_down(client, log.parent / "broken.jsonl")

    asyncio.run(session())
    metrics = httpx.get(url + "/metrics").text
    assert 'nautilus_source_topk_share{source="runbooks"}' in metrics
    assert 'nautilus_source_errors_total{error_type="SeedError",source="broken"}' in metrics
    assert 'route="mcp:search",status="422"' in metrics
    assert 'route="mcp:search",status="200"' in metrics
    assert '"event": "mcp_tool_call"' in log.read_text()


def test_http_a_wrong_or_missing_api_key_is_refused(
    http_server: tuple[str, dict[str, str], Path],
) -> None:
    url, _, log = http_server

    async def attempt(key: str | None) -> BaseException | None:
        http, client = connect(url, key)
        try:
            async with http, client:
                await client.list_tools()
        except BaseException as exc:  # the SDK raises an (exception group of) MCPError
            return exc
        return None

    for key in ("k-wrong", None):
        error = asyncio.run(attempt(key))
        assert error is not None, f"key {key!r} was accepted"
    raw = httpx.post(
        url + "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Authorization": "Bearer k-wrong"},
    )
    assert raw.status_code == 401 and raw.headers["content-type"] == "application/problem+json"
    assert raw.json()["type"] == "urn:nautilus:problem:unauthorized"
    assert '"status": 401' in log.read_text() and KEY not in log.read_text()
    assert httpx.get(url + "/healthz").status_code == 200  # probes need no key
    traced = httpx.post(url + "/mcp", json={}, headers={"X-Request-ID": "trace-7.b"})
    assert traced.status_code == 401 and traced.headers["x-request-id"] == "trace-7.b"
    assert traced.json()["request_id"] == "trace-7.b"


def test_mcp_without_the_extra_or_with_bad_flags_says_so(tmp_path: Path) -> None:
    env = environment(tmp_path)
    flags = run_nautilus("mcp", "--port", "9000", env=env, timeout=60)
    assert flags.returncode == 2 and "--transport http" in flags.stderr
    level = run_nautilus("mcp", "--transport", "sse", env=env, timeout=60)
    assert level.returncode == 2 and "'stdio', 'http'" in level.stderr
    missing = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.modules['mcp'] = None; "
            "from nautilus_ranking.cli import main; sys.exit(main(['mcp']))",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 1
    assert "pip install 'nautilus-ranking[mcp]'" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_mcp_refuses_what_serve_refuses(tmp_path: Path) -> None:
    """No sources to search, or a port already taken: one clear line, exit 1, as serve."""
    env = environment(tmp_path)
    empty = tmp_path / "empty.yaml"
    empty.write_text("sources: []\n", encoding="utf-8")
    none = run_nautilus("mcp", "--config", str(empty), env=env, input="", timeout=60)
    assert none.returncode == 1 and "lists no sources" in none.stderr
    assert "Traceback" not in none.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        demo = {k: v for k, v in env.items() if k != "NAUTILUS_CONFIG"}  # the bundled demo
        busy = run_nautilus("mcp", "--transport", "http", "--port", str(port), env=demo)
    assert busy.returncode == 1 and f"cannot listen on 127.0.0.1:{port}" in busy.stderr
    assert "mcp_starting" not in busy.stderr


# --- a row JSON does not know --------------------------------------------------------------


def test_a_row_json_does_not_know_is_answered_as_http_answers_it(tmp_path: Path) -> None:
    """A row holding bytes that are not UTF-8, and one holding an arbitrary object: before,
    MCP ``search`` failed whole (its SDK could not serialise them) where ``POST
    /v1/query`` answered every row. Now each way in gives the same rows, written alike."""
    from tools.servers import SLOW_SERVE, running

    sources_file(tmp_path)
    env = environment(tmp_path, NAUTILUS_RANKING_TOP_K="")  # passthrough unless asked
    launcher = ["--odd-rows", "runbooks"]
    for arguments in ({"query": QUERY}, {"query": QUERY, "top_k": 40, "explain": True}):
        with running(tmp_path, env, launcher=launcher) as server:
            http = httpx.post(server.url + "/v1/query", json=arguments, timeout=30)
        assert http.status_code == 200, http.text
        body = http.json()
        expected = [(e["source_id"], e["id"]) for e in body["ranking"]]
        assert {("runbooks", "odd-bytes"), ("runbooks", "odd-object")} <= set(expected)
        http_rows = {row["id"]: row for rows in body["data"].values() for row in rows}

        params = StdioServerParameters(
            command=sys.executable, args=[SLOW_SERVE, *launcher, "--", "mcp"], env=env, cwd=tmp_path
        )

        async def search(params: StdioServerParameters, arguments: Any) -> CallToolResult:
            with (tmp_path / "stderr.log").open("w") as errlog:
                async with Client(stdio_client(params, errlog=errlog)) as client:
                    return await client.call_tool("search", arguments)

        result = asyncio.run(search(params, arguments))
        assert not result.is_error, text(result)
        results = result.structured_content["results"]
        assert [(r["source"], r["id"]) for r in results] == expected
        for r in results:
            assert r["row"] == http_rows[r["id"]]
        odd = {r["id"]: r["row"] for r in results if r["id"].startswith("odd-")}
        assert odd["odd-bytes"]["blob"] == str(b"\xff\xfe\x00")
        assert odd["odd-object"]["thing"] == "<an opaque object>"
        assert "odd-bytes — disk bytes | b'\\xff\\xfe\\x00'" in text(result)
