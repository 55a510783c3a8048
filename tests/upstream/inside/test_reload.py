"""A SIGHUP reload of a served, ranked broker keeps the ranking attached, with the new
sources, and checks the boosts again against them."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import httpx
import yaml
from conftest import AGENT, CONTEXT, RUNBOOKS, TICKETS, static_source, write_config
from serving import KEY, serving

EXTRA = [{"id": "PM-1", "title": "orders-db disk full postmortem", "body": "disk full"}]


def test_a_sighup_reload_keeps_the_ranking_and_rechecks_the_boosts(tmp_path: Path) -> None:
    path = write_config(
        tmp_path, [static_source("runbooks", RUNBOOKS), static_source("tickets", TICKETS)]
    )
    document = yaml.safe_load(path.read_text())
    document["api"] = {"keys": [KEY]}
    path.write_text(yaml.safe_dump(document))
    env = {
        "NAUTILUS_RANKING_TOP_K": "3",
        "NAUTILUS_SOURCE_BOOSTS": "postmortems:high",  # no such source, yet
        "NAUTILUS_DATA_DIR": str(tmp_path / "data"),
    }
    log = tmp_path / "serve.log"
    with serving(path, env, log, log_level="info") as (port, process):
        url = f"http://127.0.0.1:{port}"
        body = {"agent_id": AGENT, "intent": "ops: orders-db disk full", "context": CONTEXT}

        def ask() -> dict[str, object]:
            answer = httpx.post(
                f"{url}/v1/request/ranked", headers={"X-API-Key": KEY}, json=body, timeout=30
            )
            assert answer.status_code == 200, answer.text
            result: dict[str, object] = answer.json()
            return result

        before = ask()
        assert before["ranking"]["ranked"] is True  # type: ignore[index]
        assert log.read_text().count("source_boost_skipped") == 1

        document["sources"].append(static_source("postmortems", EXTRA))
        path.write_text(yaml.safe_dump(document))
        process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 30
        while "postmortems" not in str(
            httpx.get(f"{url}/v1/sources", headers={"X-API-Key": KEY}, timeout=5).json()
        ):
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)

        after = ask()
        rows = after["rows"]
        assert after["ranking"]["ranked"] is True  # type: ignore[index]
        assert len(rows) == 3 and all(e["score"] is not None for e in rows)  # type: ignore[union-attr]
        first = rows[0]  # type: ignore[index]
        assert (first["source"], first["row"]["id"]) == ("postmortems", "PM-1")
        explained = httpx.post(
            f"{url}/v1/request/ranked",
            headers={"X-API-Key": KEY},
            json={**body, "explain": True},
            timeout=30,
        ).json()["rows"][0]
        assert explained["explain"]["boost_bump"] > 0  # the boost applies to the new source
        assert log.read_text().count("source_boost_skipped") == 1  # not warned again
