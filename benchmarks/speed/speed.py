"""Speed benchmark: RankingSynthesizer.rank latency and throughput, against baselines
measured in the same run.

*Latency*: small requests (40 / 120 / 400 text rows over four sources, the default
hashing embedder, IDF on, top_k=10), p50 and p99 over many calls, on the machine as
it is ("quiet") and with one busy-looping process started by the benchmark ("busy").
*Throughput*: text rows (IDF on), rows carrying a 384-d vector as a numpy array or a
list of floats, and vectors handed over as one float32 matrix per source
(``AdapterResult.embeddings``, when the code under test has it). Baselines in the
same process, seconds apart: passthrough (``BasicSynthesizer.merge``), a naive
pure-Python ``Counter`` tf-idf ranker, and the plain-Python reference
implementation (``tools/reference.py``). Throughput timings are the best of several
repeats.

    python -m benchmarks.speed.speed [--out FILE.md] [--plot FILE.png] [--sizes 1000 10000 100000]
    python -m benchmarks.speed.speed --compare 739186b [--rounds 2]   # before/after, one machine

``--compare REV`` runs this same script twice per round in subprocesses: once
against a ``git archive`` copy of REV's ``nautilus`` package ("before") and once
against the working tree ("after"), and prints the tables side by side (the best
of the rounds for each number).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from nautilus_ranking import AdapterResult, BasicSynthesizer, RankingSynthesizer
from nautilus_ranking.log import configure_logging
from tools.reference import reference_rank
from tools.revisions import checkout, run_module
from tools.speed_batches import (
    DIM,
    HAS_MATRIX,
    LATENCY_SIZES,
    QUERY,
    TOP_K,
    split,
    split_matrix,
    text_rows,
    vector_rows,
)

ROOT = Path(__file__).resolve().parents[2]

LATENCY_CALLS = 400


# --- the naive baseline ------------------------------------------------------------------

_WORD = re.compile(r"\w+")


def naive_rank(results: list[AdapterResult], query: str, top_k: int) -> list[tuple[str, int]]:
    """What one would write first in pure Python: ``Counter`` term frequencies,
    batch ``log(N / df)`` IDF, cosine of tf-idf vectors, ``sorted``."""
    docs: list[tuple[str, int, Counter[str]]] = []
    for result in results:
        for position, row in enumerate(result.rows, start=1):
            text = " ".join(v for v in row.values() if isinstance(v, str))
            docs.append((result.source_id, position, Counter(_WORD.findall(text.lower()))))
    df: Counter[str] = Counter()
    for _, _, tf in docs:
        df.update(tf.keys())
    n = len(docs)
    idf = {term: math.log(n / count) + 1.0 for term, count in df.items()}
    q = Counter(_WORD.findall(query.lower()))
    q_vec = {t: c * idf.get(t, math.log(n + 1) + 1.0) for t, c in q.items()}
    q_norm = math.sqrt(sum(w * w for w in q_vec.values())) or 1.0
    scored = []
    for sid, position, tf in docs:
        norm = math.sqrt(sum((c * idf[t]) ** 2 for t, c in tf.items())) or 1.0
        dot = sum(w * tf[t] * idf[t] for t, w in q_vec.items() if t in tf)
        scored.append((dot / (norm * q_norm), sid, position))
    scored.sort(key=lambda s: -s[0])
    return [(sid, position) for _, sid, position in scored[:top_k]]


# --- timing ------------------------------------------------------------------------------


def best_time(call: Callable[[], object], budget_s: float = 2.0, max_repeats: int = 7) -> float:
    return best_times(call, budget_s, max_repeats)[0]


def best_times(
    call: Callable[[], object], budget_s: float = 2.0, max_repeats: int = 7
) -> tuple[float, float]:
    """The best wall time and the best CPU time (this process, all its threads) of a
    few calls. On a shared machine the CPU time moves much less than the wall time."""
    times: list[float] = []
    cpu: list[float] = []
    while len(times) < max_repeats and (len(times) < 2 or sum(times) < budget_s):
        gc.collect()
        started, started_cpu = time.perf_counter(), time.process_time()
        call()
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    return min(times), min(cpu)


def peak_memory_mb(call: Callable[[], object]) -> float:
    gc.collect()
    tracemalloc.start()
    call()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


@contextmanager
def other_core_busy(busy: bool) -> Iterator[None]:
    """A pure-Python busy loop in another process for the duration (the other core busy,
    as on a server that is doing something else as well)."""
    if not busy:
        yield
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)
        yield
    finally:
        spinner.kill()
        spinner.wait()


def latency(calls: int = LATENCY_CALLS) -> list[dict[str, Any]]:
    """p50 / p99 of one small rank() request, quiet and with the other core busy;
    the naive ranker's p50 on the same batch beside it."""
    out = []
    for busy in (False, True):
        with other_core_busy(busy):
            for n in LATENCY_SIZES:
                rng = np.random.default_rng(n)
                results = split(text_rows(n, rng))
                ranker = RankingSynthesizer(top_k=TOP_K, idf=True)
                context = {"query": QUERY}
                count = max(50, calls * 40 // n)
                for _ in range(10):  # warm caches (token and hash LRUs) as a server would be
                    ranker.rank(results, context)
                gc.collect()
                times, cpu = [], []
                for _ in range(count):
                    started, started_cpu = time.perf_counter(), time.process_time()
                    ranker.rank(results, context)
                    times.append(time.perf_counter() - started)
                    cpu.append(time.process_time() - started_cpu)
                naive = []
                for _ in range(max(20, count // 4)):
                    started = time.perf_counter()
                    naive_rank(results, QUERY, TOP_K)
                    naive.append(time.perf_counter() - started)
                p50, p99 = np.percentile(times, [50, 99])
                out.append(
                    {
                        "rows": n,
                        "busy": busy,
                        "calls": count,
                        "p50_s": float(p50),
                        "p99_s": float(p99),
                        "cpu_p50_s": float(np.median(cpu)),
                        "naive_p50_s": float(np.median(naive)),
                    }
                )
                print(
                    f"latency {n:>4} rows {'busy' if busy else 'quiet'}: p50 "
                    f"{p50 * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms",
                    file=sys.stderr,
                )
    return out


def measure(sizes: list[int]) -> list[dict[str, Any]]:
    rng = np.random.default_rng(0)
    query_vector = rng.normal(size=DIM)
    out = []
    kinds = ["text, IDF on", "numpy vectors", "list vectors"]
    if HAS_MATRIX:
        kinds.append("float32 matrix")
    for kind in kinds:
        for n in sizes:
            if kind == "text, IDF on":
                results = split(text_rows(n, rng))
                ranker = RankingSynthesizer(top_k=TOP_K, idf=True)
                context: dict[str, Any] = {"query": QUERY}
            else:
                results = (
                    split_matrix(n, rng)
                    if kind == "float32 matrix"
                    else split(vector_rows(n, rng, as_list=kind == "list vectors"))
                )
                ranker = RankingSynthesizer(top_k=TOP_K)
                context = {"embedding": query_vector}
            rank = partial(ranker.rank, results, context)
            ranked_s, ranked_cpu_s = best_times(rank)
            passthrough_s = best_time(partial(BasicSynthesizer().merge, results))
            reference_s = naive_s = naive_cpu_s = None
            if kind == "text, IDF on" and n <= 10_000:
                sources = [(r.source_id, r.rows) for r in results]
                reference_s = best_time(
                    partial(reference_rank, sources, QUERY, top_k=TOP_K, idf=True),
                    budget_s=0,
                    max_repeats=1,
                )
                # the best of four (no time budget: with budget_s=0, best_times stops at
                # two): two calls left its ratio at the machine's mercy
                naive_s, naive_cpu_s = best_times(
                    partial(naive_rank, results, QUERY, TOP_K), budget_s=math.inf, max_repeats=4
                )
            out.append(
                {
                    "kind": kind,
                    "rows": n,
                    "seconds": ranked_s,
                    "cpu_s": ranked_cpu_s,
                    "naive_cpu_s": naive_cpu_s,
                    "rows_per_s": n / ranked_s,
                    "passthrough_s": passthrough_s,
                    "reference_s": reference_s,
                    "naive_s": naive_s,
                    "peak_mb": peak_memory_mb(rank),
                }
            )
            print(f"{kind:>14} {n:>7}: {n / ranked_s:>12,.0f} rows/s", file=sys.stderr)
    return out


def demo_rows(n: int) -> list[dict[str, Any]]:
    """Real English rows (the bundled demo's tickets, runbooks and postmortems),
    cycled with a unique id so that every row is new to the cache."""
    demo = ROOT / "nautilus_ranking" / "demo"
    docs = [
        json.loads(line)
        for name in ("tickets", "runbooks", "postmortems")
        for line in (demo / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    return [{**docs[i % len(docs)], "id": f"row-{i}"} for i in range(n)]


def measure_model(counts: tuple[int, ...] = (30, 60, 100, 200, 300)) -> list[dict[str, Any]]:
    """rank() latency with the real model (nautilus-ranking[embed]) by candidate count, on
    real English rows: cold (every row new to the cache) and warm (all seen before)."""
    try:
        from nautilus_ranking.embedders.onnx import OnnxEmbedder
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
        print(
            f"   onnx {n:>5}: cold {cold * 1000:.0f} ms, warm {warm * 1000:.1f} ms", file=sys.stderr
        )
    return out


# --- tables ------------------------------------------------------------------------------


def model_table(results: list[dict[str, Any]]) -> str:
    if not results:
        return "(the embed extra is not installed: no model timings)"
    lines = ["| candidates scored | cold cache | rows/s cold | warm cache |", "|---|---|---|---|"]
    lines += [
        f"| {r['rows']} | {r['cold_s'] * 1000:,.0f} ms | {r['rows'] / r['cold_s']:,.0f} | "
        f"{r['warm_s'] * 1000:.1f} ms |"
        for r in results
    ]
    return "\n".join(lines)


def latency_table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| rows | machine | p50 | p99 | CPU time p50 | naive ranker p50 | × naive |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['rows']} | {'other core busy' if r['busy'] else 'as is'} | "
        f"{r['p50_s'] * 1000:.2f} ms | {r['p99_s'] * 1000:.2f} ms | "
        f"{r['cpu_p50_s'] * 1000:.2f} ms | "
        f"{r['naive_p50_s'] * 1000:.2f} ms | {r['naive_p50_s'] / r['p50_s']:.1f}× faster |"
        for r in results
    ]
    return "\n".join(lines)


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| rows | kind | rank() time | rows/s | × passthrough time | "
        "× naive tf-idf | × reference | peak memory |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        ref = f"{r['reference_s'] / r['seconds']:.0f}× faster" if r.get("reference_s") else "—"
        naive = f"{r['naive_s'] / r['seconds']:.1f}× faster" if r.get("naive_s") else "—"
        lines.append(
            f"| {r['rows']:,} | {r['kind']} | {r['seconds'] * 1000:.1f} ms | "
            f"{r['rows_per_s']:,.0f} | {r['seconds'] / r['passthrough_s']:,.0f} | "
            f"{naive} | {ref} | {r['peak_mb']:.1f} MiB |"
        )
    scaling = []
    for kind in dict.fromkeys(r["kind"] for r in results):
        by_n = {r["rows"]: r["seconds"] for r in results if r["kind"] == kind}
        if 10_000 in by_n and 100_000 in by_n:
            scaling.append(
                f"{kind}: 100k rows take {by_n[100_000] / by_n[10_000]:.1f}× the 10k time"
            )
    return "\n".join(lines) + ("\n\n" + "; ".join(scaling) + "." if scaling else "")


def plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    for kind in dict.fromkeys(r["kind"] for r in results):
        points = [(r["rows"], r["seconds"]) for r in results if r["kind"] == kind]
        axis.loglog(*zip(*points, strict=True), marker="o", label=f"rank(): {kind}")
    refs = [(r["rows"], r["naive_s"]) for r in results if r.get("naive_s")]
    if refs:
        axis.loglog(
            *zip(*refs, strict=True),
            marker="x",
            linestyle="--",
            label="naive pure-Python tf-idf (text)",
        )
    sizes = sorted({r["rows"] for r in results})
    base = min(r["seconds"] for r in results if r["rows"] == sizes[0])
    axis.loglog(
        sizes, [base * n / sizes[0] for n in sizes], color="grey", linestyle=":", label="linear"
    )
    axis.set_xlabel("rows ranked")
    axis.set_ylabel("seconds (best of repeats)")
    axis.set_title(f"nautilus rank() scaling, top_k={TOP_K}")
    axis.grid(True, which="both", alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path)


def machine() -> str:
    return (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, numpy {np.__version__}"
    )


# --- before / after ----------------------------------------------------------------------


def run_all(sizes: list[int], model_counts: tuple[int, ...]) -> dict[str, Any]:
    return {
        "latency": latency(LATENCY_CALLS) if LATENCY_CALLS else [],
        "throughput": measure(sizes) if sizes else [],
        "model": measure_model(model_counts),
    }


def _run(pythonpath: Path | None, args: list[str], out: Path) -> dict[str, Any]:
    run_module("benchmarks.speed.speed", ["--json", str(out), *args], pythonpath, check=True)
    data: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return data


def _best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per number, the best (smallest time) over the rounds; ratios recomputed from it."""
    best = json.loads(json.dumps(runs[0]))
    for section in ("latency", "throughput", "model"):
        for i, entry in enumerate(best[section]):
            for key in list(entry):
                if key.endswith("_s") or key == "seconds":
                    values = [r[section][i][key] for r in runs if r[section][i][key] is not None]
                    entry[key] = min(values) if values else None
            if "seconds" in entry:
                entry["rows_per_s"] = entry["rows"] / entry["seconds"]
    return best


def compare(rev: str, rounds: int, args: list[str]) -> str:
    with tempfile.TemporaryDirectory(prefix="nautilus-before-") as tmp:
        before_src = checkout(rev, Path(tmp))
        before_runs, after_runs = [], []
        for i in range(rounds):
            before_runs.append(_run(before_src, args, Path(tmp) / f"before{i}.json"))
            after_runs.append(_run(None, args, Path(tmp) / f"after{i}.json"))
    before, after = _best(before_runs), _best(after_runs)
    lines = [
        f"Machine: {machine()}. Before: `{rev}`; after: the working tree; "
        f"best of {rounds} round(s), each running both.",
        "",
        "| rows | machine | p50 before | p50 after | p99 before | p99 after | "
        "CPU p50 before | CPU p50 after | × naive before | × naive after |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for b, a in zip(before["latency"], after["latency"], strict=True):
        lines.append(
            f"| {a['rows']} | {'other core busy' if a['busy'] else 'as is'} | "
            f"{b['p50_s'] * 1000:.2f} ms | {a['p50_s'] * 1000:.2f} ms | "
            f"{b['p99_s'] * 1000:.2f} ms | {a['p99_s'] * 1000:.2f} ms | "
            f"{b['cpu_p50_s'] * 1000:.2f} ms | {a['cpu_p50_s'] * 1000:.2f} ms | "
            f"{b['naive_p50_s'] / b['p50_s']:.1f} | {a['naive_p50_s'] / a['p50_s']:.1f} |"
        )
    lines += [
        "",
        "| rows | kind | rank() before | rank() after | rows/s before | rows/s after | "
        "CPU before | CPU after | × naive before | × naive after | "
        "× naive, CPU, before | × naive, CPU, after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    before_by = {(b["kind"], b["rows"]): b for b in before["throughput"]}
    for a in after["throughput"]:
        b = before_by.get((a["kind"], a["rows"]))

        def naive(r: dict[str, Any] | None, cpu: bool = False) -> str:
            if not r or not r.get("naive_s"):
                return "—"
            if cpu:
                return f"{r['naive_cpu_s'] / r['cpu_s']:.1f}"
            return f"{r['naive_s'] / r['seconds']:.1f}"

        def cpu(r: dict[str, Any] | None) -> str:
            return f"{r['cpu_s'] * 1000:.1f} ms" if r else "—"

        before_s = f"{b['seconds'] * 1000:.1f} ms" if b else "—"
        before_rate = f"{b['rows_per_s']:,.0f}" if b else "—"
        lines.append(
            f"| {a['rows']:,} | {a['kind']} | {before_s} | "
            f"{a['seconds'] * 1000:.1f} ms | {before_rate} | {a['rows_per_s']:,.0f} | "
            f"{cpu(b)} | {cpu(a)} | {naive(b)} | {naive(a)} | "
            f"{naive(b, True)} | {naive(a, True)} |"
        )
    for label, data in (("before", before), ("after", after)):
        scaling = []
        for kind in dict.fromkeys(r["kind"] for r in data["throughput"]):
            by_n = {r["rows"]: r for r in data["throughput"] if r["kind"] == kind}
            if 10_000 in by_n and 100_000 in by_n:
                big, small = by_n[100_000], by_n[10_000]
                scaling.append(
                    f"{kind} {big['seconds'] / small['seconds']:.1f}× "
                    f"(CPU {big['cpu_s'] / small['cpu_s']:.1f}×)"
                )
        if scaling:
            lines += ["", f"100k rows / 10k rows time, {label}: " + ", ".join(scaling) + "."]
    if before["model"] and after["model"]:
        lines += [
            "",
            "| onnx candidates | cold before | cold after | warm before | warm after |",
            "|---|---|---|---|---|",
        ]
        for b, a in zip(before["model"], after["model"], strict=True):
            lines.append(
                f"| {a['rows']} | {b['cold_s'] * 1000:,.0f} ms | "
                f"{a['cold_s'] * 1000:,.0f} ms | {b['warm_s'] * 1000:.1f} ms | "
                f"{a['warm_s'] * 1000:.1f} ms |"
            )
    return "\n".join(lines)


def main() -> int:
    global LATENCY_CALLS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="*",
        default=[1_000, 10_000, 100_000],
        help="throughput batch sizes (none: skip)",
    )
    parser.add_argument(
        "--latency-calls",
        type=int,
        default=LATENCY_CALLS,
        help="calls per small-request size at 40 rows (0: skip latency)",
    )
    parser.add_argument("--model-counts", type=int, nargs="*", default=[30, 60, 100, 200, 300])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--plot", type=Path)
    parser.add_argument("--json", type=Path, help="write the raw numbers here (for --compare)")
    parser.add_argument(
        "--compare",
        metavar="REV",
        help="also run REV's nautilus (git archive) and print before/after",
    )
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    configure_logging("warning", "console")
    LATENCY_CALLS = args.latency_calls
    passed = [
        "--sizes",
        *map(str, args.sizes),
        "--model-counts",
        *map(str, args.model_counts),
        "--latency-calls",
        str(args.latency_calls),
    ]
    if args.compare:
        text = compare(args.compare, max(1, args.rounds), passed)
    else:
        data = run_all(args.sizes, tuple(args.model_counts))
        if args.json:
            args.json.write_text(json.dumps(data), encoding="utf-8")
            return 0
        text = (
            f"Machine: {machine()}.\n\n"
            + latency_table(data["latency"])
            + "\n\n"
            + table(data["throughput"])
            + "\n\n"
            + model_table(data["model"])
        )
        if args.plot:
            plot(data["throughput"], args.plot)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
