"""Feedback on, every way in makes the answer citable — ``ranking_id``, and each row's
``position`` and ``cite`` — beside the rows, never in ``data`` or ``response_hash``;
feedback off, no way in carries any of it, logs anything or lists the feedback tool
or route. The real command, a real ``serve`` and ``mcp`` (stdio) on loopback, and the
LangChain retriever in-process and over HTTP."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from nautilus_ranking.broker import Broker
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
#: One cursor key for both runs: their next cursors are then the same bytes.
RANKED = {
    "NAUTILUS_RANKING_TOP_K": "4",
    "NAUTILUS_CURSOR_KEY": "feedback-every-way-in-cursor-key-0123456789abcdef",
}
ON = {**RANKED, "NAUTILUS_FEEDBACK": "true"}
#: What feedback adds, and what varies per request anyway.
CITABLE = ("ranking_id", "position", "cite")
VARYING = ("request_id", "duration_ms")


def _without(value: Any, keys: tuple[str, ...]) -> Any:
    if isinstance(value, dict):
        return {k: _without(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_without(v, keys) for v in value]
    return value


def _keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


def _environment(tmp: Path, settings: dict[str, str]) -> dict[str, str]:
    env = plain_environment()
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.update(NAUTILUS_DATA_DIR=str(tmp / "data"), **settings)
    return env


def _cli(env: dict[str, str], *flags: str) -> dict[str, Any]:
    out = run_nautilus("query", QUERY, "--json", *flags, env=env, check=True)
    answer: dict[str, Any] = json.loads(out.stdout)
    return answer


async def _mcp(tmp: Path, env: dict[str, str]) -> tuple[dict[str, Any], str, list[str]]:
    params = StdioServerParameters(command=NAUTILUS, args=["mcp"], env=env, cwd=tmp)
    with (tmp / "mcp.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            result = await client.call_tool("search", {"query": QUERY})
    assert not result.is_error, result.content
    text = result.content[0].text  # type: ignore[union-attr]
    return result.structured_content, text, tools


def _ways_in(tmp: Path, settings: dict[str, str]) -> dict[str, Any]:
    env = _environment(tmp, settings)
    out: dict[str, Any] = {"cli": _cli(env)}
    with running(tmp, settings) as server:
        out["http"] = httpx.post(server.url + "/v1/query", json={"query": QUERY}, timeout=30).json()
        out["paths"] = sorted(httpx.get(server.url + "/openapi.json").json()["paths"])
        out["remote"] = [
            d.metadata for d in langchain.NautilusRetriever(url=server.url).invoke(QUERY)
        ]
    out["mcp"], out["mcp_text"], out["tools"] = asyncio.run(_mcp(tmp, env))
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        with Broker.from_config(None, NautilusSettings()) as broker:
            local = langchain.NautilusRetriever(broker=broker).invoke(QUERY)
    out["local"] = [d.metadata for d in local]
    return out


def test_feedback_off_no_way_in_carries_a_cite_and_nothing_is_logged(tmp_path: Path) -> None:
    off = _ways_in(tmp_path, RANKED)
    for way in ("cli", "http", "mcp", "remote", "local"):
        assert not _keys(off[way]) & set(CITABLE), way
    assert "cite" not in off["mcp_text"]
    assert "/v1/feedback" not in off["paths"] and "feedback" not in off["tools"]
    assert not (tmp_path / "data" / "feedback").exists()


def test_feedback_on_every_way_in_is_citable_beside_the_same_rows(tmp_path: Path) -> None:
    off = _ways_in(tmp_path / "off", RANKED)
    on = _ways_in(tmp_path / "on", ON)
    for way in ("cli", "http", "mcp"):
        answer = on[way]
        rows = answer["ranking"] if way != "mcp" else answer["results"]
        assert len(rows) == 4
        assert [r["position"] for r in rows] == [1, 2, 3, 4], way
        assert all(r["cite"].startswith("c1.") for r in rows), way
        assert len({r["cite"] for r in rows}) == 4
        assert answer["ranking_id"] == answer["request_id"], way
        # outside data and its hash: the rest is the answer feedback off gives
        assert answer["response_hash"] == off[way]["response_hash"]
        assert _without(answer, CITABLE + VARYING) == _without(off[way], VARYING), way
    assert all(f"(cite: {r['cite']})" in on["mcp_text"] for r in on["mcp"]["results"])
    assert "/v1/feedback" in on["paths"] and "feedback" in on["tools"]
    for way in ("remote", "local"):
        assert [m.get("position") for m in on[way]] == [1, 2, 3, 4], (way, on[way][0])
        assert len({m["ranking_id"] for m in on[way]}) == 1
        assert _without(on[way], CITABLE) == off[way], way
    logged = sorted(p.name.split("-")[0] for p in (tmp_path / "on/data/feedback").iterdir())
    assert set(logged) == {"ubi_queries", "ubi_events"}
