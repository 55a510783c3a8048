"""The feedback sinks: owner-only JSONL files, rotated, pruned by age and by the
folder's bound; and the ubi_queries / ubi_events pair of a real OpenSearch-API server."""

from __future__ import annotations

import json
import os
import stat
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nautilus_ranking.feedback.events import EVENTS, QUERIES
from nautilus_ranking.feedback.sinks import JsonlSink, OpenSearchSink

EVENT = {"event_id": "e1", "action_name": "impression", "query_id": "q1", "pad": "x" * 200}


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_files_are_owner_only_in_an_owner_only_folder(tmp_path: Path) -> None:
    sink = JsonlSink(tmp_path / "feedback", max_bytes=1 << 20, retention_days=30)
    sink.write(QUERIES, [{"query_id": "q1"}])
    sink.write(EVENTS, [EVENT])
    sink.close()
    assert _mode(tmp_path / "feedback") == 0o700
    files = sorted((tmp_path / "feedback").iterdir())
    assert [p.name.split("-")[0] for p in files] == [EVENTS, QUERIES]
    assert all(_mode(p) == 0o600 for p in files)
    assert all(p.name.split("-")[1] == str(os.getpid()) for p in files)
    assert json.loads(files[0].read_text()) == EVENT


def test_a_file_is_rotated_at_an_eighth_of_the_bound(tmp_path: Path) -> None:
    sink = JsonlSink(tmp_path, max_bytes=8 * 1000, retention_days=30)
    for _ in range(20):  # ~250 bytes each: a new file past 1,000 bytes
        sink.write(EVENTS, [EVENT])
    sink.close()
    files = list(tmp_path.glob(f"{EVENTS}-*.jsonl"))
    assert len(files) >= 4
    lines = [json.loads(line) for p in files for line in p.read_text().splitlines()]
    assert len(lines) == 20


def test_rotation_deletes_files_past_the_retention_and_past_the_bound(tmp_path: Path) -> None:
    old = tmp_path / f"{EVENTS}-1-20200101T000000000000Z.jsonl"
    old.write_text("{}\n")
    month_ago = time.time() - 31 * 86_400
    os.utime(old, (month_ago, month_ago))
    other = tmp_path / f"{QUERIES}-2-20260101T000000000000Z.jsonl"  # another process's, recent
    other.write_bytes(b"x" * 5_000)
    os.utime(other, (time.time() - 60, time.time() - 60))
    sink = JsonlSink(tmp_path, max_bytes=8_000, retention_days=30)
    sink.write(EVENTS, [EVENT])  # opening the first file prunes: the month-old one goes
    assert not old.exists() and other.exists()
    for _ in range(30):  # past the folder's bound: the oldest file goes at a rotation
        sink.write(EVENTS, [EVENT])
    sink.close()
    assert not other.exists()
    assert sum(p.stat().st_size for p in tmp_path.iterdir()) <= 8_000 + 1_000


osmem_server = pytest.importorskip(
    "osmem_server", reason="osmem-server is not installed (it is in the dev extra)"
)


@pytest.fixture(scope="module")
def opensearch() -> Iterator[str]:
    server = osmem_server.OsmemServer.start(japanese=False)
    try:
        yield server.url
    finally:
        server.close()
        for stream in (server.process.stdout, server.process.stdin):
            if stream is not None:
                stream.close()


def _search(url: str, index: str) -> list[dict[str, Any]]:
    urllib.request.urlopen(urllib.request.Request(f"{url}/{index}/_refresh", method="POST"))
    with urllib.request.urlopen(f"{url}/{index}/_search?size=100") as answer:
        hits = json.loads(answer.read())["hits"]["hits"]
    return [hit["_source"] for hit in hits]


def test_opensearch_holds_the_pair_and_a_repeated_event_once(opensearch: str) -> None:
    sink = OpenSearchSink(opensearch)
    sink.write(QUERIES, [{"query_id": "q1", "user_query": "hmac:ab"}])
    sink.write(EVENTS, [EVENT, {**EVENT, "event_id": "e2"}])
    sink.write(EVENTS, [EVENT])  # sent again: the same document
    assert _search(opensearch, QUERIES) == [{"query_id": "q1", "user_query": "hmac:ab"}]
    assert sorted(e["event_id"] for e in _search(opensearch, EVENTS)) == ["e1", "e2"]


def test_a_dead_opensearch_raises_for_the_recorder_to_count() -> None:
    sink = OpenSearchSink("http://127.0.0.1:9", timeout_s=2)
    with pytest.raises(OSError):
        sink.write(EVENTS, [EVENT])
