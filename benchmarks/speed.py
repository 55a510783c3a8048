"""Speed benchmark: RankingSynthesizer.rank throughput, against baselines in the same run.

Row kinds: text rows (IDF on, the hashing embedder), rows carrying a 384-d vector
as a numpy array, and the same as a list of floats. Baselines measured in the
same process, seconds apart: passthrough (``BasicSynthesizer.merge``) and the
plain-Python reference implementation (``tests/reference.py``, 1k and 10k rows
only — it is slow). Every timing is the best of several repeats.

    python benchmarks/speed.py [--out FILE.md] [--plot FILE.png] [--sizes 1000 10000 100000]
"""

from __future__ import annotations

import argparse
import gc
import platform
import sys
import time
import tracemalloc
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from reference import reference_rank  # noqa: E402

from nautilus import AdapterResult, BasicSynthesizer, RankingSynthesizer  # noqa: E402
from nautilus.log import configure_logging  # noqa: E402

DIM = 384
SOURCES = ("sql", "graph", "fts", "vector")
QUERY = "orders database replication lag after failover"
TOP_K = 10


def vocabulary(rng: np.random.Generator, size: int = 5000) -> list[str]:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    return ["".join(rng.choice(letters, rng.integers(3, 10))) for _ in range(size)] + \
        QUERY.split()


