"""What time as a signal costs a ranking: a batch of dated rows ranked with the decay
(and with supersession too) against the same batch ranked without, interleaved in one
run.

The batch: ``speed.py``'s ticket-like rows over four sources, each with a time under
``modified`` (ISO 8601 date-times with a zone, drawn over two years; ``--epoch`` for
epoch seconds instead), ids repeated across sources for a tenth of the rows (revisions
for supersession to find). The baseline ranks the very same rows with time off, so the
rows' text is the same in every variant and only what time adds is measured. Each round
ranks once per variant, the order alternating; the figure is the median CPU time per
variant, and the ratio to the baseline (the bar: 1.1 at 10,000 rows).

    python -m benchmarks.speed.recency_cost [--rows 10000] [--rounds 15] [--epoch]
        [--busy] [--embedder hashing]
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import time
from typing import Any

import numpy as np

from benchmarks.speed.speed import other_core_busy
from nautilus_ranking import AdapterResult, RankingSynthesizer
from nautilus_ranking.embedders import embedder_from_name
from nautilus_ranking.log import configure_logging
from tools.speed_batches import SOURCES, text_rows

QUERY = "orders database replication lag after failover"
START = dt.datetime(2024, 12, 1, tzinfo=dt.UTC).timestamp()
SPAN = 2 * 365 * 86_400


def dated_batch(n: int, epoch: bool, seed: int = 58) -> list[AdapterResult]:
    rng = np.random.default_rng(seed)
    rows = text_rows(n, rng)
    times = START + rng.integers(0, SPAN, size=n)
    revised = rng.choice(n, size=n // 10, replace=False)
    for i, row in enumerate(rows):
        at = int(times[i])
        row["modified"] = (
            at if epoch else dt.datetime.fromtimestamp(at, dt.UTC).isoformat(timespec="seconds")
        )
    for j, i in enumerate(revised.tolist()):  # another source's row takes this row's id
        rows[(i + 1) % n]["id"] = rows[i]["id"] if j % 2 else rows[(i + 1) % n]["id"]
    return [AdapterResult(s, rows[k :: len(SOURCES)]) for k, s in enumerate(SOURCES)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--epoch", action="store_true")
    parser.add_argument("--busy", action="store_true", help="the other core busy")
    parser.add_argument("--embedder", default="hashing")
    args = parser.parse_args()
    configure_logging("ERROR")
    results = dated_batch(args.rows, args.epoch)
    embedder = embedder_from_name(args.embedder)
    paths = {s: "modified" for s in SOURCES}
    variants: dict[str, RankingSynthesizer] = {
        "time off": RankingSynthesizer(top_k=10, embedder=embedder, time_fields=paths),
        "recency": RankingSynthesizer(
            top_k=10, embedder=embedder, time_fields=paths, recency="half_life:90d"
        ),
        "recency + supersede": RankingSynthesizer(
            top_k=10,
            embedder=embedder,
            time_fields=paths,
            recency="half_life:90d",
            supersede=True,
        ),
    }
    context: dict[str, Any] = {"query": QUERY}
    for ranker in variants.values():  # warm: caches, imports
        ranker.rank(results, context)
    times: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    with other_core_busy(args.busy):
        for round_ in range(args.rounds):
            for name in names if round_ % 2 == 0 else reversed(names):
                started = time.process_time()
                variants[name].rank(results, context)
                times[name].append(time.process_time() - started)
    base = statistics.median(times["time off"])
    kind = "epoch seconds" if args.epoch else "ISO 8601 strings"
    print(
        f"{args.rows} rows ({kind}), {args.embedder}, {args.rounds} interleaved rounds"
        + (", the other core busy" if args.busy else "")
    )
    print("| variant | median CPU ms | ratio to time off |\n|---|---|---|")
    for name in names:
        median = statistics.median(times[name])
        print(f"| {name} | {1000 * median:.1f} | {median / base:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
