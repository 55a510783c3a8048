"""The elasticsearch preset against an OpenSearch-API server: ``osmem-server``, an
in-memory emulator over bleve (a Go binary in its wheel), started on loopback by the
test. Its DSL, ``_id``/``_score``/``_source``, ``search_after`` and error bodies."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from http_support import built, search

from nautilus_ranking.sources.http.client import HttpSourceError

osmem_server = pytest.importorskip(
    "osmem_server", reason="osmem-server is not installed (it is in the dev extra)"
)

# Titles of distinct lengths: every document's score differs (the emulator compares a
# search_after score as float64 with its float32 scores, so ties may be skipped).
TITLES = [
    "disk",
    "disk full",
    "disk full primary",
    "orders disk lag replica",
    "kafka broker disk audit topic",
    "runbook for when the disk of a host fills",
    "nothing to see",
    "disk cleanup of old write ahead log segments on the primary",
]


@pytest.fixture(scope="module")
def opensearch() -> Iterator[str]:
    server = osmem_server.OsmemServer.start(japanese=False)
    try:
        server.request(
            "PUT",
            "/runbooks",
            {
                "mappings": {
                    "properties": {"title": {"type": "text"}, "doc_id": {"type": "keyword"}}
                }
            },
        )
        for i, title in enumerate(TITLES):
            server.request(
                "PUT", f"/runbooks/_doc/rb-{i}?refresh=true", {"title": title, "doc_id": f"rb-{i}"}
            )
        yield server.url
    finally:
        server.close()
        if server.process.stdout is not None:
            server.process.stdout.close()
        if server.process.stdin is not None:
            server.process.stdin.close()


def entry(url: str, **options: Any) -> dict[str, Any]:
    return {
        "id": "os",
        "type": "elasticsearch",
        "url": url,
        "index": "runbooks",
        "fields": ["title"],
        **options,
    }


def engine_order(url: str, query: str, size: int) -> list[tuple[str, float]]:
    import httpx

    body = {"query": {"multi_match": {"query": query, "fields": ["title"]}}, "size": size}
    hits = httpx.post(f"{url}/runbooks/_search", json=body).json()["hits"]["hits"]
    return [(h["_id"], h["_score"]) for h in hits]


def test_the_preset_maps_id_score_and_source_in_the_engine_order(
    opensearch: str, tmp_path: Path
) -> None:
    with built(tmp_path, entry(opensearch)) as [source]:
        rows = search(source, "disk", 10)
    expected = engine_order(opensearch, "disk", 10)
    assert len(expected) == 7  # every title with "disk"
    assert [(r["id"], r["engine_score"]) for r in rows] == expected
    assert (
        rows[0]["title"]
        == dict(zip([f"rb-{i}" for i in range(8)], TITLES, strict=True))[rows[0]["id"]]
    )
    assert set(rows[0]) == {"id", "title", "engine_score"}  # only the mapped fields


def test_paging_by_offset_and_by_search_after_give_the_one_page_order(
    opensearch: str, tmp_path: Path
) -> None:
    expected = [i for i, _ in engine_order(opensearch, "disk", 10)]
    by_offset = entry(opensearch, paging={"by": "offset", "page_size": 2})
    with built(tmp_path, by_offset) as [source]:
        assert [r["id"] for r in search(source, "disk", 10)] == expected
    after = entry(opensearch, tiebreaker="doc_id")
    after["paging"] = {"by": "search_after", "page_size": 3, "after": "sort"}
    with built(tmp_path, after) as [source]:
        assert [r["id"] for r in search(source, "disk", 10)] == expected


def test_a_hostile_query_is_searched_for_as_text(opensearch: str, tmp_path: Path) -> None:
    with built(tmp_path, entry(opensearch)) as [source]:
        rows = search(source, 'kafka"}, "size": 10000, "x": {"', 2)
    assert [r["id"] for r in rows] == ["rb-4"]  # "kafka" matched; nothing else changed


def test_an_error_body_is_quoted_with_the_status(opensearch: str, tmp_path: Path) -> None:
    missing = entry(opensearch, index="no-such-index")
    with built(tmp_path, missing) as [source], pytest.raises(HttpSourceError) as caught:
        search(source, "disk")
    assert str(caught.value).startswith("os: POST http://127.0.0.1:")
    assert "/no-such-index/_search: answered 404: index_not_found_exception: no such index" in (
        str(caught.value)
    )