def text_rows(n: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    """Ticket-like rows: a title of 4-8 words and a body of 15-40, Zipf-distributed words."""
    words = vocabulary(rng)
    ranks = np.minimum(rng.zipf(1.3, size=n * 60), len(words)) - 1
    rows, at = [], 0
    for i in range(n):
        t, b = int(rng.integers(4, 9)), int(rng.integers(15, 41))
        pick = [words[j] for j in ranks[at:at + t + b]]
        at += t + b
        rows.append({"id": f"row-{i}", "title": " ".join(pick[:t]),
                     "text": " ".join(pick[t:]), "severity": "sev3"})
    return rows


def vector_rows(n: int, rng: np.random.Generator, as_list: bool) -> list[dict[str, Any]]:
    matrix = rng.normal(size=(n, DIM))
    return [{"id": f"row-{i}", "embedding": matrix[i].tolist() if as_list else matrix[i]}
            for i in range(n)]


def split(rows: list[dict[str, Any]]) -> list[AdapterResult]:
    return [AdapterResult(s, rows[i::len(SOURCES)]) for i, s in enumerate(SOURCES)]


def best_time(call: Callable[[], object], budget_s: float = 2.0, max_repeats: int = 7) -> float:
    times: list[float] = []
    while len(times) < max_repeats and (len(times) < 2 or sum(times) < budget_s):
        gc.collect()
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return min(times)


def peak_memory_mb(call: Callable[[], object]) -> float:
    gc.collect()
    tracemalloc.start()
    call()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


def measure(sizes: list[int]) -> list[dict[str, Any]]:
    rng = np.random.default_rng(0)
    query_vector = rng.normal(size=DIM)
    out = []
    for kind in ("text, IDF on", "numpy vectors", "list vectors"):
        for n in sizes:
            if kind == "text, IDF on":
                rows = text_rows(n, rng)
                ranker = RankingSynthesizer(top_k=TOP_K, idf=True)
                context: dict[str, Any] = {"query": QUERY}
            else:
                rows = vector_rows(n, rng, as_list=kind == "list vectors")
                ranker = RankingSynthesizer(top_k=TOP_K)
                context = {"embedding": query_vector}
            results = split(rows)
            rank = partial(ranker.rank, results, context)
            ranked_s = best_time(rank)
            passthrough_s = best_time(partial(BasicSynthesizer().merge, results))
            reference_s = None
            if kind == "text, IDF on" and n <= 10_000:
                sources = [(r.source_id, r.rows) for r in results]
                reference_s = best_time(partial(reference_rank, sources, QUERY, top_k=TOP_K,
                                                idf=True), budget_s=0, max_repeats=1)
            out.append({"kind": kind, "rows": n, "seconds": ranked_s,
                        "rows_per_s": n / ranked_s, "passthrough_s": passthrough_s,
                        "reference_s": reference_s, "peak_mb": peak_memory_mb(rank)})
            print(f"{kind:>14} {n:>7}: {n / ranked_s:>12,.0f} rows/s", file=sys.stderr)
    return out


def demo_rows(n: int) -> list[dict[str, Any]]:
    """Real English rows (the bundled demo's tickets, runbooks and postmortems),
    cycled with a unique id so that every row is new to the cache."""
    import json
    demo = ROOT / "nautilus" / "demo"
    docs = [json.loads(line) for name in ("tickets", "runbooks", "postmortems")
            for line in (demo / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()]
    return [{**docs[i % len(docs)], "id": f"row-{i}"} for i in range(n)]


def measure_model(counts: tuple[int, ...] = (30, 60, 100, 200, 300)) -> list[dict[str, Any]]:
    """rank() latency with the real model (nautilus[embed]) by candidate count, on
    real English rows: cold (every row new to the cache) and warm (all seen before)."""
    try:
        from nautilus.embedders.onnx import OnnxEmbedder
    except ImportError:
        return []
    out = []
    for n in counts:
        rows = demo_rows(n)
        embedder = OnnxEmbedder(cache_size=10_000)
        ranker = RankingSynthesizer(top_k=TOP_K, idf=True, embedder=embedder)
        embedder.embed(QUERY)  # load the model outside the timing
        results = split(rows)
        started = time.perf_counter()
        ranker.rank(results, {"query": QUERY})
        cold = time.perf_counter() - started
        warm = best_time(partial(ranker.rank, results, {"query": QUERY}))
        out.append({"rows": n, "cold_s": cold, "warm_s": warm})
        print(f"   onnx {n:>5}: cold {cold * 1000:.0f} ms, warm {warm * 1000:.1f} ms",
              file=sys.stderr)
    return out


def model_table(results: list[dict[str, Any]]) -> str:
    if not results:
        return "(the embed extra is not installed: no model timings)"
    lines = ["| candidates scored | cold cache | rows/s cold | warm cache |", "|---|---|---|---|"]
    lines += [f"| {r['rows']} | {r['cold_s'] * 1000:,.0f} ms | {r['rows'] / r['cold_s']:,.0f} | "
              f"{r['warm_s'] * 1000:.1f} ms |" for r in results]
    return "\n".join(lines)


def table(results: list[dict[str, Any]]) -> str:
    lines = ["| rows | kind | rank() time | rows/s | × passthrough time | "
             "speed-up vs reference | peak memory |", "|---|---|---|---|---|---|---|"]
    for r in results:
        ref = f"{r['reference_s'] / r['seconds']:.0f}×" if r["reference_s"] else "—"
        lines.append(f"| {r['rows']:,} | {r['kind']} | {r['seconds'] * 1000:.1f} ms | "
                     f"{r['rows_per_s']:,.0f} | {r['seconds'] / r['passthrough_s']:,.0f} | "
                     f"{ref} | {r['peak_mb']:.1f} MiB |")
    scaling = []
    for kind in dict.fromkeys(r["kind"] for r in results):
        by_n = {r["rows"]: r["seconds"] for r in results if r["kind"] == kind}
        if 10_000 in by_n and 100_000 in by_n:
            scaling.append(f"{kind}: 100k rows take {by_n[100_000] / by_n[10_000]:.1f}× "
                           "the 10k time")
    return "\n".join(lines) + ("\n\n" + "; ".join(scaling) + "." if scaling else "")


def plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    for kind in dict.fromkeys(r["kind"] for r in results):
        points = [(r["rows"], r["seconds"]) for r in results if r["kind"] == kind]
        axis.loglog(*zip(*points, strict=True), marker="o", label=f"rank(): {kind}")
    refs = [(r["rows"], r["reference_s"]) for r in results if r["reference_s"]]
    if refs:
        axis.loglog(*zip(*refs, strict=True), marker="x", linestyle="--",
                    label="plain-Python reference (text, IDF on)")
    sizes = sorted({r["rows"] for r in results})
    base = min(r["seconds"] for r in results if r["rows"] == sizes[0])
    axis.loglog(sizes, [base * n / sizes[0] for n in sizes], color="grey", linestyle=":",
                label="linear")
    axis.set_xlabel("rows ranked")
    axis.set_ylabel("seconds (best of repeats)")
    axis.set_title(f"nautilus rank() scaling, top_k={TOP_K}")
    axis.grid(True, which="both", alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path)


def machine() -> str:
    import os
    return (f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}, numpy {np.__version__}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--plot", type=Path)
    args = parser.parse_args()
    configure_logging("warning", "console")
    results = measure(args.sizes)
    text = (f"Machine: {machine()}.\n\n" + table(results) + "\n\n"
            + model_table(measure_model()))
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    if args.plot:
        plot(results, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
