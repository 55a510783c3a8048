"""``eval`` under a token budget scores what is delivered: on the demo's judged queries,
with a profile of 300 tokens, ``eval --profile`` reports the nDCG@10 of the rows a real
``serve`` hands over (``--budget-counts json``) and of the rows MCP hands over
(``--budget-counts mcp``), each scored here from the answers themselves."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_process import run_nautilus
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from plain_environment import plain_environment

from nautilus_ranking.evaluation.judgments import read_judgments, read_queries
from nautilus_ranking.evaluation.metrics import ndcg_at, relevant
from tools.servers import NAUTILUS, running

pytestmark = pytest.mark.slow

JUDGED = Path(__file__).parents[1] / "data" / "demo_judgments"
PROFILE = {
    "NAUTILUS_PROFILES__TIGHT__RANKING_TOP_K": "10",
    "NAUTILUS_PROFILES__TIGHT__RANKING_IDF": "true",
    "NAUTILUS_PROFILES__TIGHT__RANKING_MAX_TOKENS": "300",
}


def judged() -> list[tuple[str, dict[str, int]]]:
    queries = read_queries(JUDGED / "queries.jsonl").texts
    grades = read_judgments(JUDGED / "qrels.tsv").grades
    return [(text, grades[q]) for q, text in queries.items() if relevant(grades.get(q, {}))]


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def test_eval_scores_what_serve_and_mcp_hand_over_under_a_profiles_budget(
    tmp_path: Path,
) -> None:
    env = plain_environment()
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.update(PROFILE, NAUTILUS_DATA_DIR=str(tmp_path / "data"))

    def evaluated(*flags: str) -> dict[str, Any]:
        out = run_nautilus(
            *("eval", "--queries", str(JUDGED / "queries.jsonl")),
            *("--judgments", str(JUDGED / "qrels.tsv"), "--profile", "tight", "--json"),
            *flags,
            env=env,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr
        report: dict[str, Any] = json.loads(out.stdout)
        return report

    as_json, as_mcp = evaluated(), evaluated("--budget-counts", "mcp")
    assert as_json["budget"] == {"max_tokens": 300, "counted_as": "json"}
    assert as_mcp["budget"] == {"max_tokens": 300, "counted_as": "mcp"}
    unbudgeted = evaluated("--max-tokens", str(10**6))["results"][0]["ndcg"]
    queries = judged()

    with running(tmp_path, PROFILE) as server:
        served = []
        for text, grades in queries:
            answer = httpx.post(
                server.url + "/v1/query", json={"query": text, "profile": "tight"}, timeout=30
            )
            assert answer.status_code == 200, answer.text
            body = answer.json()
            assert body["budget"]["max_tokens"] == 300
            served.append(ndcg_at([e["id"] for e in body["ranking"]], grades, 10))

    async def over_mcp() -> list[float]:
        params = StdioServerParameters(command=NAUTILUS, args=["mcp"], env=env, cwd=tmp_path)
        scores = []
        with (tmp_path / "mcp.log").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                for text, grades in queries:
                    result = await client.call_tool("search", {"query": text, "profile": "tight"})
                    assert not result.is_error, result.content
                    ids = [r["id"] for r in result.structured_content["results"]]
                    scores.append(ndcg_at(ids, grades, 10))
        return scores

    over = asyncio.run(over_mcp())
    json_ndcg, mcp_ndcg = as_json["results"][0]["ndcg"], as_mcp["results"][0]["ndcg"]
    assert json_ndcg == pytest.approx(mean(served), abs=1e-9)
    assert mcp_ndcg == pytest.approx(mean(over), abs=1e-9)
    # the budget binds: the agent is handed less than the top 10, MCP more than JSON
    assert json_ndcg < mcp_ndcg <= unbudgeted
    print(
        f"nDCG@10 at 300 tokens: eval json {json_ndcg:.3f}, serve {mean(served):.3f}; "
        f"eval mcp {mcp_ndcg:.3f}, MCP {mean(over):.3f}; no budget {unbudgeted:.3f}"
    )
