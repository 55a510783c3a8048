"""Token budget cost on a 40-row request, and the estimate against the exact count.

A request's 40 ranked rows (cranfield documents as three sources' rows, ranked with
IDF on, top 40) are counted and fitted to a budget the way the broker does it:
``entry_text`` of each row (the serialisation a transport does anyway; shown apart),
then ``count_tokens`` (o200k_base with the ``tokens`` extra, the over-estimate without)
and ``fit_counts``. Each is timed per request (median over the queries, several rounds)
and set against ranking the same request in the same run. The first count in a process
loads the vocabulary; that one-off cost is shown on its own.

Then the estimate against o200k_base on every shared corpus's rows (serialised as
``{"id", "title", "text"}``): its ratio's minimum, median and maximum, and how many rows
it counts under.

    python -m benchmarks.speed.token_budget [--datasets DIR] [--queries N] [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.quality.ir_collections import DATASETS, NAMES, load
from nautilus_ranking import AdapterResult, RankingSynthesizer
from nautilus_ranking.selection import tokens
from nautilus_ranking.selection.budget import entry_text, fit_counts
from nautilus_ranking.selection.tokens import count_tokens, estimate_tokens

ROWS = 40
BUDGET = 4096


def per_request(fn: Callable[[], Any], rounds: int) -> float:
    """The fastest of ``rounds`` timings of ``fn``, in µs (the machine is shared)."""
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best * 1e6


def requests(datasets: Path, queries: int) -> list[tuple[list[AdapterResult], str]]:
    collection = load("cranfield", datasets)
    docs = collection.docs
    out = []
    for n, (_, text) in enumerate(list(collection.queries.items())[:queries]):
        start = (n * 97) % (len(docs) - 90)
        chosen = docs[start : start + 90]
        out.append(
            (
                [
                    AdapterResult(sid, chosen[i::3], ranked=True)
                    for i, sid in enumerate(("fts", "sql", "vector"))
                ],
                text,
            )
        )
    return out


def one_request(
    ranker: RankingSynthesizer, results: list[AdapterResult], query: str, rounds: int, exact: bool
) -> dict[str, float]:
    """Each step's µs on one request (exact counts only with the extra)."""
    context = {"query": query}
    ranked = ranker.rank(results, context)
    texts = [entry_text(r) for r in ranked]
    counts = count_tokens(texts, exact=False)
    out = {
        "rank (baseline)": per_request(lambda: ranker.rank(results, context), rounds),
        "serialise 40 rows (entry_text)": per_request(
            lambda: [entry_text(r) for r in ranked], rounds
        ),
    }
    if exact:
        out["count, o200k_base"] = per_request(lambda: count_tokens(texts, exact=True), rounds)
    out["count, estimate"] = per_request(lambda: count_tokens(texts, exact=False), rounds)
    out["fit_counts"] = per_request(lambda: fit_counts(counts, BUDGET), rounds)
    if exact:
        out["budget: count o200k_base + fit"] = per_request(
            lambda: fit_counts(count_tokens(texts, exact=True), BUDGET), rounds
        )
    out["budget: estimate + fit"] = per_request(
        lambda: fit_counts(count_tokens(texts, exact=False), BUDGET), rounds
    )
    return out


def timings(datasets: Path, queries: int, rounds: int) -> str:
    started = time.perf_counter()
    exact = tokens.exact_available()  # loads the vocabulary once
    load_ms = (time.perf_counter() - started) * 1e3
    ranker = RankingSynthesizer(top_k=ROWS, idf=True)
    parts: dict[str, list[float]] = {}
    sizes = []
    for results, query in requests(datasets, queries):
        for name, value in one_request(ranker, results, query, rounds, exact).items():
            parts.setdefault(name, []).append(value)
        sizes.append(sum(len(entry_text(r)) for r in ranker.rank(results, {"query": query})))
    base = statistics.median(parts["rank (baseline)"])
    lines = [
        f"**Token budget cost** ({ROWS} rows a request, {len(sizes)} cranfield queries, "
        f"median row text {statistics.median(sizes) / ROWS:.0f} characters; per request: "
        f"the median over the queries of the best of {rounds} rounds)",
        "",
        "| step | µs per request | ÷ ranking the request |",
        "|---|---|---|",
    ]
    for name, values in parts.items():
        if values:
            median = statistics.median(values)
            lines.append(f"| {name} | {median:.1f} | {median / base:.3f} |")
    lines += [
        "",
        f"Loading the o200k_base vocabulary, once per process: {load_ms:.0f} ms"
        if exact
        else "The tokens extra is not installed: exact counts not measured.",
    ]
    return "\n".join(lines)


def estimate_table(datasets: Path) -> str:
    if not tokens.exact_available():
        return "(the estimate is compared with o200k_base only with the tokens extra)"
    lines = [
        "**The estimate against o200k_base** (each corpus's documents as "
        '`{"id","text","title"}` rows)',
        "",
        "| corpus | rows | estimate ÷ o200k_base: min | median | max | rows under |",
        "|---|---|---|---|---|---|",
    ]
    for name in NAMES:
        docs = load(name, datasets).docs
        texts = [json.dumps(d, sort_keys=True, separators=(",", ":")) for d in docs]
        exact = count_tokens(texts, exact=True)
        ratios = sorted(estimate_tokens(t) / n for t, n in zip(texts, exact, strict=True) if n)
        under = sum(r < 1 for r in ratios)
        lines.append(
            f"| {name} | {len(texts)} | {ratios[0]:.2f} | "
            f"{statistics.median(ratios):.2f} | {ratios[-1]:.2f} | {under} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DATASETS)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    print(timings(args.datasets, args.queries, args.rounds))
    print()
    print(estimate_table(args.datasets))
    return 0


if __name__ == "__main__":
    sys.exit(main())
