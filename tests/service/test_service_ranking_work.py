"""How much ranking one request may cost a worker: the server's ceiling on the rows one
request ranks, and a request's ranking stopped once its deadline has answered 504."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
from fakes import sources_file, write_jsonl

from tools.servers import running, wait_ready


def many_rows(tmp: Path, n: int) -> Path:
    """One full-text source of ``n`` rows that all match "disk", asked for all of them."""
    seed = write_jsonl(
        tmp / "flood.jsonl", [{"id": f"f{i}", "title": f"disk full {i}"} for i in range(n)]
    )
    path = tmp / "flood.yaml"
    path.write_text(
        f"limit: {n}\nsources:\n  - id: flood\n    type: sqlite_fts\n    path: demo/flood.db\n"
        f"    seed: {seed}\n    columns: [title]\n    timeout_s: 10\n",
        encoding="utf-8",
    )
    return path


def test_a_request_ranks_at_most_the_servers_ceiling_of_rows(tmp_path: Path) -> None:
    """Above NAUTILUS_SERVE_MAX_RANKED_ROWS the best rows by the sources' own order are
    ranked (the candidate cap), whatever the request's top_k; the setting is shown."""
    env = {
        "NAUTILUS_CONFIG": str(many_rows(tmp_path, 300)),
        "NAUTILUS_SERVE_MAX_RANKED_ROWS": "50",
    }
    with running(tmp_path, env) as server:
        wait_ready(server)
        body = {"query": "disk full", "top_k": 300, "max_per_source": 1, "explain": True}
        answer = httpx.post(server.url + "/v1/query", json=body, timeout=60)
        assert answer.status_code == 200, answer.text
        ranking = answer.json()["ranking"]
        assert len(ranking) == 50
        # the rows ranked are the source's first 50 (its own order), re-ordered
        assert {r["source_rank"] for r in ranking} == set(range(1, 51))
        config = httpx.get(server.url + "/v1/config", timeout=10).json()
        assert config["settings"]["NAUTILUS_SERVE_MAX_RANKED_ROWS"] == 50
        # a request that ranks nothing is not touched: the rows pass through
        plain = httpx.post(server.url + "/v1/query", json={"query": "disk full"}, timeout=60)
        assert len(plain.json()["data"]["flood"]) == 300


def test_a_request_past_its_deadline_stops_ranking(tmp_path: Path) -> None:
    """Before: the 504 was sent and the ranking went on to the end on the broker's loop
    (its request_served logged after the answer). Now the ranking stops at its next
    stage and says so."""
    env = {
        "NAUTILUS_CONFIG": str(sources_file(tmp_path)),
        "NAUTILUS_RANKING_TOP_K": "10",
        "NAUTILUS_SERVE_REQUEST_TIMEOUT_S": "0.5",
    }
    launcher = ["--slow-ranking-on", "slow ranking", "--delay", "2"]
    with running(tmp_path, env, launcher=launcher) as server:
        wait_ready(server)
        late = httpx.post(server.url + "/v1/query", json={"query": "slow ranking"}, timeout=30)
        assert late.status_code == 504, late.text
        assert late.headers["content-type"] == "application/problem+json"
        for _ in range(200):  # bounded: until the slow ranking has ended, either way
            if "ranking_abandoned" in server.logs() or "request_served" in server.logs():
                break
            time.sleep(0.05)
        ok = httpx.post(server.url + "/v1/query", json={"query": "disk full"}, timeout=30)
        assert ok.status_code == 200, ok.text
        events = [json.loads(line) for line in server.logs().splitlines() if line.startswith("{")]
    abandoned = [e for e in events if e.get("event") == "ranking_abandoned"]
    assert len(abandoned) == 1 and abandoned[0]["stage"]
    assert abandoned[0]["request_id"] == late.headers["x-request-id"]
    assert sum(e.get("event") == "request_served" for e in events) == 1  # the second only
