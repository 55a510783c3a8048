"""Ranking profiles inside the broker, in real processes: ``python -m
nautilus_ranking.upstream serve`` (``nautilus serve`` with the ranking attached) on
loopback, two agents asking at once, each ranked by the profile that lists it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from conftest import AGENT, CONTEXT, RUNBOOKS, TICKETS, static_source, write_config
from serving import KEY, serving
from test_serving import rows

QUERY = "ops: orders-db disk full"
OTHER = "agent-beta"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[int]:
    config = write_config(
        tmp_path, [static_source("runbooks", RUNBOOKS), static_source("tickets", TICKETS)]
    )
    document = yaml.safe_load(config.read_text())
    document["api"] = {"keys": [KEY]}
    document["agents"][OTHER] = {**document["agents"][AGENT], "id": OTHER}
    config.write_text(yaml.safe_dump(document))
    settings = {
        "NAUTILUS_RANKING_TOP_K": "2",
        # agent-alpha: runbooks first, tickets held back; agent-beta: unboosted, top 5
        "NAUTILUS_PROFILES__ONCALL__AGENTS": AGENT,
        "NAUTILUS_PROFILES__ONCALL__SOURCE_BOOSTS": "runbooks:high,tickets:-high",
        "NAUTILUS_PROFILES__AUDIT__AGENTS": OTHER,
        "NAUTILUS_PROFILES__AUDIT__RANKING_TOP_K": "5",
    }
    settings["NAUTILUS_DATA_DIR"] = str(tmp_path / "data")
    with serving(config, settings, tmp_path / "serve.log") as (port, _):
        yield port


def test_two_agents_at_once_each_ranked_by_its_profile(served: int) -> None:
    async def ask(client: httpx.AsyncClient, agent: str) -> Any:
        answer = await client.post(
            f"http://127.0.0.1:{served}/v1/request",
            headers={"X-API-Key": KEY},
            json={"agent_id": agent, "intent": QUERY, "context": CONTEXT},
        )
        assert answer.status_code == 200, answer.text
        return answer.json()["data"]

    async def both() -> list[Any]:
        async with httpx.AsyncClient(timeout=30) as client:
            return list(await asyncio.gather(*[ask(client, a) for a in (AGENT, OTHER) * 3]))

    answers = asyncio.run(both())
    alpha, beta = answers[0], answers[1]
    assert rows(alpha)[0].startswith("RB-") and len(rows(alpha)) == 2  # runbooks first
    assert rows(beta)[0] == "INC-2" and len(rows(beta)) == 5  # unboosted, its top 5
    assert all(rows(a) == rows(alpha) for a in answers[0::2])
    assert all(rows(b) == rows(beta) for b in answers[1::2])


def test_the_ranked_answer_names_the_profile_that_ranked_it(served: int) -> None:
    for agent, profile in ((AGENT, "oncall"), (OTHER, "audit")):
        answer = httpx.post(
            f"http://127.0.0.1:{served}/v1/request/ranked",
            headers={"X-API-Key": KEY},
            json={"agent_id": agent, "intent": QUERY, "context": CONTEXT},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["ranking"]["profile"] == profile
