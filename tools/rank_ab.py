"""Quick before/after of rank(): CPU time per call on the speed benchmark's batches,
REV and the working tree alternating in subprocesses, the minimum over calls and
rounds (on a shared machine the CPU minimum moves far less than wall times).

    python -m tools.rank_ab --rev 0f8c8e0 [--rounds 4] [text40 text400 ...]

Cases: text40, text400 (IDF on, top 10), text10k, np10k (numpy vectors), mat10k
(one float32 matrix per source; needs ``AdapterResult.embeddings`` on both sides);
default40, default400: the text40 and text400 batches under the default settings with
only ``NAUTILUS_RANKING_TOP_K=10`` set (the ranker ``from_settings`` builds: IDF off,
the default lexical scorer), what an operator who sets one knob gets.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tools.revisions import checkout, run_module

CASES = ("text40", "text400", "text10k", "np10k", "mat10k", "default40", "default400")


def measure(names: list[str]) -> dict[str, float]:
    """Minimum CPU milliseconds of one rank() call per case (run in a subprocess)."""
    import numpy as np

    from nautilus_ranking import RankingSynthesizer
    from nautilus_ranking.log import configure_logging
    from nautilus_ranking.settings.model import NautilusSettings
    from tools import speed_batches as speed

    configure_logging("error", "console")
    query_vector = np.random.default_rng(0).normal(size=speed.DIM)
    text = {"query": speed.QUERY}
    vector = {"embedding": query_vector}
    # kwargs None: the ranker the default settings build, with only the top K set.
    cases: dict[str, tuple[Any, dict[str, Any] | None, dict[str, Any], int]] = {
        "text40": (
            speed.split(speed.text_rows(40, np.random.default_rng(40))),
            {"top_k": 10, "idf": True},
            text,
            300,
        ),
        "text400": (
            speed.split(speed.text_rows(400, np.random.default_rng(400))),
            {"top_k": 10, "idf": True},
            text,
            60,
        ),
        "text10k": (
            speed.split(speed.text_rows(10_000, np.random.default_rng(1))),
            {"top_k": 10, "idf": True},
            text,
            5,
        ),
        "np10k": (
            speed.split(speed.vector_rows(10_000, np.random.default_rng(2), False)),
            {"top_k": 10},
            vector,
            10,
        ),
        "mat10k": (speed.split_matrix(10_000, np.random.default_rng(3)), {"top_k": 10}, vector, 10),
        "default40": (speed.split(speed.text_rows(40, np.random.default_rng(40))), None, text, 300),
        "default400": (
            speed.split(speed.text_rows(400, np.random.default_rng(400))),
            None,
            text,
            60,
        ),
    }
    out = {}
    for name in names:
        results, kwargs, context, calls = cases[name]
        ranker = (
            RankingSynthesizer(**kwargs)
            if kwargs is not None
            else RankingSynthesizer.from_settings(NautilusSettings(ranking_top_k=10))
        )
        for _ in range(3):  # warm the caches, as a server's would be
            ranker.rank(results, context)
        best = float("inf")
        for _ in range(calls):
            started = time.process_time()
            ranker.rank(results, context)
            best = min(best, time.process_time() - started)
        out[name] = best * 1000
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help=f"some of {', '.join(CASES)} (default: all)")
    parser.add_argument("--rev", default="0f8c8e0", help="the 'before' revision")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    names = args.cases or list(CASES)
    unknown = sorted(set(names) - set(CASES))
    if unknown:
        parser.error(f"unknown case(s) {unknown} (valid: {', '.join(CASES)})")
    if args.child:
        json.dump(measure(names), sys.stdout)
        return 0
    best: dict[str, dict[str, float]] = {"before": {}, "after": {}}
    with tempfile.TemporaryDirectory(prefix="nautilus-before-") as tmp:
        before_src = checkout(args.rev, Path(tmp))
        for _ in range(args.rounds):
            for side, pythonpath in (("before", before_src), ("after", None)):
                done = run_module(
                    "tools.rank_ab",
                    ["--child", *names],
                    pythonpath,
                    check=True,
                    capture_output=True,
                    text=True,
                )
                for name, ms in json.loads(done.stdout).items():
                    best[side][name] = min(best[side].get(name, float("inf")), ms)
    print(f"| case | CPU ms before ({args.rev}) | CPU ms after | before / after |")
    print("|---|---|---|---|")
    for name in names:
        before, after = best["before"][name], best["after"][name]
        print(f"| {name} | {before:.2f} | {after:.2f} | {before / after:.2f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
