"""Under a token budget inside the broker, a row too large for it is handed over as its
passage in the ranked route's ``rows`` and the ranked tool's answer, while the attested
``data`` keeps the row as its source returned it; ``whole: [handle]``, through the same
route or tool (the broker's auth, policy and audit), hands the row over whole."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from conftest import AGENT, CONTEXT, claims, static_source, write_config
from serving import KEY, mcp_session, serving

from nautilus_ranking import NautilusSettings
from nautilus_ranking.upstream import attach_ranking

BUDGET = 600
FILLER = (
    "The quarterly review covered hiring plans, office moves and the catering contract. "
    "Nobody raised anything about storage that week. "
)
#: A runbook of about 3,000 words whose answer sits in its middle.
LONG_BODY = (
    FILLER * 60
    + "When the orders-db disk is full, free space on the volume and rotate the WAL. "
    + FILLER * 60
)
LONG = {"id": "RB-LONG", "title": "orders-db disk full runbook", "body": LONG_BODY}
SHORT = [
    {"id": "RB-01", "title": "PostgreSQL disk almost full", "body": "free space on the volume"},
    {"id": "RB-02", "title": "Kafka consumer lag", "body": "scale the consumer group"},
    {"id": "INC-2", "title": "orders-db disk 91% full on primary", "body": "disk full alert"},
]
QUESTION = "ops: orders-db disk full"
SETTINGS = {"ranking_top_k": 4, "ranking_max_tokens": BUDGET}


def config(folder: Path) -> Path:
    path = write_config(folder, [static_source("runbooks", [LONG, *SHORT])])
    document = yaml.safe_load(path.read_text())
    document["api"] = {"keys": [KEY]}
    path.write_text(yaml.safe_dump(document))
    return path


def in_process(path: Path, **settings: Any) -> tuple[Any, Any]:
    from nautilus import Broker

    broker = Broker.from_config(path)
    try:
        attached = attach_ranking(broker, NautilusSettings(**settings))
        response = broker.request(AGENT, QUESTION, dict(CONTEXT))
    finally:
        broker.close()
    ranking = attached.ranking(response.request_id)
    assert ranking is not None and ranking.fallback is None
    return response, ranking


def the_long_entry(rows: list[dict[str, Any]]) -> dict[str, Any]:
    [entry] = [e for e in rows if e["row"]["id"] == "RB-LONG"]
    return entry


def test_the_ranking_hands_the_long_row_over_as_its_passage_data_keeps_it_whole(
    tmp_path: Path,
) -> None:
    from nautilus.core.attestation_payload import compute_response_hash

    response, ranking = in_process(config(tmp_path), **SETTINGS)
    [long] = [r for r in ranking.ranking if r.row["id"] == "RB-LONG"]
    passage = long.passage
    assert passage is not None and passage["handle"].startswith("row:")
    field, start, end = passage["field"], passage["start"], passage["end"]
    assert field == "body" and passage["length"] == len(LONG_BODY) > end - start
    assert long.row[field] == LONG_BODY[start:end]
    # the attested data: the rows as the source returned them, the long one whole
    assert LONG in response.data["runbooks"]
    assert (
        compute_response_hash(response.data) == claims(response.attestation_token)["response_hash"]
    )
    assert ranking.budget["tokens_used"] <= BUDGET and not ranking.budget["first_row_over_budget"]


def test_with_passages_off_the_long_row_is_not_cut(tmp_path: Path) -> None:
    _, ranking = in_process(config(tmp_path), **SETTINGS, ranking_budget_passages=False)
    assert all(r.passage is None or "handle" not in r.passage for r in ranking.ranking)
    assert all(r.row["id"] != "RB-LONG" or r.row == LONG for r in ranking.ranking)


def test_an_agents_profile_may_turn_passages_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NAUTILUS_PROFILES__WHOLE__AGENTS", AGENT)
    monkeypatch.setenv("NAUTILUS_PROFILES__WHOLE__RANKING_BUDGET_PASSAGES", "false")
    _, ranking = in_process(config(tmp_path), **SETTINGS)
    assert ranking.profile == "whole"
    assert all(r.passage is None or "handle" not in r.passage for r in ranking.ranking)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    path = config(tmp_path_factory.mktemp("passages"))
    env = {
        "NAUTILUS_RANKING_TOP_K": "4",
        "NAUTILUS_RANKING_MAX_TOKENS": str(BUDGET),
        "NAUTILUS_DATA_DIR": str(path.parent),
    }
    with serving(path, env, path.parent / "serve.log") as (port, _):
        yield port, path


def post(port: int, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        f"http://127.0.0.1:{port}/v1/request/ranked",
        headers={"X-API-Key": KEY},
        json=body,
        timeout=30,
    )


def ask(**extra: Any) -> dict[str, Any]:
    return {"agent_id": AGENT, "intent": QUESTION, "context": CONTEXT, **extra}


def test_the_ranked_route_hands_the_passage_and_the_rest_on_asking(
    served: tuple[int, Path],
) -> None:
    port, path = served
    first = post(port, ask())
    assert first.status_code == 200, first.text
    part = the_long_entry(first.json()["rows"])
    passage = part["passage"]
    assert part["row"]["body"] == LONG_BODY[passage["start"] : passage["end"]]
    assert passage["length"] == len(LONG_BODY)
    again = post(port, ask(whole=[passage["handle"]]))
    assert again.status_code == 200, again.text
    whole = the_long_entry(again.json()["rows"])
    assert whole["row"] == LONG and "passage" not in whole
    # both went through the broker: each is in its audit log under its own request id
    audit = (path.parent / "audit.jsonl").read_text()
    assert first.json()["request_id"] in audit and again.json()["request_id"] in audit
    too_long = post(port, ask(whole=["row:" + "x" * 100]))
    assert too_long.status_code == 422 and "whole" in too_long.text


def test_the_ranked_tool_hands_the_passage_and_the_rest_on_asking(
    served: tuple[int, Path],
) -> None:
    port, _ = served

    async def calls() -> tuple[dict[str, Any], dict[str, Any]]:
        async with mcp_session(port) as session:
            result = await session.call_tool("nautilus_request_ranked", ask())
            assert not result.isError, result
            first: dict[str, Any] = json.loads(result.content[0].text)
            handle = the_long_entry(first["rows"])["passage"]["handle"]
            result = await session.call_tool("nautilus_request_ranked", ask(whole=[handle]))
            assert not result.isError, result
            return first, json.loads(result.content[0].text)

    first, again = asyncio.run(calls())
    part = the_long_entry(first["rows"])
    assert part["row"]["body"] == LONG_BODY[part["passage"]["start"] : part["passage"]["end"]]
    whole = the_long_entry(again["rows"])
    assert whole["row"] == LONG and "passage" not in whole
