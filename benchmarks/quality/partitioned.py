"""The benchmarks' shared set-up: one IR collection served by three real sources.

``fts`` (SQLite FTS5, BM25 order), ``sql`` (an unranked table) and ``vector`` (cosine
order), each holding a third of the corpus (``partitioned``) or all of it (``hybrid``);
every query's answers fetched once, declared as the sources declare them or with
``ranked=None`` on every result (``undeclared``). ``quality``, ``boost_safety`` and
``relevance_cut`` all measure on these answers.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from benchmarks.quality.ir_collections import Collection
from nautilus_ranking import AdapterResult, Broker
from nautilus_ranking.sources.sqlite.fts import SqliteFtsSource
from nautilus_ranking.sources.sqlite.table import SqliteTableSource
from nautilus_ranking.sources.sqlite.vector import SqliteVectorSource

SOURCE_LIMIT = 30
SOURCES = ("fts", "sql", "vector")
MODES = ("declared", "undeclared")


def build_broker(
    collection: Collection,
    scenario: str,
    folder: Path,
    vector_embedder: Any = None,
    parts: list[list[dict[str, str]]] | None = None,
) -> Broker:
    """The three sources over ``collection``; ``parts``: each source's documents, when
    not the scenario's own split (``near_duplicates`` adds copies to them)."""
    if parts is None:
        parts = (
            [collection.docs[i::3] for i in range(3)]
            if scenario == "partitioned"
            else [collection.docs] * 3
        )
    folder.mkdir(parents=True, exist_ok=True)
    seeds = []
    for name, docs in zip(SOURCES, parts, strict=True):
        seed = folder / f"{scenario}-{name}.jsonl"
        seed.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
        seeds.append(seed)
    db = folder / "db"
    sources = [
        SqliteFtsSource(
            "fts", db / f"{scenario}-fts.db", seeds[0], ["title", "text"], timeout_s=60
        ),
        SqliteTableSource(
            "sql", db / f"{scenario}-sql.db", seeds[1], "docs", ["title", "text"], timeout_s=60
        ),
        SqliteVectorSource(
            "vector",
            db / f"{scenario}-vector.db",
            seeds[2],
            ["title", "text"],
            embedder=vector_embedder,
            timeout_s=600,
        ),
    ]
    return Broker(sources, limit=SOURCE_LIMIT)


def unique_ids(rows: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(str(r["id"]) for r in rows))


def undeclare(fetched: dict[str, list[AdapterResult]]) -> dict[str, list[AdapterResult]]:
    """The same answers with ``ranked=None`` on every result: what a library caller or
    an upstream broker whose adapters return rows only hands the ranker."""
    return {qid: [replace(r, ranked=None) for r in results] for qid, results in fetched.items()}


@lru_cache(maxsize=1)
def onnx_embedder() -> Any:
    """The real model (nautilus-ranking[embed]) shared by every run, or None without the extra."""
    try:
        from nautilus_ranking.embedders.onnx import OnnxEmbedder

        return OnnxEmbedder(cache_size=100_000)
    except ImportError:  # the extra is not installed (OnnxEmbedder says which part)
        return None


def fetch(broker: Broker, collection: Collection) -> dict[str, list[AdapterResult]]:
    async def run() -> dict[str, list[AdapterResult]]:
        return {qid: await broker.fetch(text) for qid, text in collection.queries.items()}

    return asyncio.run(run())
