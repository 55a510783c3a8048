"""What the per-source cap costs: ``rank()`` with ``max_per_source`` against the same
ranking without it, in the same run (a sibling of :mod:`benchmarks.speed.speed`, whose text
rows and sources it uses).

The request that found the cap quadratic: ``{"max_per_source": 1, "top_k": N}`` over N
rows (one block of all of them, one row of each source a round), and the same cap
paging by 10 (``page_size``: a block a page). Each cell is the best of several
repeats; the ratio is cap / no cap, the bar at 20,000 rows being 2.0.

    python -m benchmarks.speed.spread_cost [--sizes 1000 10000 20000] [--out FILE.md]
"""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.speed.speed import best_time
from nautilus_ranking import RankingSynthesizer
from nautilus_ranking.log import configure_logging
from tools.speed_batches import QUERY, split, text_rows

SIZES = (1_000, 10_000, 20_000)


def measure(sizes: tuple[int, ...]) -> list[dict[str, Any]]:
    out = []
    context = {"query": QUERY}
    for n in sizes:
        results = split(text_rows(n, np.random.default_rng(7)))
        plain = RankingSynthesizer(top_k=n)
        capped = RankingSynthesizer(top_k=n, max_per_source=1)
        paged = RankingSynthesizer(top_k=n, max_per_source=1, page_size=10)
        times = {
            name: best_time(partial(ranker.rank, results, context), budget_s=6.0)
            for name, ranker in (("plain", plain), ("capped", capped), ("paged", paged))
        }
        out.append({"rows": n, **times})
    return out


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| rows | no cap (s) | max_per_source=1, top_k=rows (s) | ratio "
        "| the cap, pages of 10 (s) | ratio |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['rows']:,} | {r['plain']:.3f} | {r['capped']:.3f} "
            f"| {r['capped'] / r['plain']:.2f}x | {r['paged']:.3f} "
            f"| {r['paged'] / r['plain']:.2f}x |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    args = parser.parse_args()
    configure_logging("WARNING", "console")
    text = table(measure(tuple(args.sizes)))
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
