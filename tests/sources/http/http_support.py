"""What the HTTP source tests share: a sources file written and built, a search run."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from nautilus_ranking.sources.base import Source
from nautilus_ranking.sources.factory import build_sources

DOCS = [
    {"id": f"d{i:02d}", "title": title, "body": body}
    for i, (title, body) in enumerate(
        [
            ("orders-db disk full", "the primary's disk is 91% full"),
            ("replica lag on orders-db", "replication lag after a disk stall"),
            ("kafka broker disk", "an audit topic filled a broker disk"),
            ("tls certificate expiry", "the edge certificate expired"),
            ("disk alert runbook", "what to do when a disk fills"),
            ("checkout latency", "p99 latency of checkout rose"),
            ("disk cleanup", "delete old WAL segments from the disk"),
        ]
    )
]


def write_sources(folder: Path, *entries: dict[str, Any]) -> Path:
    path = folder / "nautilus.yaml"
    path.write_text(yaml.safe_dump({"sources": list(entries)}, sort_keys=False), "utf-8")
    return path


@contextmanager
def built(folder: Path, *entries: dict[str, Any]) -> Iterator[list[Source]]:
    sources, _ = build_sources(write_sources(folder, *entries), folder / "data", "hashing")
    try:
        yield sources
    finally:
        for source in sources:
            source.close()


def search(source: Source, query: str, limit: int = 5) -> list[dict[str, Any]]:
    return asyncio.run(source.search(query, {"query": query}, limit))


def es_entry(url: str, **options: Any) -> dict[str, Any]:
    return {
        "id": "es",
        "type": "elasticsearch",
        "url": url,
        "index": "docs",
        "fields": ["title", "body"],
        **options,
    }
