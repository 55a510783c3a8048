"""A request its caller has abandoned (its own deadline answered 504) stops embedding
between chunks of rows, as it stops between the ranking's other stages; the vectors
made before are kept. With the embedding deadline off, the model would otherwise embed
every row of the abandoned request while the callers after it wait."""

from __future__ import annotations

import asyncio
import contextvars
import json
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import numpy.typing as npt
import pytest
from fakes import write_jsonl

from nautilus_ranking.embedders.default import model_installed
from nautilus_ranking.fanout.abandon import abandon, abandoned, can_be_abandoned, watch
from tools.servers import running, wait_ready

needs_model = pytest.mark.skipif(not model_installed(), reason="needs the embed extra")


def test_outside_a_watched_request_nothing_changes() -> None:
    """The library and the CLI run no watched call: embedding is one pass, as before."""
    assert not can_be_abandoned() and not abandoned()


@needs_model
def test_an_abandoned_request_stops_between_chunks_and_keeps_what_it_made() -> None:
    from nautilus_ranking.embedders.onnx import OnnxEmbedder

    flag = threading.Event()

    class AbandonedAfterOneChunk(OnnxEmbedder):
        """The real model; its caller stops waiting once the first chunk is embedded."""

        chunks = 0

        def _encode(self, texts: list[str]) -> npt.NDArray[np.float32]:
            vectors = super()._encode(texts)
            self.chunks += 1
            abandon(flag)
            return vectors

    embedder = AbandonedAfterOneChunk(cache_size=1000)
    texts = [f"disk full on host {i}" for i in range(200)]

    def watched_request() -> object:
        watch(flag)
        return embedder.embed_batch(texts)

    with pytest.raises(asyncio.CancelledError, match="abandoned at embedding"):
        contextvars.copy_context().run(watched_request)
    assert embedder.chunks == 1
    made = embedder.cache_misses
    assert 0 < made < len(texts)
    vectors = embedder.embed_batch(texts)  # a request nobody abandons: every text
    assert np.isfinite(vectors).all()
    assert embedder.cache_hits == made  # the abandoned request's vectors were kept


def flood(tmp: Path, n: int) -> Path:
    """One full-text source of ``n`` long rows that all match "disk full"."""
    words = " ".join(f"word{j} of the incident report" for j in range(12))
    seed = write_jsonl(
        tmp / "flood.jsonl",
        [{"id": f"f{i}", "title": f"disk full on host {i}: {words}"} for i in range(n)],
    )
    path = tmp / "flood.yaml"
    path.write_text(
        f"limit: {n}\nsources:\n  - id: flood\n    type: sqlite_fts\n    path: flood.db\n"
        f"    seed: {seed}\n    columns: [title]\n    timeout_s: 30\n",
        encoding="utf-8",
    )
    return path


@needs_model
@pytest.mark.slow
def test_serve_stops_embedding_a_request_past_its_deadline(tmp_path: Path) -> None:
    """Before: the 504 was sent and the model embedded every row of the request, its
    ranking stopped only after (at the ``similarity`` stage). Now it stops in the
    embedding, and the caller after it is answered."""
    env = {
        "NAUTILUS_CONFIG": str(flood(tmp_path, 2000)),
        "NAUTILUS_EMBEDDER": "onnx",
        "NAUTILUS_EMBEDDER_DEADLINE_MS": "0",  # only the request's own deadline stops it
        "NAUTILUS_EMBEDDER_MAX_ROWS": "0",  # every row to embed
        "NAUTILUS_EMBEDDER_DISK_CACHE_MB": "0",
        "NAUTILUS_RANKING_TOP_K": "10",  # ranking on: the model loads at start
        "NAUTILUS_SERVE_REQUEST_TIMEOUT_S": "0.5",
    }
    with running(tmp_path, env) as server:
        wait_ready(server, timeout=120)
        late = httpx.post(server.url + "/v1/query", json={"query": "disk full"}, timeout=60)
        assert late.status_code == 504, late.text
        deadline = time.monotonic() + 300
        while "ranking_abandoned" not in server.logs() and time.monotonic() < deadline:
            time.sleep(0.05)  # the abandoned ranking's end, whenever it comes
        one_row = httpx.post(server.url + "/v1/query", json={"query": "7"}, timeout=60)
        assert one_row.status_code == 200, one_row.text
        assert [row["id"] for row in one_row.json()["data"]["flood"]] == ["f7"]
        events = [json.loads(line) for line in server.logs().splitlines() if line.startswith("{")]
    [stopped] = [e for e in events if e.get("event") == "ranking_abandoned"]
    assert stopped["stage"] == "embedding"
    assert stopped["request_id"] == late.headers["x-request-id"]
