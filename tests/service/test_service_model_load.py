"""A server whose content embedder is the sentence model loads it at start: ``/readyz``
answers ready only once it is loaded (the first request does not pay the load), and a
server that ranks by words loads nothing."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from fakes import sources_file

from nautilus_ranking.embedders.default import model_installed
from tools.servers import running, wait_ready

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not model_installed(), reason="needs the embed extra"),
]


def _events(logs: str, name: str) -> list[dict[str, object]]:
    events = [json.loads(line) for line in logs.splitlines() if line.startswith("{")]
    return [e for e in events if e.get("event") == name]


def test_serve_loads_the_model_before_it_says_ready(tmp_path: Path) -> None:
    env = {
        "NAUTILUS_CONFIG": str(sources_file(tmp_path, timeout_s=10)),
        "NAUTILUS_RANKING_TOP_K": "5",
        "NAUTILUS_EMBEDDER": "onnx",
    }
    with running(tmp_path, env) as server:
        ready = wait_ready(server, timeout=120)
        assert ready.status_code == 200, ready.text
        loaded = _events(server.logs(), "embedder_loaded")  # read when ready, not after
        assert len(loaded) == 1, server.logs()
        assert loaded[0]["model_id"] == "all-MiniLM-L6-v2-onnx-int8-matmul"
        answer = httpx.post(server.url + "/v1/query", json={"query": "disk full"}, timeout=60)
        assert answer.status_code == 200, answer.text
    assert _events(server.logs(), "embedder_load_failed") == []


def test_mcp_over_http_loads_the_model_at_start(tmp_path: Path) -> None:
    env = {
        "NAUTILUS_CONFIG": str(sources_file(tmp_path, timeout_s=10)),
        "NAUTILUS_RANKING_TOP_K": "5",
        "NAUTILUS_EMBEDDER": "onnx",
    }
    with running(tmp_path, env, subcommand=("mcp", "--transport", "http")) as server:
        for _ in range(1200):  # bounded: the load takes seconds on a busy machine
            if _events(server.logs(), "embedder_loaded") or server.process.poll() is not None:
                break
            time.sleep(0.1)
        assert len(_events(server.logs(), "embedder_loaded")) == 1, server.logs()


def test_a_server_ranking_by_words_loads_no_model(tmp_path: Path) -> None:
    env = {
        "NAUTILUS_CONFIG": str(sources_file(tmp_path, timeout_s=10)),
        "NAUTILUS_RANKING_TOP_K": "5",
        "NAUTILUS_EMBEDDER": "hashing",
    }
    with running(tmp_path, env) as server:
        assert wait_ready(server).status_code == 200
        assert _events(server.logs(), "embedder_loaded") == []
