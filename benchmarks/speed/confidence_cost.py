"""What the confidence costs a request: the broker's whole request on real sources with
the confidence read (and an abstain judged) against the same request with it left out,
interleaved in one run.

The sources are ``benchmarks/quality/partitioned.py``'s (fts, sql, vector over one
shared collection, hybrid: 90 rows a query), the first ``--queries`` judged queries of
``--collection``, top 10, with the hashing embedder and, where the ``embed`` extra is
installed, the sentence model (its vectors from the disk cache after the first round).
Each round asks every query once per variant, the variants' order alternating; a
variant's time per query is its median over the rounds, and the table gives the p50
over queries and the ratio to the baseline, the bar being 1.02. On a loaded machine
those ratios move by several per cent from run to run, so the confidence step is also
timed alone (its median per request) and given as a share of the baseline's p50.

    python -m benchmarks.speed.confidence_cost [--collection cranfield] [--queries 40]
        [--rounds 7] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.quality.ir_collections import DATASETS, NAMES, load
from benchmarks.quality.partitioned import build_broker, onnx_embedder
from nautilus_ranking import RankingSynthesizer
from nautilus_ranking.embedders import embedder_from_name
from nautilus_ranking.log import configure_logging
from nautilus_ranking.selection import confidence
from nautilus_ranking.synthesis import batch_confidence

TOP_K = 10


@contextmanager
def without_confidence() -> Iterator[None]:
    """The ranking pass with the confidence left out (what it cost before it existed)."""
    saved = batch_confidence.estimate
    batch_confidence.estimate = lambda *args, **kwargs: None  # type: ignore[assignment]
    try:
        yield
    finally:
        batch_confidence.estimate = saved


@contextmanager
def timing_confidence(spent: list[float]) -> Iterator[None]:
    """The ranking pass with the time its confidence step takes appended to ``spent``."""
    saved = batch_confidence.estimate

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return saved(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - started)

    batch_confidence.estimate = timed  # type: ignore[assignment]
    try:
        yield
    finally:
        batch_confidence.estimate = saved


def measure(collection: str, queries: int, rounds: int, work: Path, name: str) -> dict[str, float]:
    data = load(collection, DATASETS)
    texts = list(data.queries.values())[:queries]
    vector = onnx_embedder() if name == "onnx" else None
    embedder = embedder_from_name(name, cache_size=100_000, data_dir=work, disk_cache_mb=256)
    broker = build_broker(data, "hybrid", work / name, vector)
    broker.synthesizer = RankingSynthesizer(top_k=TOP_K, embedder=embedder)
    times: dict[str, list[list[float]]] = {"without": [], "with": [], "abstain": []}
    with broker:
        for text in texts:  # warm: builds, caches, the model
            broker.request(text)
        for r in range(rounds):
            order = ["without", "with", "abstain"]
            if r % 2:
                order.reverse()
            for variant in order:
                broker.min_confidence = 0.12 if variant == "abstain" else None
                per_query = []
                for text in texts:
                    if variant == "without":
                        with without_confidence():
                            started = time.perf_counter()
                            broker.request(text)
                            per_query.append(time.perf_counter() - started)
                    else:
                        started = time.perf_counter()
                        broker.request(text)
                        per_query.append(time.perf_counter() - started)
                times[variant].append(per_query)
        spent: list[float] = []
        with timing_confidence(spent):
            for _ in range(rounds):
                for text in texts:
                    broker.request(text)
    medians = {
        v: [statistics.median(run[q] for run in runs) for q in range(len(texts))]
        for v, runs in times.items()
    }
    out = {v: statistics.median(m) * 1000 for v, m in medians.items()}
    out["step"] = statistics.median(spent) * 1000
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collection", default="cranfield", choices=NAMES)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--work-dir", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    configure_logging("error", "console")
    confidence.shipped_fits()  # read once, as a server does at its first request
    lines = [
        "| embedder | p50 without (ms) | p50 with the confidence (ms) | ratio "
        "| p50 judging an abstain (ms) | ratio | the confidence step, median (ms) "
        "| its share of the p50 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    names = ["hashing"] + (["onnx"] if onnx_embedder() is not None else [])
    with tempfile.TemporaryDirectory() as scratch:
        work = args.work_dir if args.work_dir is not None else Path(scratch)
        for name in names:
            p50: dict[str, Any] = measure(args.collection, args.queries, args.rounds, work, name)
            lines.append(
                f"| {name} | {p50['without']:.2f} | {p50['with']:.2f} "
                f"| {p50['with'] / p50['without']:.3f} | {p50['abstain']:.2f} "
                f"| {p50['abstain'] / p50['without']:.3f} | {p50['step']:.3f} "
                f"| {p50['step'] / p50['without']:.2%} |"
            )
            print(lines[-1], file=sys.stderr, flush=True)
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
