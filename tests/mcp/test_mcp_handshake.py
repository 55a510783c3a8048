"""``nautilus-ranking mcp`` over stdio answers the handshake before the SDK is loaded, exactly as
the SDK would have answered it: driven by the real SDK client in both eras (the 2026
``server/discover`` and the ``initialize`` handshake), and by raw lines for what it
leaves to the SDK."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tools.servers import NAUTILUS

pytest.importorskip("mcp")
from cli_process import run_nautilus
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from plain_environment import plain_environment

from nautilus_ranking.mcp.stdio import early_answer


def environment(tmp: Path) -> dict[str, str]:
    base = plain_environment()
    return {**base, "NAUTILUS_DATA_DIR": str(tmp / "data"), "NAUTILUS_LOG_FORMAT": "json"}


def events(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_sdk_client_is_answered_early_and_as_the_sdk_would(tmp_path: Path, mode: str) -> None:
    params = StdioServerParameters(
        command=NAUTILUS, args=["mcp"], env=environment(tmp_path), cwd=tmp_path
    )
    log = tmp_path / "stderr.log"

    async def session() -> tuple[set[str], str]:
        with log.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), mode=mode) as client:
                tools = {t.name for t in (await client.list_tools()).tools}
                found = await client.call_tool(
                    "search", {"query": "orders-db disk full", "top_k": 2}
                )
                return tools, json.dumps(found.structured_content)

    tools, found = asyncio.run(session())
    assert tools == {"search", "list_sources"} and "INC-" in found
    seen = events(log)
    method = "server/discover" if mode == "auto" else "initialize"
    assert [e["method"] for e in seen if e["event"] == "mcp_handshake"] == [method]
    assert "mcp_handshake_differs" not in {e["event"] for e in seen}
    assert "mcp_ready" in {e["event"] for e in seen}


def test_a_handshake_it_does_not_know_is_left_to_the_sdk(tmp_path: Path) -> None:
    old = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "1999-01-01",
            "capabilities": {},
            "clientInfo": {"name": "old", "version": "1"},
        },
    }
    bare = {"jsonrpc": "2.0", "id": "d", "method": "server/discover", "params": {}}
    for message, check in (
        (old, lambda a: a["result"]["protocolVersion"] == "2025-11-25"),
        (bare, lambda a: "error" in a),
    ):
        server = subprocess.Popen(
            [NAUTILUS, "mcp"],
            env=environment(tmp_path),
            cwd=tmp_path,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(json.dumps(message) + "\n")
        server.stdin.flush()
        answer = json.loads(server.stdout.readline())  # the SDK's, once it is loaded
        rest, stderr = server.communicate(timeout=120)  # stdin closed: the server ends
        assert server.returncode == 0 and rest == "", stderr
        assert answer["id"] == message["id"] and check(answer), answer
        assert "mcp_handshake" not in stderr


def test_only_a_well_formed_handshake_is_answered_early() -> None:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    discover = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}
    assert early_answer(discover) is not None
    assert early_answer({**discover, "id": None} | {"method": "tools/list"}) is None
    no_id = {k: v for k, v in discover.items() if k != "id"}
    assert early_answer(no_id) is None  # a notification gets no answer
    unknown = {**meta, "io.modelcontextprotocol/protocolVersion": "2030-01-01"}
    assert early_answer({**discover, "params": {"_meta": unknown}}) is None
    partial = {k: v for k, v in meta.items() if not k.endswith("clientCapabilities")}
    assert early_answer({**discover, "params": {"_meta": partial}}) is None
    assert early_answer([discover]) is None and early_answer("x") is None


def test_requests_written_before_the_pipe_closes_are_all_answered(tmp_path: Path) -> None:
    """A client that writes its requests and closes stdin at once (while the SDK is still
    loading) gets the handshake early and every other answer, in order, before the exit."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta}},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {
                "_meta": meta,
                "name": "search",
                "arguments": {"query": "orders-db disk full", "top_k": 2},
            },
        },
    ]
    out = run_nautilus(
        "mcp",
        env=environment(tmp_path),
        cwd=tmp_path,
        input="".join(json.dumps(r) + "\n" for r in requests),
    )
    assert out.returncode == 0, out.stderr
    answers = [json.loads(line) for line in out.stdout.splitlines()]
    assert [a["id"] for a in answers] == [1, 2, 3]
    assert {t["name"] for t in answers[1]["result"]["tools"]} == {"search", "list_sources"}
    assert len(answers[2]["result"]["structuredContent"]["results"]) == 2
