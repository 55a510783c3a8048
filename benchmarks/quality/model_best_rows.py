"""The model on a batch's best rows by words: what ``NAUTILUS_EMBEDDER_MAX_ROWS`` costs in
nDCG@10 and saves in time.

Quality: the cells of ``idf_default.py`` (each shared collection in both layouts, sources
undeclared, text mode), ranked by the model with IDF on (the default), once embedding
every row and once per candidate N embedding only the N best by the lexical score; the
loss is the mean nDCG@10 difference per cell. Time: one batch of 1,000 distinct rows
(Cranfield's documents) ranked with every row embedded and with the N best only, the
model's caches off so every row is embedded anew, interleaved repeats.

    python -m benchmarks.quality.model_best_rows [--work-dir DIR] [--sizes 20,30,50,75]
                                                 [--depth 100]

``--depth D``: each source asked for D rows instead of ``partitioned.py``'s 30 (batches of
about 3D rows), fetched into ``--work-dir`` and reused.
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.quality.confidence_fit import (
    SCENARIOS,
    TOP_K,
    ensure_fetched,
    fetched_path,
    own_answers,
    text_mode,
)
from benchmarks.quality.ir_collections import DATASETS, Collection, each_collection, ndcg_at
from benchmarks.quality.partitioned import SOURCE_LIMIT, build_broker, fetch, onnx_embedder
from nautilus_ranking import AdapterResult, RankingSynthesizer
from nautilus_ranking.embedders import embedder_from_name
from nautilus_ranking.log import configure_logging


def ranker(embedder: object, max_rows: int) -> RankingSynthesizer:
    return RankingSynthesizer(top_k=TOP_K, idf=True, embedder=embedder, embedding_max_rows=max_rows)


def fetched_at(work: Path, collection: Collection, scenario: str, depth: int) -> Path:
    """The own queries' answers with each source asked for ``depth`` rows (cached)."""
    folder = work / "onnx" / collection.name
    if depth == SOURCE_LIMIT:
        return fetched_path(work, "onnx", collection.name, scenario)
    path = folder / f"{scenario}-fetched-{depth}.pickle"
    if not path.is_file():
        broker = build_broker(collection, scenario, folder, onnx_embedder())
        broker.limit = depth
        with broker:
            answers = fetch(broker, collection)
        with path.open("wb") as handle:
            pickle.dump({"own": answers}, handle)
    return path


def quality(work: Path, datasets: Path, sizes: list[int], depth: int) -> list[str]:
    collections = {c.name: c for c in each_collection(datasets)}
    ensure_fetched(datasets, work, "onnx", collections)
    embedder = embedder_from_name(
        "onnx", cache_size=200_000, data_dir=work / "vectors", disk_cache_mb=512
    )
    lines = [
        "| cell | rows a query | every row | " + " | ".join(f"N = {n}: Δ" for n in sizes) + " |",
        "|---|---|---|" + "---|" * len(sizes),
    ]
    worst = dict.fromkeys(sizes, 0.0)
    for cname, collection in collections.items():
        for scenario in SCENARIOS:
            fetched = own_answers(fetched_at(work, collection, scenario, depth))
            scores: dict[int, list[float]] = {n: [] for n in [0, *sizes]}
            rows_per_query = []
            for qid, results in sorted(fetched.items()):
                plain = text_mode(results)
                rows_per_query.append(sum(len(r.rows) for r in plain))
                grades = collection.qrels.get(qid, {})
                for n in scores:
                    rows = ranker(embedder, n).rank(plain, {"query": collection.queries[qid]})
                    ids = [str(r.row.get("id")) for r in rows]
                    scores[n].append(ndcg_at(ids, grades, TOP_K))
            full = float(np.mean(scores[0]))
            deltas = {n: float(np.mean(scores[n])) - full for n in sizes}
            for n in sizes:
                worst[n] = min(worst[n], deltas[n])
            lines.append(
                f"| {cname}, {scenario} | {statistics.median(rows_per_query):.0f} | {full:.4f} | "
                + " | ".join(f"{deltas[n]:+.4f}" for n in sizes)
                + " |"
            )
            print(lines[-1], file=sys.stderr, flush=True)
    lines.append("| worst cell | | | " + " | ".join(f"{worst[n]:+.4f}" for n in sizes) + " |")
    return lines


def timing(datasets: Path, sizes: list[int], repeats: int = 3) -> list[str]:
    collection = next(iter(each_collection(datasets, only="cranfield")))
    docs = collection.docs[:1000]
    query = next(iter(collection.queries.values()))
    times: dict[int, list[float]] = {n: [] for n in [0, *sizes]}
    for repeat in range(repeats):
        for n in times:
            embedder = embedder_from_name("onnx", cache_size=0, disk_cache_mb=0)
            rows = [
                {"id": d["id"], "title": d["title"], "text": f"{d['text']} {repeat}"} for d in docs
            ]
            started = time.perf_counter()
            ranker(embedder, n).rank([AdapterResult("docs", rows)], {"query": query})
            times[n].append(time.perf_counter() - started)
    full = statistics.median(times[0])
    return [
        "",
        f"1,000 rows, every row embedded: {full:.2f} s (median of {repeats})",
        *(
            f"N = {n}: {statistics.median(times[n]):.2f} s, "
            f"{statistics.median(times[n]) / full:.2f}x"
            for n in sizes
        ),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DATASETS)
    parser.add_argument("--work-dir", type=Path, default=None)
    parser.add_argument("--sizes", default="20,30,50,75")
    parser.add_argument("--depth", type=int, default=SOURCE_LIMIT)
    args = parser.parse_args()
    configure_logging("ERROR")
    sizes = [int(x) for x in args.sizes.split(",")]
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="model-best-rows-"))
    print("\n".join(quality(work, args.datasets, sizes, args.depth) + timing(args.datasets, sizes)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
