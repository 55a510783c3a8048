"""Relevance benchmark: does ranking the union beat handing it over?

For each shared collection, three real SQLite sources of different kinds answer
every judged query, at most 30 rows each:

* ``fts``    — FTS5, BM25 order;
* ``sql``    — a plain table with a keyword filter, rows in table order (unranked);
* ``vector`` — stored hashing-embedder vectors, cosine order.

Scenarios: *partitioned* (each source holds a third of the corpus) and *hybrid*
(each holds all of it; a document returned by several sources counts once).
Strategies order the union: passthrough, round-robin, RRF (k=60, equal weights),
RankingSynthesizer with IDF off and on, and the oracle (the union sorted by
judgment: the upper bound). Then a boost-safety table.

    python benchmarks/quality.py [--datasets DIR] [--only NAME] [--out FILE.md]
    python benchmarks/quality.py --backend postgres   # SQLite beside PostgreSQL (backends.py)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ir_collections import (
    DATASETS,
    NAMES,
    Collection,
    bootstrap_ci,
    load,
    ndcg_at,
    recall_at,
)

from nautilus import AdapterResult, Broker, RankingSynthesizer
from nautilus.log import configure_logging
from nautilus.sources.sqlite_fts import SqliteFtsSource
from nautilus.sources.sqlite_table import SqliteTableSource
from nautilus.sources.sqlite_vector import SqliteVectorSource

SOURCE_LIMIT = 30
SOURCES = ("fts", "sql", "vector")
LEVELS = (None, "low", "medium", "high")
#: The stage-1 cap of the second boost-safety table: half of the 90-row union.
SAFETY_CAP = 45
Strategy = Callable[[list[AdapterResult], str], list[str]]


def build_broker(collection: Collection, scenario: str, folder: Path) -> Broker:
    parts = ([collection.docs[i::3] for i in range(3)] if scenario == "partitioned"
             else [collection.docs] * 3)
    folder.mkdir(parents=True, exist_ok=True)
    seeds = []
    for name, docs in zip(SOURCES, parts, strict=True):
        seed = folder / f"{scenario}-{name}.jsonl"
        seed.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
        seeds.append(seed)
    db = folder / "db"
    sources = [
        SqliteFtsSource("fts", db / f"{scenario}-fts.db", seeds[0], ["title", "text"],
                        timeout_s=60),
        SqliteTableSource("sql", db / f"{scenario}-sql.db", seeds[1], "docs", ["title", "text"],
                          timeout_s=60),
        SqliteVectorSource("vector", db / f"{scenario}-vector.db", seeds[2], ["title", "text"],
                           timeout_s=60),
    ]
    return Broker(sources, limit=SOURCE_LIMIT)


def unique_ids(rows: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(str(r["id"]) for r in rows))


def passthrough(results: list[AdapterResult], query: str) -> list[str]:
    return unique_ids([row for r in results for row in r.rows])


def round_robin(results: list[AdapterResult], query: str) -> list[str]:
    depth = max((len(r.rows) for r in results), default=0)
    return unique_ids([r.rows[i] for i in range(depth) for r in results if i < len(r.rows)])


def rrf(results: list[AdapterResult], query: str, k: int = 60) -> list[str]:
    scores: dict[str, float] = {}
    for result in results:
        for rank, row in enumerate(result.rows, start=1):
            doc = str(row["id"])
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank)
    return sorted(scores, key=lambda d: -scores[d])


def ranking(**options: Any) -> Strategy:
    ranker = RankingSynthesizer(dedup_key="id", **options)

    def order(results: list[AdapterResult], query: str) -> list[str]:
        return unique_ids([r.row for r in ranker.rank(results, {"query": query})])
    return order


@lru_cache(maxsize=1)
def onnx_embedder() -> Any:
    """The real model (nautilus[embed]) shared by every run, or None without the extra."""
    try:
        from nautilus.embedders.onnx import OnnxEmbedder
        return OnnxEmbedder(cache_size=100_000)
    except ImportError:  # the extra is not installed (OnnxEmbedder says which part)
        return None


def strategies() -> dict[str, Strategy]:
    out = {"passthrough": passthrough, "round-robin": round_robin, "RRF k=60": rrf,
           "nautilus IDF off": ranking(idf=False), "nautilus IDF on": ranking(idf=True)}
    model = onnx_embedder()
    if model is not None:
        out["nautilus MiniLM (onnx) IDF off"] = ranking(idf=False, embedder=model)
        out["nautilus MiniLM (onnx) IDF on"] = ranking(idf=True, embedder=model)
    return out


def fetch(broker: Broker, collection: Collection) -> dict[str, list[AdapterResult]]:
    async def run() -> dict[str, list[AdapterResult]]:
        return {qid: await broker.fetch(text) for qid, text in collection.queries.items()}
    return asyncio.run(run())


def evaluate(collection: Collection, fetched: dict[str, list[AdapterResult]]
             ) -> dict[str, dict[str, list[float]]]:
    """Per strategy, per metric, one value per query (query order)."""
    out: dict[str, dict[str, list[float]]] = {}
    for name, strategy in strategies().items():
        per = out.setdefault(name, {"ndcg": [], "recall": []})
        for qid, results in fetched.items():
            ranked = strategy(results, collection.queries[qid])
            per["ndcg"].append(ndcg_at(ranked, collection.qrels[qid]))
            per["recall"].append(recall_at(ranked, collection.qrels[qid]))
    oracle = out.setdefault("oracle (upper bound)", {"ndcg": [], "recall": []})
    union_recall = []
    for qid, results in fetched.items():
        grades = collection.qrels[qid]
        union = passthrough(results, "")
        ideal = sorted(union, key=lambda d: -grades.get(d, 0))
        oracle["ndcg"].append(ndcg_at(ideal, grades))
        oracle["recall"].append(recall_at(ideal, grades))
        union_recall.append(recall_at(union, grades, None))
    out["_union"] = {"recall": union_recall}
    return out


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def quality_table(name: str, scenario: str, scores: dict[str, dict[str, list[float]]]) -> str:
    union = mean(scores["_union"]["recall"])
    n = len(scores["_union"]["recall"])
    lines = [f"**{name} — {scenario}** ({n} queries; union recall {union:.3f})", "",
             "| strategy | nDCG@10 | recall@10 | Δ nDCG@10 vs RRF [95% CI] |",
             "|---|---|---|---|"]
    baseline = scores["RRF k=60"]["ndcg"]
    for strategy, metric in scores.items():
        if strategy.startswith("_"):
            continue
        diffs = [a - b for a, b in zip(metric["ndcg"], baseline, strict=True)]
        delta, low, high = bootstrap_ci(diffs)
        shown = "—" if strategy == "RRF k=60" else f"{delta:+.3f} [{low:+.3f}, {high:+.3f}]"
        lines.append(f"| {strategy} | {mean(metric['ndcg']):.3f} | {mean(metric['recall']):.3f} "
                     f"| {shown} |")
    return "\n".join(lines)


def boost_safety(collection: Collection, fetched: dict[str, list[AdapterResult]],
                 max_candidates: int | None) -> list[tuple[str, str, float, float, float]]:
    """(source, level, boosted share of the top 10, others' recall@10 relative to no boost,
    nDCG@10) for every source and level, partitioned scenario."""
    rows = []
    for source in SOURCES:
        base_hits = None
        for level in LEVELS:
            ranker = RankingSynthesizer(idf=True, top_k=10, max_candidates=max_candidates,
                                        source_boosts={source: level} if level else None)
            share, hits, ndcg = 0.0, 0, 0.0
            for qid, results in fetched.items():
                grades = collection.qrels[qid]
                top = ranker.rank(results, {"query": collection.queries[qid]})
                share += sum(r.source_id == source for r in top) / max(len(top), 1)
                hits += sum(1 for r in top if r.source_id != source and str(r.row["id"]) in grades)
                ndcg += ndcg_at([str(r.row["id"]) for r in top], grades)
            if base_hits is None:
                base_hits = hits
            relative = hits / base_hits if base_hits else 1.0
            rows.append((source, level or "none", share / len(fetched), relative,
                         ndcg / len(fetched)))
    return rows


def safety_table(name: str, rows: list[tuple[str, str, float, float, float]],
                 cap: int | None) -> str:
    title = f"**{name} — boost safety, partitioned, IDF on, top 10"
    title += f", stage-1 cap {cap}**" if cap else "**"
    lines = [title, "", "| boosted source | level | its share of top 10 | others' recall@10 "
             "vs no boost | nDCG@10 |", "|---|---|---|---|---|"]
    lines += [f"| {s} | {lvl} | {share:.3f} | {rel:.3f} | {ndcg:.3f} |"
              for s, lvl, share, rel, ndcg in rows]
    return "\n".join(lines)


def run(datasets: Path, only: str | None) -> tuple[str, dict[str, Any]]:
    sections, summary = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in NAMES:
            if only and name != only:
                continue
            collection = load(name, datasets)
            for scenario in ("partitioned", "hybrid"):
                started = time.perf_counter()
                broker = build_broker(collection, scenario, Path(tmp) / name)
                fetched = fetch(broker, collection)
                scores = evaluate(collection, fetched)
                sections.append(quality_table(name, scenario, scores))
                summary[f"{name}/{scenario}"] = {k: mean(v["ndcg"]) for k, v in scores.items()
                                                 if not k.startswith("_")}
                if scenario == "partitioned":
                    for cap in (None, SAFETY_CAP):
                        sections.append(safety_table(
                            name, boost_safety(collection, fetched, cap), cap))
                print(f"{name}/{scenario}: {time.perf_counter() - started:.1f} s",
                      file=sys.stderr)
    return "\n\n".join(sections), summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DATASETS)
    parser.add_argument("--only", choices=NAMES)
    parser.add_argument("--out", type=Path, help="write the markdown tables here")
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite",
                        help="postgres: SQLite and PostgreSQL side by side (backends.py)")
    parser.add_argument("--dsn", help="with --backend postgres: this server, not an embedded one")
    args = parser.parse_args()
    configure_logging("warning", "console")
    if args.backend == "postgres":
        from backends import run as run_backends
        text = run_backends(args.datasets, args.only, args.dsn)
    else:
        text, _ = run(args.datasets, args.only)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
