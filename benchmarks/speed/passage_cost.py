"""What scoring long rows by their passages costs, beside scoring their first 128 pieces.

One process, the model (``embed`` extra) with its memory cache: 100 long rows (Cranfield
abstracts run together, 1,000-4,000 word pieces, ``long_rows.py``'s rows) and 100 short
ones (abstracts within the window). The rows are ranked once first (their vectors
cached: rows *seen before*); then each round asks a query not asked before (its own
vector made first, outside the timing), ranked both ways (by the first 128 pieces as
before passages, and by passages), the order of the two alternating. Wall time per call
(median over rounds), the ratio, and memory: the peak ``tracemalloc`` of one call and
the vectors the passages added to the cache.

    python -m benchmarks.speed.passage_cost [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable

from benchmarks.quality.ir_collections import DATASETS, load
from benchmarks.quality.long_rows import first_128, make_long_rows
from nautilus_ranking import AdapterResult, RankingSynthesizer
from nautilus_ranking.embedders.onnx import DIM, OnnxEmbedder
from nautilus_ranking.log import configure_logging
from nautilus_ranking.text.passage_windows import past_window

ROWS = 100


def timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def measure(rows: list[dict[str, str]], queries: list[str], model: OnnxEmbedder) -> list[str]:
    ranker = RankingSynthesizer(idf=True, embedder=model)
    results = [AdapterResult("docs", rows)]

    def rank(query: str) -> None:
        ranker.rank(results, {"query": query})

    with first_128():
        rank("seen before")  # the rows' own vectors cached
    before = len(model._cache)
    rank("seen before")  # their passages for that query too
    times: dict[str, list[float]] = {"first 128": [], "passages": []}
    for i, query in enumerate(queries):
        model.embed(query)  # the query's own vector cached: both ways rank, neither embeds it
        for way in ("first 128", "passages") if i % 2 else ("passages", "first 128"):
            if way == "first 128":
                with first_128():
                    times[way].append(timed(lambda q=query: rank(q)))
            else:
                times[way].append(timed(lambda q=query: rank(q)))
    added = len(model._cache) - before
    tracemalloc.start()
    rank(queries[0])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    old, new = statistics.median(times["first 128"]), statistics.median(times["passages"])
    return [
        f"first 128: {old * 1000:.1f} ms, passages: {new * 1000:.1f} ms, "
        f"{new / old:.2f}x (median of {len(queries)} new queries)",
        f"vectors the passages added to the cache: {added} "
        f"({added * DIM * 4 / 1e6:.1f} MB as float32); peak of one call {peak / 1e6:.1f} MB",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    configure_logging("ERROR")
    cranfield = load("cranfield", DATASETS)
    others = [load(n, DATASETS) for n in ("cisi",)]
    long = make_long_rows(cranfield, others, 40).collection.docs[:ROWS]
    short = [d for d in cranfield.docs if not past_window(f"{d['id']} {d['title']} {d['text']}")][
        :ROWS
    ]
    queries = list(cranfield.queries.values())[: args.rounds]
    for name, rows in (("100 long rows", long), ("100 short rows", short)):
        model = OnnxEmbedder(cache_size=100_000)
        print(f"{name}:", *measure(rows, queries, model), sep="\n  ", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
