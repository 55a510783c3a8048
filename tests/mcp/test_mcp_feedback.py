"""The MCP ``feedback`` tool (listed only with feedback on): cites from a search and an
action; a forged cite is a tool error naming it; the description does not urge use."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
from fakes import sources_file
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_support import environment

from tools.servers import NAUTILUS


async def _session(tmp: Path) -> dict[str, Any]:
    env = environment(tmp, NAUTILUS_FEEDBACK="true")
    params = StdioServerParameters(command=NAUTILUS, args=["mcp"], env=env, cwd=tmp)
    with (tmp / "mcp.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            search = await client.call_tool("search", {"query": "disk full"})
            cites = [r["cite"] for r in search.structured_content["results"]]
            used = await client.call_tool("feedback", {"action": "cited", "cites": cites[:1]})
            forged = await client.call_tool(
                "feedback", {"action": "used", "cites": [cites[0][:-2] + "xx"]}
            )
            unknown = await client.call_tool("feedback", {"action": "liked", "cites": cites})
    return {"tools": tools, "used": used, "forged": forged, "unknown": unknown}


def test_the_feedback_tool_takes_cites_and_an_action(tmp_path: Path) -> None:
    sources_file(tmp_path)
    out = asyncio.run(_session(tmp_path))
    description = out["tools"]["feedback"].description.lower()
    assert not any(word in description for word in ("should", "must", "always", "please"))
    used = out["used"]
    assert not used.is_error and len(used.structured_content["event_ids"]) == 1
    assert out["forged"].is_error
    assert out["forged"].structured_content["error"]["field"] == "cites.0"
    assert out["unknown"].is_error
    assert out["unknown"].structured_content["error"]["field"] == "action"
