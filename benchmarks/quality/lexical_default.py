"""Which lexical scorer should be the default: the cosine or BM25, on pooled evidence.

The text-mode cells of ``benchmarks.quality.quality`` (each shared collection served by three
real sources, partitioned and hybrid) ranked by nautilus with the default hashing
embedder, the sources *undeclared* (``ranked=None`` on every result: what an operator
whose sources declare nothing hands the ranker), under both scorers with IDF off (the
default) and on. Per cell: nDCG@10 of each, the paired 95% bootstrap interval of
Δ = bm25 − cosine at IDF off, and IDF's effect (on − off) under each scorer.

The pooled table adds the six cells of three collections this repository does not hold
(``EXTERNAL``: point values only, measured elsewhere on 120-query samples, fixed inputs
to the decision). Every collection × layout weighs the same. The rule it applies:
``bm25`` becomes the default iff its pooled mean at IDF off is higher and no cell loses,
a loss being a point Δ below −0.02 with a 95% interval wholly below 0. A cell without an
interval can lose only by its point Δ, and the six external cells are all above −0.02.

With ``--declared`` the same cells run declared too (the sources' own ``ranked`` flags),
beside RRF over the ranked sources: what the undeclared detection gives up.

    python -m benchmarks.quality.lexical_default [--datasets DIR] [--work-dir DIR] [--declared]
                                                 [--only NAME] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.quality.central_rerank import CentralRerank
from benchmarks.quality.ir_collections import (
    DATASETS,
    NAMES,
    Collection,
    ci_text,
    each_collection,
    ndcg_at,
    paired_ci,
)
from benchmarks.quality.partitioned import build_broker, fetch, onnx_embedder, undeclare, unique_ids
from benchmarks.quality.quality import passthrough, rrf_ranked
from nautilus_ranking import AdapterResult, RankingSynthesizer
from nautilus_ranking.log import configure_logging

SCENARIOS = ("partitioned", "hybrid")
#: (lexical scorer, IDF) for every nautilus column, the default first.
SETTINGS = (("cosine", False), ("bm25", False), ("cosine", True), ("bm25", True))
#: The rule's loss: a point Δ below this with a 95% interval wholly below 0.
LOSS = -0.02


@dataclass(frozen=True)
class External:
    """A cell measured outside this repository: nDCG@10, point values only."""

    cell: str
    cosine_off: float
    cosine_on: float
    bm25_off: float
    bm25_on: float
    central_bm25: float
    rrf_ranked: float


#: Three collections not held here, split across three sources as ``benchmarks.quality.quality``
#: splits them, sources undeclared, text mode, hashing embedder, 120-query samples.
EXTERNAL = (
    External("A partitioned", 0.631, 0.659, 0.651, 0.654, 0.677, 0.435),
    External("B partitioned", 0.719, 0.678, 0.722, 0.685, 0.696, 0.666),
    External("C partitioned", 0.359, 0.347, 0.390, 0.379, 0.396, 0.356),
    External("A hybrid", 0.755, 0.749, 0.750, 0.749, 0.725, 0.764),
    External("B hybrid", 0.790, 0.783, 0.785, 0.777, 0.700, 0.799),
    External("C hybrid", 0.462, 0.466, 0.471, 0.471, 0.432, 0.482),
)


def column(lexical: str, idf: bool) -> str:
    return f"{lexical}, IDF {'on' if idf else 'off'}"


Scores = dict[str, list[float]]


def evaluate(
    collection: Collection, fetched: dict[str, list[AdapterResult]], rerank: CentralRerank
) -> Scores:
    """nDCG@10 per query (query order) of every nautilus setting and the references."""
    rankers = {
        column(lexical, idf): RankingSynthesizer(idf=idf, lexical=lexical)
        for lexical, idf in SETTINGS
    }
    out: Scores = {name: [] for name in [*rankers, "central_rerank_bm25", "RRF ranked only"]}
    for qid, results in fetched.items():
        query, grades = collection.queries[qid], collection.qrels[qid]
        for name, ranker in rankers.items():
            ranked = unique_ids([r.row for r in ranker.rank(results, {"query": query})])
            out[name].append(ndcg_at(ranked, grades))
        out["central_rerank_bm25"].append(
            ndcg_at(rerank.bm25(passthrough(results, query), query), grades)
        )
        out["RRF ranked only"].append(ndcg_at(rrf_ranked(results, query), grades))
    return out


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def loses(d: tuple[float, float, float]) -> bool:
    return d[0] < LOSS and d[2] < 0


def cell_table(cells: dict[str, Scores], mode: str) -> str:
    lines = [
        f"**Every cell ({mode}; nDCG@10, text mode, hashing embedder; Δ paired per query, "
        "95% bootstrap interval)**",
        "",
        "| cell | queries | cosine, IDF off (default) | bm25, IDF off | Δ bm25 − cosine, IDF off "
        "| cosine, IDF on | bm25, IDF on | Δ IDF on − off, cosine | Δ IDF on − off, bm25 "
        "| central_rerank_bm25 | RRF ranked only |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for cell, s in cells.items():
        co, bo = s[column("cosine", False)], s[column("bm25", False)]
        cn, bn = s[column("cosine", True)], s[column("bm25", True)]
        lines.append(
            f"| {cell} | {len(co)} | {mean(co):.3f} | {mean(bo):.3f} "
            f"| {ci_text(paired_ci(bo, co))} "
            f"| {mean(cn):.3f} | {mean(bn):.3f} | {ci_text(paired_ci(cn, co))} "
            f"| {ci_text(paired_ci(bn, bo))} | {mean(s['central_rerank_bm25']):.3f} "
            f"| {mean(s['RRF ranked only']):.3f} |"
        )
    return "\n".join(lines)


def pooled_table(cells: dict[str, Scores]) -> str:
    """The undeclared cells and ``EXTERNAL``, each weighing the same, and the rule."""
    rows: list[tuple[str, float, float, float, float, str, bool]] = []
    for cell, s in cells.items():
        co, bo = s[column("cosine", False)], s[column("bm25", False)]
        cn, bn = s[column("cosine", True)], s[column("bm25", True)]
        d = paired_ci(bo, co)
        rows.append((cell, mean(co), mean(bo), mean(cn), mean(bn), ci_text(d), loses(d)))
    for e in EXTERNAL:
        point = e.bm25_off - e.cosine_off
        rows.append(
            (
                e.cell,
                e.cosine_off,
                e.bm25_off,
                e.cosine_on,
                e.bm25_on,
                f"{point:+.3f} (point only)",
                point < LOSS,  # no interval: a loss by the point Δ alone
            )
        )
    lines = [
        "**Pooled (undeclared, IDF off unless named; every collection × layout weighs the same)**",
        "",
        "| cell | cosine, IDF off | bm25, IDF off | Δ bm25 − cosine [95% CI] | loss? "
        "| cosine, IDF on | bm25, IDF on |",
        "|---|---|---|---|---|---|---|",
    ]
    for cell, c_off, b_off, c_on, b_on, shown_delta, lost in rows:
        lines.append(
            f"| {cell} | {c_off:.3f} | {b_off:.3f} | {shown_delta} | {'yes' if lost else 'no'} "
            f"| {c_on:.3f} | {b_on:.3f} |"
        )
    n = len(rows)
    means = [
        mean([r[1] for r in rows]),
        mean([r[2] for r in rows]),
        mean([r[3] for r in rows]),
        mean([r[4] for r in rows]),
    ]
    lines.append(
        f"| **pooled mean ({n} cells)** | {means[0]:.4f} | {means[1]:.4f} "
        f"| {means[1] - means[0]:+.4f} | | {means[2]:.4f} | {means[3]:.4f} |"
    )
    any_loss = any(r[6] for r in rows)
    wins = means[1] > means[0] and not any_loss
    lines += [
        "",
        f"Rule: pooled mean higher under bm25 ({means[1]:.4f} vs {means[0]:.4f}: "
        f"{'yes' if means[1] > means[0] else 'no'}); no cell loses "
        f"({'a cell loses' if any_loss else 'none does'}). Default: "
        f"**{'bm25' if wins else 'cosine'}**. IDF's pooled effect (on − off): "
        f"cosine {means[2] - means[0]:+.4f}, bm25 {means[3] - means[1]:+.4f}.",
    ]
    return "\n".join(lines)


def run(datasets: Path, work_dir: Path | None, declared: bool, only: str | None = None) -> str:
    modes = ("undeclared", "declared") if declared else ("undeclared",)
    cells: dict[str, dict[str, Scores]] = {m: {} for m in modes}
    vector_embedder = onnx_embedder()
    with tempfile.TemporaryDirectory() as scratch:
        folder = work_dir if work_dir is not None else Path(scratch)
        for collection in each_collection(datasets, only):
            name = collection.name
            rerank = CentralRerank(collection)
            for scenario in SCENARIOS:
                started = time.perf_counter()
                broker = build_broker(collection, scenario, folder / name, vector_embedder)
                fetched = fetch(broker, collection)
                for mode in modes:
                    given = undeclare(fetched) if mode == "undeclared" else fetched
                    cells[mode][f"{name} {scenario}"] = evaluate(collection, given, rerank)
                print(
                    f"{name}/{scenario}: {time.perf_counter() - started:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
    out = [pooled_table(cells["undeclared"])]
    out += [cell_table(cells[m], m) for m in modes]
    return "\n\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DATASETS)
    parser.add_argument(
        "--work-dir", type=Path, help="keep the source databases here and reuse them"
    )
    parser.add_argument("--declared", action="store_true", help="run every cell declared as well")
    parser.add_argument("--only", choices=NAMES)
    parser.add_argument("--out", type=Path, help="write the markdown tables here")
    args = parser.parse_args()
    configure_logging("warning", "console")
    text = run(args.datasets, args.work_dir, args.declared, args.only)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
