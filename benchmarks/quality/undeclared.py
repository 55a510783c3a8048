"""What the undeclared detection gives up: the same answers declared, undeclared, and
undeclared with less for the detection to read.

``benchmarks.quality.quality``'s three sources (fts, sql, vector) over each shared collection,
partitioned and hybrid, ranked by nautilus with the default settings (hashing embedder,
IDF off, the default lexical scorer) in four forms of the same answers:

* ``declared``: the sources' own ``ranked`` flags (fts and vector ranked, sql not);
* ``undeclared``: ``ranked=None`` on every result, the rows as the sources return them
  (fts rows carry their ``bm25`` score, vector rows their ``similarity``, and the table's
  rows come in the order of their ``id``);
* ``no scores``: undeclared, and the rows without the score fields (what an adapter that
  hands over rows only gives);
* ``rows only``: no scores, and every row's ``id`` made opaque (a hash before it), so no
  source is in key order either: the detection has only its tests of each order against
  content and against the other sources.

Per cell: nDCG@10 of each form beside RRF over the ranked sources (fts + vector, which
needs no declaration), the paired 95% interval of each undeclared form against
``declared``, and the mean weight the ranker gave each source's votes (1 ranked, 0 not).

    python -m benchmarks.quality.undeclared [--datasets DIR] [--work-dir DIR] [--only NAME]
                                            [--lexical bm25|cosine] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks.quality.ir_collections import (
    DATASETS,
    NAMES,
    ci_text,
    each_collection,
    ndcg_at,
    paired_ci,
)
from benchmarks.quality.partitioned import SOURCES, build_broker, fetch, onnx_embedder, unique_ids
from benchmarks.quality.quality import rrf_ranked
from nautilus_ranking import AdapterResult, RankingSynthesizer
from nautilus_ranking.log import configure_logging

Fetched = dict[str, list[AdapterResult]]
FORMS = ("declared", "undeclared", "no scores", "rows only")
#: The score fields the sources' rows carry (fts: SQLite's bm25(); vector: the cosine).
SCORE_FIELDS = ("bm25", "similarity")


def opaque(doc_id: str) -> str:
    """An id in no key order: a hash of it before it (``judged`` strips it)."""
    return f"{hashlib.sha1(doc_id.encode()).hexdigest()[:8]}:{doc_id}"


def judged(doc_id: str) -> str:
    return doc_id.split(":", 1)[-1]


def form(fetched: Fetched, name: str) -> Fetched:
    """The answers as ``name`` hands them to the ranker."""
    if name == "declared":
        return fetched

    def rows(result: AdapterResult) -> list[dict[str, Any]]:
        out = []
        for row in result.rows:
            row = dict(row)
            if name != "undeclared":
                for field in SCORE_FIELDS:
                    row.pop(field, None)
            if name == "rows only":
                row["id"] = opaque(str(row["id"]))
            out.append(row)
        return out

    return {q: [replace(r, ranked=None, rows=rows(r)) for r in rs] for q, rs in fetched.items()}


def measure(
    queries: dict[str, str], qrels: dict[str, dict[str, int]], given: Fetched, lexical: str
) -> tuple[list[float], dict[str, float]]:
    """nDCG@10 per query, and each source's mean weight over the queries."""
    ranker = RankingSynthesizer(lexical=lexical, top_k=None)
    scores = []
    weights: dict[str, list[float]] = {s: [] for s in SOURCES}
    for qid, results in given.items():
        ranked = ranker.rank(results, {"query": queries[qid]})
        ids = [judged(i) for i in unique_ids([r.row for r in ranked])]
        scores.append(ndcg_at(ids, qrels[qid]))
        for source in SOURCES:
            mine = [r.source_weight for r in ranked if r.source_id == source]
            if mine:
                weights[source].append(mine[0])
    return scores, {s: sum(w) / len(w) if w else 0.0 for s, w in weights.items()}


def run(datasets: Path, work_dir: Path | None, only: str | None, lexical: str) -> str:
    lines = [
        f"**Undeclared detection** (nDCG@10, text mode, hashing embedder, IDF off, "
        f"lexical `{lexical}`; Δ against declared, paired per query, 95% bootstrap "
        "interval; weights: the mean weight of the fts / sql / vector votes)",
        "",
        "| cell | RRF ranked only | declared | undeclared | Δ [95% CI] | no scores "
        "| Δ [95% CI] | rows only | Δ [95% CI] | weights undeclared | weights no scores "
        "| weights rows only |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    vector_embedder = onnx_embedder()
    with tempfile.TemporaryDirectory() as scratch:
        folder = work_dir if work_dir is not None else Path(scratch)
        for collection in each_collection(datasets, only):
            name = collection.name
            for scenario in ("partitioned", "hybrid"):
                broker = build_broker(collection, scenario, folder / name, vector_embedder)
                fetched = fetch(broker, collection)
                rrf = [
                    ndcg_at(rrf_ranked(rs, collection.queries[q]), collection.qrels[q])
                    for q, rs in fetched.items()
                ]
                per: dict[str, tuple[list[float], dict[str, float]]] = {
                    f: measure(collection.queries, collection.qrels, form(fetched, f), lexical)
                    for f in FORMS
                }
                declared = per["declared"][0]
                row = [
                    f"{name} {scenario}",
                    f"{sum(rrf) / len(rrf):.3f}",
                    f"{sum(declared) / len(declared):.3f}",
                ]
                for f in FORMS[1:]:
                    ours = per[f][0]
                    row += [f"{sum(ours) / len(ours):.3f}", ci_text(paired_ci(ours, declared))]
                row += [" / ".join(f"{per[f][1][s]:.2f}" for s in SOURCES) for f in FORMS[1:]]
                lines.append("| " + " | ".join(row) + " |")
                print(f"{name}/{scenario} done", file=sys.stderr, flush=True)
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DATASETS)
    parser.add_argument("--work-dir", type=Path, help="keep the source databases here")
    parser.add_argument("--only", choices=NAMES)
    parser.add_argument("--lexical", choices=("bm25", "cosine"), default="bm25")
    parser.add_argument("--out", type=Path, help="write the markdown table here")
    args = parser.parse_args()
    configure_logging("error", "console")
    text = run(args.datasets, args.work_dir, args.only, args.lexical)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
