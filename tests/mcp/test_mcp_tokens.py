"""What the MCP tool definitions cost every agent that connects: ``tools/list`` on the demo,
as compact JSON, in ``o200k_base`` tokens (the ``tokens`` extra counts them exactly), and
an argument typed as what it accepts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
pytest.importorskip("toktok")

from cli_process import run_nautilus
from plain_environment import plain_environment

from nautilus_ranking.selection.tokens import count_tokens

#: tools/list on the demo measured 1,511 tokens before its descriptions were written for
#: the agent; the bound is half of that.
BOUND = 1_511 // 2
#: Room kept under the bound for one more short argument of search (a ranking profile's
#: name, say: its name, an enum of a few profile names and a line of description).
ROOM_FOR_ONE_MORE_ARGUMENT = 40


def tools_list(tmp: Path) -> dict[str, Any]:
    """The result of ``tools/list`` from ``nautilus-ranking mcp`` over stdio on the demo."""
    env = plain_environment()
    env["NAUTILUS_DATA_DIR"] = str(tmp / "data")
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "count", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    done = run_nautilus(
        "mcp", env=env, cwd=tmp, input="".join(json.dumps(m) + "\n" for m in messages)
    )
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    [listed] = [a["result"] for a in answers if a.get("id") == 2]
    result: dict[str, Any] = listed
    return result


def test_tools_list_costs_at_most_half_of_what_it_did(tmp_path: Path) -> None:
    listed = tools_list(tmp_path)
    tokens = count_tokens([json.dumps(listed, separators=(",", ":"))], exact=True)[0]
    assert tokens + ROOM_FOR_ONE_MORE_ARGUMENT <= BOUND, tokens
    search = next(t for t in listed["tools"] if t["name"] == "search")
    properties = search["inputSchema"]["properties"]
    # typed as what each accepts: a threshold or weight is a number, or a word ("on")
    assert properties["near_duplicates"]["type"] == ["number", "string"]
    assert properties["diversity"]["type"] == ["number", "string"]
    # an argument whose value the agent copies from an answer says where it comes from
    assert "passage handle" in properties["whole"]["description"]
    # written for the agent: nothing it cannot act on
    text = json.dumps(listed)
    for phrase in ("shared collections", "recommendation", "NAUTILUS_"):
        assert phrase not in text, phrase


def test_the_openapi_schema_and_help_keep_their_own_descriptions() -> None:
    """The agent's descriptions are MCP's only: POST /v1/query's schema and --help still
    say what an operator reads (the variable each field replaces)."""
    from nautilus_ranking.request.model import QueryRequest

    described = QueryRequest.model_json_schema()["properties"]
    assert "NAUTILUS_RANKING_NEAR_DUPLICATES" in described["near_duplicates"]["description"]
    assert "NAUTILUS_RANKING_CUT" in described["cut"]["description"]
