"""Boost safety of candidate stage-2 bump tables, on the four shared collections.

    python -m benchmarks.boost_safety [--vector onnx|hashing] [--bumps 0.005,0.01,0.02 ...]

For each collection (partitioned, three sources as in ``quality.py``; fetched
once) and each bump table (low, medium, high), with and without a candidate cap
of 45: the worst "others' recall@10 kept" at ``medium`` and ``high`` (the hijack
check: the other sources' relevant rows in the top 10 relative to no boost) and
the boosted source's share of the top 10. The table in ``ranking_boost.py`` was
chosen with it (docs/tuning.md, "Boost levels after the fusion").
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from types import MappingProxyType

from benchmarks import quality
from benchmarks.ir_collections import DATASETS, NAMES, load
from nautilus.embedders import HashingEmbedder
from nautilus.log import configure_logging
from nautilus.synthesis import boosts as ranking_boost
from nautilus.synthesis.boosts import BOOST_LEVELS, BoostWeights


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vector", choices=("onnx", "hashing"), default="onnx",
                        help="the vector source's embedder (onnx needs nautilus-ranking[embed])")
    parser.add_argument("--bumps", nargs="+", default=["0.005,0.01,0.02", "0.02,0.04,0.08"],
                        help="bump tables to compare, each 'low,medium,high'")
    parser.add_argument("--datasets", type=Path, default=DATASETS)
    args = parser.parse_args()
    configure_logging("error", "console")
    embedder = HashingEmbedder(dim=1024) if args.vector == "hashing" else quality.onnx_embedder()
    shipped = BOOST_LEVELS
    print("| collection | bumps (low/medium/high) | cap | worst kept, medium | worst kept, high "
          "| share of top 10: none → high |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        for name in NAMES:
            collection = load(name, args.datasets)
            broker = quality.build_broker(collection, "partitioned", Path(scratch) / name,
                                          embedder)
            fetched = quality.fetch(broker, collection)
            for table in args.bumps:
                low, medium, high = (float(x) for x in table.split(","))
                ranking_boost.BOOST_LEVELS = MappingProxyType({
                    level: BoostWeights(shipped[level].multiplier, bump)
                    for level, bump in zip(("low", "medium", "high"), (low, medium, high),
                                           strict=True)})
                try:
                    for cap in (None, 45):
                        rows = quality.boost_safety(collection, fetched, cap)
                        worst = {level: min(r[3] for r in rows if r[1] == level)
                                 for level in ("medium", "high")}
                        none = {r[0]: r[2] for r in rows if r[1] == "none"}
                        boosted = {r[0]: r[2] for r in rows if r[1] == "high"}
                        shares = ", ".join(f"{s} {none[s]:.2f} → {boosted[s]:.2f}"
                                           for s in quality.SOURCES)
                        print(f"| {name} | {table.replace(',', ' / ')} | {cap or 'none'} "
                              f"| {worst['medium']:.3f} | {worst['high']:.3f} | {shares} |",
                              flush=True)
                finally:
                    ranking_boost.BOOST_LEVELS = shipped
    return 0


if __name__ == "__main__":
    sys.exit(main())
