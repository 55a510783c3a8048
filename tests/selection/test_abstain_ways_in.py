"""An abstained answer through every way in, on the bundled demo with real processes:
``serve`` over HTTP (per profile, per request, metrics), the MCP server and the CLI."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_process import run_nautilus
from mcp_support import connect
from plain_environment import plain_environment

from nautilus_ranking import compute_response_hash
from tools.servers import Server, running, wait_ready

QUERY = "users keep getting logged out of their sessions"
SETTINGS = {
    "NAUTILUS_RANKING_TOP_K": "5",
    "NAUTILUS_RANKING_MIN_CONFIDENCE": "1",  # every answer below it: each abstains
    "NAUTILUS_PROFILES__OPEN__RANKING_MIN_CONFIDENCE": "0",
    "NAUTILUS_SERVE_API_KEYS_FILE": "",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running(tmp_path_factory.mktemp("serve"), SETTINGS) as srv:
        assert wait_ready(srv).status_code == 200, srv.logs()
        yield srv


def post(server: Server, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(server.url + "/v1/query", json=body, timeout=60)
    assert response.status_code == 200, response.text
    out: dict[str, Any] = response.json()
    return out


def assert_abstained(out: dict[str, Any]) -> None:
    assert out["abstained"] is True and out["ranking"] == []
    assert out["data"] and all(rows == [] for rows in out["data"].values())
    assert out["response_hash"] == compute_response_hash(out["data"])  # its own hash
    assert out["abstain"]["min_confidence"] == 1
    assert out["abstain"]["reason"].startswith("confidence ")
    assert out["abstain"]["nearest"] and out["confidence"] < 1
    assert out["next_cursor"] is None


def test_http_abstains_below_the_minimum_and_a_request_or_profile_may_lower_it(
    server: Server,
) -> None:
    out = post(server, {"query": QUERY})
    assert_abstained(out)
    nearest = [(n["source_id"], n["id"]) for n in out["abstain"]["nearest"]]
    lowered = post(server, {"query": QUERY, "min_confidence": 0})
    assert lowered["abstained"] is False and lowered["confidence"] == out["confidence"]
    assert [(e["source_id"], e["id"]) for e in lowered["ranking"]] == nearest
    assert lowered["response_hash"] != out["response_hash"]
    profiled = post(server, {"query": QUERY, "profile": "open"})
    assert profiled["abstained"] is False and profiled["response_hash"] == lowered["response_hash"]
    explained = post(server, {"query": QUERY, "explain": True})
    assert explained["confidence_signals"]["setup"] == "hashing/bm25/idf-off"
    assert explained["explain"]["min_confidence"] == 1
    metrics = httpx.get(server.url + "/metrics", timeout=10).text
    assert "nautilus_answers_abstained_total 2.0" in metrics
    assert "nautilus_answer_confidence_count 4.0" in metrics


def test_a_request_may_not_ask_for_a_minimum_out_of_range(server: Server) -> None:
    response = httpx.post(
        server.url + "/v1/query", json={"query": QUERY, "min_confidence": 2}, timeout=30
    )
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "min_confidence"


def test_mcp_search_abstains_and_says_why(tmp_path: Path) -> None:
    env = {**SETTINGS, "NAUTILUS_PROFILES__OPEN__RANKING_MIN_CONFIDENCE": ""}
    with running(tmp_path, env, subcommand=("mcp", "--transport", "http")) as srv:

        async def session() -> Any:
            http, client = connect(srv.url, None)
            async with http, client:
                return await client.call_tool("search", {"query": QUERY})

        result = asyncio.run(session())
    content = result.structured_content
    assert content["abstained"] is True and content["results"] == []
    assert content["abstain"]["nearest"] and content["confidence"] < 1
    text = result.content[0].text
    assert text.startswith("0 result(s)")
    assert "abstained: confidence " in text and "(nearest, not shown: " in text


def test_the_cli_abstains_and_explain_lists_the_rows_held_back() -> None:
    base = plain_environment()
    base["NAUTILUS_DATA_DIR"] = os.environ["NAUTILUS_DATA_DIR"]
    env = {**base, "NAUTILUS_RANKING_TOP_K": "5"}

    def query(*flags: str) -> str:
        done = run_nautilus("query", QUERY, "--min-confidence", "1", *flags, env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout

    out = json.loads(query("--json"))
    assert_abstained(out)
    text = query("--explain")
    assert "abstained: confidence " in text and "5 nearest row(s) held back" in text
    assert "confidence signals: top_similarity " in text
    for entry in out["abstain"]["nearest"]:
        assert str(entry["id"]) in text
