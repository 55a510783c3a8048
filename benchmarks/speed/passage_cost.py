"""What scoring long rows by their passages costs, beside scoring their first 128 pieces.

One process, the model (``embed`` extra) with its memory cache: 100 long rows (Cranfield
abstracts run together, 1,000-4,000 word pieces, ``long_rows.py``'s rows) and 100 short
ones (abstracts within the window). The rows are ranked once first, both ways (their
vectors and their passages' cached: rows *seen before*); then each round asks a query
not asked before (its own vector made first, outside the timing), ranked both ways (by
the first 128 pieces as before passages, and by passages), the order of the two
alternating from one round to the next, the other core busy with a busy-looping process
(``--quiet``: not). A round on the long rows is one call each way (a new query's first
call: it embeds those of its best passages by words never embedded before); on the short
rows, whose calls all do the same work, :data:`SHORT` calls each way, alternating, the
best of them kept (a difference of a few tenths of a millisecond in 25 needs the load
taken out). Per way the median wall time of a call; the ratio is the median of
the rounds' paired ratios (passages / first 128), with a 95% bootstrap interval of that
median (2,000 resamples of the rounds, seeded). Memory: the peak ``tracemalloc`` of one
call each way, the long rows' records the passages keep (``passage_rows.py``: rows,
bytes, and their bound) and the vectors the passages added to the model's cache.

    python -m benchmarks.speed.passage_cost [--rounds 100] [--quiet] [--work-dir DIR]

``--work-dir`` keeps the model's vectors on disk (a vector cache file), so that a second
run skips embedding the rows' passages the first time they are seen (a few minutes on a
loaded 2-core machine; the measured rounds read the memory cache either way).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks.quality.ir_collections import DATASETS, load
from benchmarks.quality.long_rows import first_128, make_long_rows
from benchmarks.speed.speed import other_core_busy
from nautilus_ranking import AdapterResult, RankingSynthesizer
from nautilus_ranking.embedders.onnx import DIM, OnnxEmbedder
from nautilus_ranking.embedders.vector_cache import VectorCache
from nautilus_ranking.log import configure_logging
from nautilus_ranking.synthesis.passage_rows import KEPT_BYTES, kept_rows
from nautilus_ranking.text.passage_windows import past_window

ROWS = 100
WAYS = ("first 128", "passages")
RESAMPLES = 2_000
#: Calls of each way a round on the short rows, alternating, the best kept: their work
#: is the same on every call, and the best of several is what the load leaves of it.
SHORT = 9


def timed(call: Callable[[], object]) -> float:
    gc.collect()  # a collection owed by one call is not charged to the next
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def peak_mb(call: Callable[[], object]) -> float:
    tracemalloc.start()
    call()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 1e6


def ratio_interval(ratios: list[float]) -> tuple[float, float, float]:
    """The median of the paired ratios and a 95% bootstrap interval of it."""
    values = np.array(ratios)
    draws = np.random.default_rng(0).integers(0, len(values), (RESAMPLES, len(values)))
    low, high = np.percentile(np.median(values[draws], axis=1), [2.5, 97.5])
    return float(np.median(values)), float(low), float(high)


def measure(
    rows: list[dict[str, str]], queries: list[str], model: OnnxEmbedder, busy: bool, repeats: int
) -> list[str]:
    ranker = RankingSynthesizer(idf=True, embedder=model)
    results = [AdapterResult("docs", rows)]

    def rank(way: str, query: str) -> Callable[[], object]:
        def call() -> object:
            if way == "first 128":
                with first_128():
                    return ranker.rank(results, {"query": query})
            return ranker.rank(results, {"query": query})

        return call

    for way in WAYS:  # the rows seen: their vectors and their passages' cached
        rank(way, "seen before")()
    before = len(model._cache)
    times: dict[str, list[float]] = {way: [] for way in WAYS}
    with other_core_busy(busy):
        for i, query in enumerate(queries):
            model.embed(query)  # the query's own vector cached: neither way embeds it
            calls: dict[str, list[float]] = {way: [] for way in WAYS}
            for r in range(repeats):
                for way in WAYS if (i + r) % 2 else WAYS[::-1]:
                    calls[way].append(timed(rank(way, query)))
            for way in WAYS:
                times[way].append(min(calls[way]))
    added = len(model._cache) - before
    peaks = {way: peak_mb(rank(way, queries[0])) for way in WAYS}
    ratio, low, high = ratio_interval(
        [new / old for old, new in zip(times["first 128"], times["passages"], strict=True)]
    )
    old, new = statistics.median(times["first 128"]), statistics.median(times["passages"])
    return [
        f"first 128: {old * 1000:.1f} ms, passages: {new * 1000:.1f} ms (medians of "
        f"{len(queries)} new queries)",
        f"passages / first 128: {ratio:.3f}x, 95% interval {low:.3f}-{high:.3f} "
        "(median of the paired ratios, bootstrap)",
        f"peak of one call: first 128 {peaks['first 128']:.1f} MB, "
        f"passages {peaks['passages']:.1f} MB",
        f"vectors the new queries' passages added to the model's cache: {added} "
        f"({added * DIM * 4 / 1e6:.1f} MB as float32)",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100, help="new queries (at most 225)")
    parser.add_argument("--quiet", action="store_true", help="the other core left as it is")
    parser.add_argument("--work-dir", type=Path, default=None)
    args = parser.parse_args()
    configure_logging("ERROR")
    cranfield = load("cranfield", DATASETS)
    others = [load(n, DATASETS) for n in ("cisi",)]
    long = make_long_rows(cranfield, others, 40).collection.docs[:ROWS]
    short = [d for d in cranfield.docs if not past_window(f"{d['id']} {d['title']} {d['text']}")][
        :ROWS
    ]
    queries = list(cranfield.queries.values())[: args.rounds]
    disk = None
    if args.work_dir is not None:
        args.work_dir.mkdir(parents=True, exist_ok=True)
        disk = VectorCache(args.work_dir / "passage_cost_vectors.sqlite", 500_000_000, DIM)
    busy = "" if args.quiet else ", the other core busy"
    print(f"{len(queries)} rounds, each way in alternating order{busy}:")
    for name, rows, repeats in (("100 long rows", long, 1), ("100 short rows", short, SHORT)):
        model = OnnxEmbedder(cache_size=100_000, disk_cache=disk)
        lines = measure(rows, queries, model, not args.quiet, repeats)
        print(f"{name}:", *lines, sep="\n  ", flush=True)
        if name == "100 long rows":
            kept, kept_bytes = kept_rows()
            print(
                f"  long rows' records kept: {kept} rows, {kept_bytes / 1e6:.1f} MB "
                f"(bound {KEPT_BYTES / 2**20:.0f} MiB, least recently used out first)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
