"""IDF's default, per embedder, on the evidence: nDCG@10 with IDF off and on, cell by cell.

A cell is one shared collection in one layout of ``partitioned.py`` (partitioned: each
source a third of the corpus; hybrid: every source the whole of it), its sources
undeclared (``ranked`` unset, no source ranks) and its rows in text mode (no vectors:
the ranker embeds each row's text). Each embedder ranks the rows its own run fetched
(the vector source retrieves by that embedder), once with IDF off and once on; the
difference is paired query by query, with a 95% bootstrap interval. Beside them,
``central_rerank_hybrid`` (``central_rerank.py``): one whole-corpus BM25 index and the
model reranking the same union.

The six cells of three collections we do not have (A, B, C; 120 queries each, the same
layouts, onnx) are fixed inputs, as measured outside: their IDF difference has no
interval. The rule (docs/tuning-embedders.md): IDF follows an embedder when its mean
difference over the cells, each collection and layout weighing the same, is above 0 and
no cell loses (a point difference below -0.02 with its interval wholly below 0; a fixed
cell, a point difference below -0.02).

    python -m benchmarks.quality.idf_default [--datasets DIR] [--work-dir DIR]

``--work-dir``: the fetched rows of ``confidence_fit.py`` (reused when present).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.quality.central_rerank import CentralRerank
from benchmarks.quality.confidence_fit import (
    SCENARIOS,
    TOP_K,
    ensure_fetched,
    fetched_path,
    own_answers,
    text_mode,
)
from benchmarks.quality.ir_collections import DATASETS, ci_text, each_collection, ndcg_at, paired_ci
from benchmarks.quality.partitioned import onnx_embedder
from nautilus_ranking import RankingSynthesizer
from nautilus_ranking.embedders import embedder_from_name
from nautilus_ranking.embedders.default import idf_default
from nautilus_ranking.log import configure_logging

#: The held-out cells (onnx, text mode, undeclared): nDCG@10 with IDF off and on.
FIXED = {
    "A, partitioned": (0.673, 0.699),
    "B, partitioned": (0.808, 0.792),
    "C, partitioned": (0.414, 0.434),
    "A, hybrid": (0.751, 0.767),
    "B, hybrid": (0.797, 0.802),
    "C, hybrid": (0.488, 0.488),
}
LOSS = -0.02


def cell_scores(
    fetched: dict[str, list], collection, embedder, central: CentralRerank | None
) -> dict[str, list[float]]:
    """Per query: nDCG@10 with IDF off, on, and the central reference's."""
    out: dict[str, list[float]] = {"off": [], "on": [], "central": []}
    rankers = {
        key: RankingSynthesizer(top_k=TOP_K, idf=idf, lexical="bm25", embedder=embedder)
        for key, idf in (("off", False), ("on", True))
    }
    for qid, results in sorted(fetched.items()):
        grades = collection.qrels.get(qid, {})
        plain = text_mode(results)
        query = collection.queries[qid]
        for key, ranker in rankers.items():
            rows = ranker.rank(plain, {"query": query})
            out[key].append(ndcg_at([str(r.row.get("id")) for r in rows], grades, TOP_K))
        if central is not None:
            union = list(dict.fromkeys(str(r["id"]) for res in plain for r in res.rows))
            out["central"].append(ndcg_at(central.hybrid(union, query), grades, TOP_K))
    return out


def loses(ci: tuple[float, float, float]) -> bool:
    return ci[0] < LOSS and ci[2] < 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DATASETS)
    parser.add_argument("--work-dir", type=Path, default=None)
    args = parser.parse_args()
    configure_logging("ERROR")
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="idf-default-"))
    collections = {c.name: c for c in each_collection(args.datasets)}
    names = ["hashing"] + (["onnx"] if onnx_embedder() is not None else [])
    for name in names:  # fetch what confidence_fit has not (its records cost nothing here)
        ensure_fetched(args.datasets, work, name, collections)
    lines = [
        "| cell | embedder | IDF off | IDF on | Δ on − off [95% CI] | central BM25+dense | "
        "default − central |",
        "|---|---|---|---|---|---|---|",
    ]
    deltas: dict[str, list[float]] = {n: [] for n in names}
    lost: dict[str, list[str]] = {n: [] for n in names}
    for name in names:
        embedder = embedder_from_name(
            name, cache_size=200_000, data_dir=work / "vectors", disk_cache_mb=512
        )
        for cname, collection in collections.items():
            central = CentralRerank(collection, onnx_embedder()) if name == "onnx" else None
            for scenario in SCENARIOS:
                fetched = own_answers(fetched_path(work, name, cname, scenario))
                scores = cell_scores(fetched, collection, embedder, central)
                ci = paired_ci(scores["on"], scores["off"])
                deltas[name].append(ci[0])
                if loses(ci):
                    lost[name].append(f"{cname}, {scenario}")
                ref = float(np.mean(scores["central"])) if scores["central"] else None
                default = np.mean(scores["on" if idf_default(name) else "off"])
                lines.append(
                    f"| {cname}, {scenario} | {name} | {np.mean(scores['off']):.3f} | "
                    f"{np.mean(scores['on']):.3f} | {ci_text(ci)} | "
                    + (f"{ref:.3f} | {default - ref:+.3f} |" if ref is not None else "— | — |")
                )
                print(lines[-1], file=sys.stderr, flush=True)
    for cell, (off, on) in FIXED.items():
        lines.append(f"| {cell} (held out) | onnx | {off:.3f} | {on:.3f} | {on - off:+.3f} | | |")
        if "onnx" in deltas:
            deltas["onnx"].append(on - off)
            if on - off < LOSS:
                lost["onnx"].append(cell)
    lines.append("")
    for name in names:
        mean = float(np.mean(deltas[name]))
        verdict = "on" if mean > 0 and not lost[name] else "off"  # the rule, per embedder
        lines.append(
            f"- {name}: pooled Δ {mean:+.4f} over {len(deltas[name])} cells; cells lost: "
            f"{', '.join(lost[name]) or 'none'} → IDF {verdict}"
        )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
