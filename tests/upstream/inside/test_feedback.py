"""With ``NAUTILUS_FEEDBACK`` on, the ``nautilus_feedback`` tool beside
``nautilus_request_ranked`` in a real served broker: it records use of a ranked answer's
cites to the feedback log, refuses a forged cite, an unknown action and a cite of
another agent's answer, and takes its ``agent_id`` through the broker's own caller
checks (a key bound to one agent cannot report as another), making no broker request."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import yaml
from conftest import AGENT, CONTEXT, RUNBOOKS, TICKETS, static_source, write_config
from serving import mcp_session, serving

from nautilus_ranking.upstream.ranked_feedback import ACTIONS, Action

OTHER = "agent-beta"
KEY_ALPHA = "alpha-key-0123456789abcdef"
KEY_BETA = "beta-key-0123456789abcdef0"


def config(folder: Path) -> Path:
    path = write_config(
        folder, [static_source("runbooks", RUNBOOKS), static_source("tickets", TICKETS)]
    )
    document = yaml.safe_load(path.read_text())
    document["agents"][OTHER] = {
        "id": OTHER,
        "clearance": "confidential",
        "allowed_purposes": ["support"],
    }
    document["api"] = {
        "keys": [
            {"key": KEY_ALPHA, "agent_id": AGENT},
            {"key": KEY_BETA, "agent_id": OTHER},
        ]
    }
    path.write_text(yaml.safe_dump(document))
    return path


def text_of(result: Any) -> str:
    return str(result.content[0].text)


def test_the_tools_schema_lists_every_action() -> None:
    assert set(Action.__args__) == set(ACTIONS)


def test_feedback_on_ranked_cites_goes_through_the_brokers_caller_checks(
    tmp_path: Path,
) -> None:
    path = config(tmp_path)
    env = {
        "NAUTILUS_RANKING_TOP_K": "3",
        "NAUTILUS_FEEDBACK": "true",
        "NAUTILUS_DATA_DIR": str(tmp_path / "data"),
    }
    ask = {"agent_id": AGENT, "intent": "ops: orders-db disk full", "context": CONTEXT}

    async def calls(port: int) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with mcp_session(port, KEY_ALPHA) as session:
            seen["tools"] = [t.name for t in (await session.list_tools()).tools]
            result = await session.call_tool("nautilus_request_ranked", ask)
            assert not result.isError, result
            answer = json.loads(text_of(result))
            seen["answer"] = answer
            cite = answer["rows"][0]["cite"]

            async def report(action: str, cites: list[str]) -> Any:
                arguments = {"agent_id": AGENT, "action": action, "cites": cites}
                return await session.call_tool("nautilus_feedback", arguments)

            seen["cited"] = await report("cited", [cite])
            seen["forged"] = await report(
                "used", [cite[:-2] + ("AA" if cite[-2:] != "AA" else "BB")]
            )
            seen["unknown"] = await report("liked", [cite])
            seen["none"] = await report("used", [])
        async with mcp_session(port, KEY_BETA) as session:
            as_beta = {"agent_id": OTHER, "action": "cited", "cites": [cite]}
            seen["not_yours"] = await session.call_tool("nautilus_feedback", as_beta)
            as_alpha = {"agent_id": AGENT, "action": "cited", "cites": [cite]}
            seen["impersonated"] = await session.call_tool("nautilus_feedback", as_alpha)
        return seen

    with serving(path, env, tmp_path / "serve.log") as (port, process):
        seen = asyncio.run(calls(port))
    # stopped by SIGTERM, it wrote what it had queued on its way out
    assert process.returncode == 0
    assert {"nautilus_request_ranked", "nautilus_feedback"} <= set(seen["tools"])
    cited = seen["cited"]
    assert not cited.isError, text_of(cited)
    recorded = json.loads(text_of(cited))
    assert recorded["action"] == "cited" and len(recorded["event_ids"]) == 1
    assert seen["forged"].isError and "cites.0" in text_of(seen["forged"])
    assert seen["unknown"].isError and "action" in text_of(seen["unknown"])
    assert seen["none"].isError and "cites" in text_of(seen["none"])
    assert seen["not_yours"].isError and "another caller" in text_of(seen["not_yours"])
    impersonated = text_of(seen["impersonated"])
    assert seen["impersonated"].isError and "bound to agent_id='agent-beta'" in impersonated

    events = [
        json.loads(line)
        for file in sorted((tmp_path / "data" / "feedback").glob("ubi_events-*.jsonl"))
        for line in file.read_text().splitlines()
    ]
    reported = [e for e in events if e["action_name"] != "impression"]
    assert [e["event_id"] for e in reported] == recorded["event_ids"]
    [event] = reported
    first = seen["answer"]["rows"][0]
    assert event["query_id"] == seen["answer"]["ranking_id"]
    assert event["event_attributes"]["object"] == {
        "object_id": first["row"]["id"],
        "object_id_field": first["source"],
    }
    assert event["event_attributes"]["position"] == {"ordinal": 1, "page": 1}
    # the checks made no broker request: the audit log holds the ranked request alone
    # (its entries, the request's and its attestation's, all name that request)
    audit = (tmp_path / "audit.jsonl").read_text().splitlines()
    assert audit and all(seen["answer"]["request_id"] in line for line in audit)
