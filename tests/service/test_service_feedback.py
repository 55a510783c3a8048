"""``POST /v1/feedback`` on a real ``serve``: a cite is taken only from the key whose
answer made it, a forged one never; errors name the field; each event has an id, the
same for a report sent twice; the log holds one query record and one impression per
row handed over, pages starting at 1; a dead sink fails no request."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes import sources_file

from tools.servers import running

pytestmark = pytest.mark.slow

QUERY = "disk full on the database"


def _environment(tmp: Path, **extra: str) -> dict[str, str]:
    sources_file(tmp)
    (tmp / "keys").write_text("k-alpha\nk-beta\n")
    (tmp / "keys").chmod(0o600)
    return {
        "NAUTILUS_CONFIG": str(tmp / "nautilus.yaml"),
        "NAUTILUS_SERVE_API_KEYS_FILE": str(tmp / "keys"),
        "NAUTILUS_RANKING_TOP_K": "3",
        "NAUTILUS_FEEDBACK": "true",
        **extra,
    }


def _records(folder: Path, family: str) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted(folder.glob(f"{family}-*.jsonl"))
        for line in path.read_text().splitlines()
    ]


def _cite_body(cite: str) -> list[Any]:
    body = cite.split(".")[1]
    decoded: list[Any] = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    return decoded


def test_feedback_is_taken_from_the_key_whose_answer_made_the_cite(tmp_path: Path) -> None:
    with running(tmp_path, _environment(tmp_path)) as server:

        def post(path: str, key: str | None, body: object) -> httpx.Response:
            headers = {"X-API-Key": key} if key else {}
            return httpx.post(server.url + path, json=body, headers=headers, timeout=30)

        answer = post("/v1/query", "k-alpha", {"query": QUERY}).json()
        cites = [r["cite"] for r in answer["ranking"]]
        used = post("/v1/feedback", "k-alpha", {"action": "used", "cites": cites[:2]})
        again = post("/v1/feedback", "k-alpha", {"action": "used", "cites": cites[:2]})
        retried = post("/v1/feedback", "k-alpha", {"action": "retried", "cites": cites})
        borrowed = post("/v1/feedback", "k-beta", {"action": "used", "cites": cites[:1]})
        altered = cites[0][:-3] + ("AAA" if not cites[0].endswith("AAA") else "BBB")
        forged = post("/v1/feedback", "k-alpha", {"action": "used", "cites": [cites[1], altered]})
        impression = post("/v1/feedback", "k-alpha", {"action": "impression", "cites": cites})
        too_many = post("/v1/feedback", "k-alpha", {"action": "used", "cites": cites * 17})
        extra = post("/v1/feedback", "k-alpha", {"action": "used", "cites": cites, "rating": 5})
        no_key = post("/v1/feedback", None, {"action": "used", "cites": cites})
        page_2 = post("/v1/query", "k-alpha", {"query": QUERY, "top_k": 2, "page": 2}).json()
    assert used.status_code == 202, used.text
    assert len(used.json()["event_ids"]) == 2 and used.json()["queued"] is True
    assert again.json()["event_ids"] == used.json()["event_ids"]  # a repeat is one event
    assert len(retried.json()["event_ids"]) == 1  # query-level: one per answer
    assert borrowed.status_code == 403 and borrowed.json()["field"] == "cites.0"
    assert borrowed.json()["type"].endswith("cite-not-yours")
    assert forged.status_code == 403 and forged.json()["field"] == "cites.1"
    assert forged.json()["type"].endswith("cite-forged")
    assert impression.status_code == 422 and impression.json()["field"] == "action"
    assert too_many.status_code == 422 and too_many.json()["field"] == "cites"
    assert extra.status_code == 422 and extra.json()["field"] == "rating"
    assert no_key.status_code == 401

    assert [r["position"] for r in page_2["ranking"]] == [1, 2]  # each page starts at 1
    assert [_cite_body(r["cite"])[1:3] for r in page_2["ranking"]] == [[2, 1], [2, 2]]

    folder = tmp_path / "data" / "feedback"
    queries, events = _records(folder, "ubi_queries"), _records(folder, "ubi_events")
    assert [q["query_id"] for q in queries] == [answer["ranking_id"], page_2["ranking_id"]]
    first = queries[0]
    assert first["user_query"].startswith("hmac:") and QUERY not in json.dumps(queries)
    assert first["client_id"].startswith("hmac:") and "k-alpha" not in json.dumps(queries)
    assert first["query_response_hit_ids"] == [r["id"] for r in answer["ranking"]]
    assert first["query_attributes"]["hit_sources"] == [r["source_id"] for r in answer["ranking"]]
    assert len(first["query_attributes"]["config_hash"]) == 16
    assert first["query_attributes"]["top_k"] == 3
    impressions = [e for e in events if e["action_name"] == "impression"]
    assert len(impressions) == 3 + 2
    assert [e["event_attributes"]["position"] for e in impressions[3:]] == [
        {"ordinal": 1, "page": 2},
        {"ordinal": 2, "page": 2},
    ]
    assert "boost_bump" in impressions[0]["event_attributes"]["components"]
    uses = [e for e in events if e["action_name"] == "used"]
    assert [e["event_id"] for e in uses] == used.json()["event_ids"] * 2
    assert [e["event_attributes"]["object"]["object_id"] for e in uses[:2]] == [
        r["id"] for r in answer["ranking"][:2]
    ]
    assert {e["client_id"] for e in events} == {first["client_id"]}
    assert oct(next(folder.iterdir()).stat().st_mode)[-3:] == "600"


def test_a_dead_sink_fails_no_request_and_is_counted(tmp_path: Path) -> None:
    env = _environment(tmp_path, NAUTILUS_FEEDBACK_OPENSEARCH_URL="http://127.0.0.1:9")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "feedback").write_text("not a folder")  # the JSONL sink fails too
    with running(tmp_path, env) as server:
        headers = {"X-API-Key": "k-alpha"}
        statuses = [
            httpx.post(
                server.url + "/v1/query", json={"query": QUERY}, headers=headers, timeout=30
            ).status_code
            for _ in range(20)
        ]
        counted = 'nautilus_feedback_dropped_total{reason="JsonlSink_failed"}'
        # the writer wakes once a second: read /metrics until its first batch is counted
        deadline = time.monotonic() + 30
        while counted not in (metrics := httpx.get(server.url + "/metrics").text):
            assert time.monotonic() < deadline, metrics
    assert statuses == [200] * 20
    assert "feedback_records_dropped" in server.logs()
