"""The token budget's rule: skip a row that does not fit and try the next, or stop there?

The sources and collections are ``benchmarks/quality/partitioned.py``'s (fts, sql and vector over
each shared collection, partitioned and hybrid, declared, the hashing embedder); every
query's top 20 (IDF on) is counted as a JSON answer hands it over
(``selection.budget.entry_text``, o200k_base with the ``tokens`` extra, else the
estimate) and fitted to each budget by each rule:

* ``stop`` — rows in rank order until the first that does not fit;
* ``skip`` — every row in rank order that still fits (a long row never hides the short
  ones below it);
* ``skip, guarded`` — ``skip``, except that once a relevant row (relevance > 0) has been
  skipped, a row with no relevance (no content match and no source vote) is not handed
  over in its place: the rule ``selection/budget.py`` applies.

"Better" is more judged-relevant rows handed over per budget, nDCG@10 of the rows handed
over (in rank order) the tiebreak. Per budget and rule: rows handed over, judged-relevant
rows, rows with no relevance, and nDCG@10 (means per query over every collection and
scenario, each query counted once).

    python -m benchmarks.quality.budget_rule [--datasets DIR] [--work-dir DIR] [--budgets 250,500]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from benchmarks.quality.ir_collections import DATASETS, NAMES, load, ndcg_at
from benchmarks.quality.relevance_cut import fetched_for
from nautilus_ranking import RankingSynthesizer
from nautilus_ranking.log import configure_logging
from nautilus_ranking.selection.budget import entry_text, fit_counts
from nautilus_ranking.selection.tokens import count_tokens

TOP_K = 20
BUDGETS = (250, 500, 1000, 2000, 4000)
SCENARIOS = ("partitioned", "hybrid")
RULES = ("stop", "skip", "skip, guarded")


def stop_at_first(counts: Sequence[int], max_tokens: int) -> list[int]:
    """Rows in rank order until the first that does not fit (the first row always)."""
    kept: list[int] = []
    used = 0
    for i, cost in enumerate(counts):
        if i and used + cost > max_tokens:
            break
        kept.append(i)
        used += cost
    return kept


def kept_by(rule: str, counts: Sequence[int], relevant: Sequence[bool], budget: int) -> list[int]:
    if rule == "stop":
        return stop_at_first(counts, budget)
    return list(fit_counts(counts, budget, relevant if rule == "skip, guarded" else None).kept)


def measure(datasets: Path, work: Path, budgets: Sequence[int]) -> dict[tuple[int, str], list]:
    """Per (budget, rule): per query, (rows, judged relevant, no relevance, nDCG@10)."""
    out: dict[tuple[int, str], list[tuple[int, int, int, float]]] = {}
    ranker = RankingSynthesizer(idf=True, top_k=TOP_K)
    for name in NAMES:
        collection = load(name, datasets)
        for scenario in SCENARIOS:
            fetched = fetched_for(collection, scenario, work / name, None)
            for qid, results in fetched.items():
                ranked = ranker.rank(results, {"query": collection.queries[qid]})
                counts = count_tokens([entry_text(r) for r in ranked])
                relevant = [r.relevance > 0 for r in ranked]
                grades = collection.qrels[qid]
                for budget in budgets:
                    for rule in RULES:
                        kept = kept_by(rule, counts, relevant, budget)
                        ids = [str(ranked[i].row["id"]) for i in kept]
                        out.setdefault((budget, rule), []).append(
                            (
                                len(kept),
                                sum(1 for d in ids if grades.get(d, 0) >= 1),
                                sum(1 for i in kept if not relevant[i]),
                                ndcg_at(ids, grades, 10),
                            )
                        )
    return out


def table(results: dict[tuple[int, str], list], budgets: Sequence[int]) -> str:
    queries = len(next(iter(results.values())))
    lines = [
        f"**The budget's rule** (top {TOP_K}, {queries} query rankings over "
        f"{', '.join(NAMES)} × {', '.join(SCENARIOS)}; means per query)",
        "",
        "| budget (tokens) | rule | rows | judged relevant | no relevance | nDCG@10 |",
        "|---|---|---|---|---|---|",
    ]
    for budget in budgets:
        for rule in RULES:
            values = results[(budget, rule)]
            mean = [sum(v[k] for v in values) / len(values) for k in range(4)]
            lines.append(
                f"| {budget} | {rule} | {mean[0]:.2f} | {mean[1]:.3f} | {mean[2]:.3f} | "
                f"{mean[3]:.4f} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DATASETS)
    parser.add_argument("--work-dir", type=Path, default=None)
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    args = parser.parse_args(argv)
    configure_logging("warning")
    budgets = [int(b) for b in args.budgets.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work_dir or Path(tmp)
        print(table(measure(args.datasets, work, budgets), budgets))
    return 0


if __name__ == "__main__":
    sys.exit(main())
