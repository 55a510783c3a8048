"""What one alternative of ``eval --sweep`` costs, before and after the sweep counted repeats
and p-values.

    python -m benchmarks.speed.eval_sweep_cost [--datasets DIR] [--work-dir DIR] [--rounds 5]

Each collection named is served as ``nautilus-ranking eval`` serves it (fts, sql and vector,
partitioned, the hashing embedder) and fetched once; the current settings are IDF on.
Per alternative of the sweep, in one run and interleaved:

* **before**: what the sweep did per alternative before: rank every query and score it
  (``score(..., count_repeats=False)``) and its paired bootstrap interval;
* **after**: the same with the repeats in the top 10 counted (``score``), and the interval
  and the one-sided sign-flip p-value (``paired_test``).

Reported: the CPU time per alternative (the minimum over ``--rounds`` of the mean over
the alternatives) and the ratio after / before. The bar: at most 1.5.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.quality.ir_collections import DATASETS
from benchmarks.quality.recommend_rule import fetched
from nautilus_ranking.embedders import HashingEmbedder
from nautilus_ranking.evaluation.alternatives import alternatives
from nautilus_ranking.evaluation.sweep import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    paired_test,
    score,
)
from nautilus_ranking.log import configure_logging
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.source_settings import applied_settings

COLLECTIONS = ("adi", "cisi")
K = 10


def interval_only(diffs: np.ndarray) -> tuple[float, float, float]:
    """The paired bootstrap interval as the sweep computed it before (no sign flips)."""
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    idx = rng.integers(0, len(diffs), size=(BOOTSTRAP_RESAMPLES, len(diffs)))
    low, high = np.percentile(diffs[idx].mean(axis=1), [2.5, 97.5])
    return float(diffs.mean()), float(low), float(high)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DATASETS)
    parser.add_argument("--work-dir", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    configure_logging("error", "console")
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="eval-sweep-cost-"))
    settings = NautilusSettings(data_dir=work / "data", ranking_idf=True)
    print("| collection | queries | alternatives | before, ms | after, ms | after / before |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in COLLECTIONS:
        runs, sources = fetched(args.datasets / name, work, settings)
        current = applied_settings(settings, sources)
        alts = alternatives(current, sources, HashingEmbedder(), sweep=True, k=K)
        base = score(alts[0], runs, sources, "id", K).ndcg
        best = {"before": float("inf"), "after": float("inf")}
        for _ in range(args.rounds):
            spent = {"before": 0.0, "after": 0.0}
            for alt in alts:
                for way in ("before", "after"):
                    started = time.process_time()
                    entry = score(alt, runs, sources, "id", K, count_repeats=way == "after")
                    diffs = entry.ndcg - base
                    paired_test(diffs) if way == "after" else interval_only(diffs)
                    spent[way] += time.process_time() - started
            for way, total in spent.items():
                best[way] = min(best[way], total / len(alts))
        before, after = best["before"] * 1000, best["after"] * 1000
        print(
            f"| {name} | {len(runs)} | {len(alts)} | {before:.1f} | {after:.1f} "
            f"| {after / before:.2f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
