"""Relevance benchmark: does ranking the union beat handing it over?

For each shared collection, three real SQLite sources of different kinds answer
every judged query, at most 30 rows each:

* ``fts``    — FTS5, BM25 order (declares itself ranked);
* ``sql``    — a plain table with a keyword filter, rows in table order (unranked);
* ``vector`` — stored all-MiniLM-L6-v2 vectors (``nautilus-ranking[embed]``; 1,024-d hashing
  vectors without it), cosine order (ranked).

Scenarios: *partitioned* (each source holds a third of the corpus) and *hybrid*
(each holds all of it; a document returned by several sources counts once).
Simple fusions order the union: passthrough, round-robin, RRF (k=60, equal
weights) and RRF over the ranked sources only (fts + vector). Central indexes
over the whole corpus: BM25 (the hybrid fts list) and BM25+dense (RRF of the
hybrid fts and vector lists). Central indexes reranking exactly the union the sources
returned (``central_rerank.py``): ``central_rerank_bm25`` (one FTS5 Porter index over the
corpus orders the union's rows by ``bm25()``, rows matching no word after) and
``central_rerank_hybrid`` (RRF of that order and the exact cosine over the union).
nautilus-ranking: RankingSynthesizer with IDF on, its
default settings otherwise (copies collapse by text; the default lexical scorer,
``bm25``), with the default hashing embedder and with MiniLM (onnx); and, beside
them, the other lexical scorer (``nautilus (cosine)``: ``lexical="cosine"``, hashing).
Every cell has the paired 95% bootstrap interval of nautilus minus that strategy, per
query. Then the vector source's treatment (a
lexical content signal must not under-rate a semantic index's rows): the share of
its relevant rows that reach the top 10 under nautilus (default, onnx) and RRF over
the ranked sources, and nautilus's nDCG@10 (default embedder) with a fixed stage-2
bump of 10% / 50% of the vector source's votes applied here (a fusion without that
bias gains nothing from the bump). Then what each boost level does
(`boost_safety.py`). Everything
runs twice: *declared* (fts and vector say ``ranked=True``, sql ``ranked=False``,
as nautilus's own sources do) and *undeclared* (``ranked=None`` on every result,
as a library caller or an upstream broker whose adapters return rows only hands
them over; ``--declared`` / ``--undeclared`` run one of them).

    python -m benchmarks.quality.quality [--datasets DIR] [--only NAME] [--out FILE.md]
                                         [--onnx-queries N] [--no-safety] [--work-dir DIR]
                                         [--declared | --undeclared]
    python -m benchmarks.quality.quality --backend postgres
        # SQLite beside PostgreSQL (benchmarks/sources/backends.py)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.quality.central_rerank import CentralRerank
from benchmarks.quality.ir_collections import (
    DATASETS,
    NAMES,
    Collection,
    ci_text,
    each_collection,
    ndcg_at,
    paired_ci,
    recall_at,
)
from benchmarks.quality.partitioned import (
    MODES,
    build_broker,
    fetch,
    onnx_embedder,
    undeclare,
    unique_ids,
)
from nautilus_ranking import AdapterResult, RankingSynthesizer
from nautilus_ranking.log import configure_logging

Strategy = Callable[[list[AdapterResult], str], list[str]]


def passthrough(results: list[AdapterResult], query: str) -> list[str]:
    return unique_ids([row for r in results for row in r.rows])


def round_robin(results: list[AdapterResult], query: str) -> list[str]:
    depth = max((len(r.rows) for r in results), default=0)
    return unique_ids([r.rows[i] for i in range(depth) for r in results if i < len(r.rows)])


def rrf(results: list[AdapterResult], query: str, k: int = 60) -> list[str]:
    scores: dict[str, float] = {}
    for result in results:
        seen: set[str] = set()
        for rank, row in enumerate(result.rows, start=1):
            if str(row["id"]) in seen:
                continue
            seen.add(str(row["id"]))
            doc = str(row["id"])
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank)
    return sorted(scores, key=lambda d: -scores[d])


#: The sources whose order is relevance (what fts and vector declare, and undeclared are).
RANKED_SOURCES = ("fts", "vector")


def rrf_ranked(results: list[AdapterResult], query: str) -> list[str]:
    """RRF over the sources whose order is relevance (fts, vector), declared or not."""
    return rrf([r for r in results if r.source_id in RANKED_SOURCES], query)


def central_bm25(hybrid: list[AdapterResult]) -> list[str]:
    """One BM25 index over the whole corpus: the hybrid scenario's fts list."""
    return unique_ids([row for r in hybrid if r.source_id == "fts" for row in r.rows])


def central_hybrid(hybrid: list[AdapterResult]) -> list[str]:
    """BM25 + dense over the whole corpus: RRF of the hybrid fts and vector lists."""
    return rrf([r for r in hybrid if r.source_id in ("fts", "vector")], "")


def ranking(**options: Any) -> Strategy:
    ranker = RankingSynthesizer(**options)

    def order(results: list[AdapterResult], query: str) -> list[str]:
        return unique_ids([r.row for r in ranker.rank(results, {"query": query})])

    return order


#: The central indexes reranking exactly the union the sources returned (central_rerank.py).
RERANK_BM25 = "central_rerank_bm25"
RERANK_HYBRID = "central_rerank_hybrid"
NAUTILUS = "nautilus (default)"
NAUTILUS_ONNX = "nautilus (onnx)"
#: The other lexical scorer (NAUTILUS_RANKING_LEXICAL=cosine, the default before),
#: measured beside the default.
NAUTILUS_COSINE = "nautilus (cosine)"
SIMPLE = ("passthrough", "round-robin", "RRF k=60", "RRF ranked only")


def strategies() -> dict[str, Strategy]:
    out: dict[str, Strategy] = {
        "passthrough": passthrough,
        "round-robin": round_robin,
        "RRF k=60": rrf,
        "RRF ranked only": rrf_ranked,
        NAUTILUS: ranking(idf=True),
        NAUTILUS_COSINE: ranking(idf=True, lexical="cosine"),
    }
    model = onnx_embedder()
    if model is not None:
        out[NAUTILUS_ONNX] = ranking(idf=True, embedder=model)
    return out


#: The fixed stage-2 bumps of the vector source's votes the bias table applies (shares).
VECTOR_BUMPS = (0.1, 0.5)


BUMPED = "nautilus (default), vector +"


def bumped_name(share: float) -> str:
    return f"{BUMPED}{share:.0%}"


def vector_relevant(results: list[AdapterResult], grades: dict[str, int]) -> set[str]:
    """The relevant documents the vector source returned."""
    return {
        str(row["id"])
        for r in results
        if r.source_id == "vector"
        for row in r.rows
        if str(row["id"]) in grades
    }


def vector_bumped(rows: list[Any], share: float) -> list[str]:
    """A full ranking re-sorted with ``share`` of the row's source votes added wherever the
    vector source returned the row's document: a stage-2 bump of the vector source, fixed
    here (not the product's levels)."""

    def score(row: Any) -> float:
        vector = row.source_id == "vector" or any(c.source_id == "vector" for c in row.also_from)
        return float(
            row.relevance + (share * (row.evidence + row.unranked_vote) if vector else 0.0)
        )

    return unique_ids([r.row for r in sorted(rows, key=lambda r: -score(r))])


def evaluate(
    collection: Collection,
    fetched: dict[str, list[AdapterResult]],
    hybrid: dict[str, list[AdapterResult]],
    onnx_queries: int | None = None,
    rerank: CentralRerank | None = None,
) -> dict[str, dict[str, list[float]]]:
    """Per strategy, per metric, one value per query (query order). ``hybrid``: the
    hybrid scenario's results, for the central-index baselines; ``rerank``: the central
    indexes that rerank the union (``central_rerank.py``). The onnx strategy runs on the
    first ``onnx_queries`` queries only when given (paired on those)."""
    out: dict[str, dict[str, list[float]]] = {}
    for name, strategy in strategies().items():
        per = out.setdefault(
            name, {"ndcg": [], "recall": [], "vector_top": [], "vector_relevant": []}
        )
        for i, (qid, results) in enumerate(fetched.items()):
            if name == NAUTILUS_ONNX and onnx_queries is not None and i >= onnx_queries:
                break
            ranked = strategy(results, collection.queries[qid])
            grades = collection.qrels[qid]
            per["ndcg"].append(ndcg_at(ranked, grades))
            per["recall"].append(recall_at(ranked, grades))
            relevant = vector_relevant(results, grades)
            per["vector_top"].append(float(len(relevant & set(ranked[:10]))))
            per["vector_relevant"].append(float(len(relevant)))
    for share in VECTOR_BUMPS:
        out[bumped_name(share)] = {"ndcg": [], "recall": []}
    bump_ranker = RankingSynthesizer(idf=True)
    for qid, results in fetched.items():
        rows = bump_ranker.rank(results, {"query": collection.queries[qid]})
        for share in VECTOR_BUMPS:
            ranked = vector_bumped(rows, share)
            out[bumped_name(share)]["ndcg"].append(ndcg_at(ranked, collection.qrels[qid]))
            out[bumped_name(share)]["recall"].append(recall_at(ranked, collection.qrels[qid]))
    for name, central in (("central BM25", central_bm25), ("central BM25+dense", central_hybrid)):
        per = out.setdefault(name, {"ndcg": [], "recall": []})
        for qid in fetched:
            ranked = central(hybrid[qid])
            per["ndcg"].append(ndcg_at(ranked, collection.qrels[qid]))
            per["recall"].append(recall_at(ranked, collection.qrels[qid]))
    if rerank is not None:  # the central indexes reranking exactly the union
        for name, order in ((RERANK_BM25, rerank.bm25), (RERANK_HYBRID, rerank.hybrid)):
            per = out.setdefault(name, {"ndcg": [], "recall": []})
            for qid, results in fetched.items():
                query = collection.queries[qid]
                ranked = order(passthrough(results, query), query)
                per["ndcg"].append(ndcg_at(ranked, collection.qrels[qid]))
                per["recall"].append(recall_at(ranked, collection.qrels[qid]))
    oracle = out.setdefault("oracle (upper bound)", {"ndcg": [], "recall": []})
    union_recall = []
    for qid, results in fetched.items():
        grades = collection.qrels[qid]
        union = passthrough(results, "")
        ideal = sorted(union, key=lambda d: -grades.get(d, 0))
        oracle["ndcg"].append(ndcg_at(ideal, grades))
        oracle["recall"].append(recall_at(ideal, grades))
        union_recall.append(recall_at(union, grades, None))
    out["_union"] = {"recall": union_recall}
    return out


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def paired(ours: list[float], theirs: list[float]) -> str:
    """Mean of ours − theirs over the queries both ran, with its 95% bootstrap interval."""
    n = min(len(ours), len(theirs))
    if n == 0:
        return "—"
    return ci_text(paired_ci(ours[:n], theirs[:n]))


def quality_table(name: str, scenario: str, scores: dict[str, dict[str, list[float]]]) -> str:
    union = mean(scores["_union"]["recall"])
    n = len(scores["_union"]["recall"])
    ours = [s for s in (NAUTILUS, NAUTILUS_ONNX) if s in scores]
    subset = ""
    if NAUTILUS_ONNX in scores and len(scores[NAUTILUS_ONNX]["ndcg"]) < n:
        subset = (
            f"; onnx on the first {len(scores[NAUTILUS_ONNX]['ndcg'])} queries, its "
            "Δ paired on those"
        )
    lines = [
        f"**{name} — {scenario}** ({n} queries; union recall {union:.3f}{subset})",
        "",
        "| strategy | nDCG@10 | recall@10 | "
        + " | ".join(f"Δ {s} − strategy [95% CI]" for s in ours)
        + " |",
        "|---|---|---|" + "---|" * len(ours),
    ]
    for strategy, metric in scores.items():
        if strategy.startswith("_") or strategy.startswith(BUMPED):
            continue
        cells = ["—" if strategy == s else paired(scores[s]["ndcg"], metric["ndcg"]) for s in ours]
        lines.append(
            f"| {strategy} | {mean(metric['ndcg']):.3f} | {mean(metric['recall']):.3f} "
            "| " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)


def floor_table(cells: dict[str, dict[str, dict[str, list[float]]]], mode: str = "declared") -> str:
    """nautilus against the best simple fusion and the central indexes, every cell."""
    said = (
        "the sources declare whether their order is relevance"
        if mode == "declared"
        else "no source declares it: `ranked=None` on every result"
    )
    lines = [
        f"**Summary ({mode}: {said}): nautilus against the best simple fusion and the "
        "central indexes** (nDCG@10; Δ paired per query, 95% bootstrap interval)",
        "",
        "| cell | nautilus (default) | best simple fusion | Δ [95% CI] | ÷ central BM25 "
        f"| Δ vs {RERANK_BM25} [95% CI] "
        "| nautilus (onnx) | Δ vs best simple [95% CI] | Δ vs central BM25+dense [95% CI] "
        f"| Δ vs {RERANK_HYBRID} [95% CI] |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for cell, scores in cells.items():
        best = max(SIMPLE, key=lambda s: mean(scores[s]["ndcg"]))
        ours = scores[NAUTILUS]["ndcg"]
        bm25 = mean(scores["central BM25"]["ndcg"])
        row = [
            cell,
            f"{mean(ours):.3f}",
            f"{mean(scores[best]['ndcg']):.3f} ({best})",
            paired(ours, scores[best]["ndcg"]),
            f"{mean(ours) / bm25:.2f}" if bm25 else "—",
            paired(ours, scores[RERANK_BM25]["ndcg"]) if RERANK_BM25 in scores else "—",
        ]
        if NAUTILUS_ONNX in scores:
            onnx = scores[NAUTILUS_ONNX]["ndcg"]
            shown = f"{mean(onnx):.3f}" + (f" ({len(onnx)} q)" if len(onnx) < len(ours) else "")
            row += [
                shown,
                paired(onnx, scores[best]["ndcg"]),
                paired(onnx, scores["central BM25+dense"]["ndcg"]),
                paired(onnx, scores[RERANK_HYBRID]["ndcg"]) if RERANK_HYBRID in scores else "—",
            ]
        else:
            row += ["—", "—", "—", "—"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def bias_table(cells: dict[str, dict[str, dict[str, list[float]]]], mode: str) -> str:
    """Whether a lexical content signal under-rates the semantic (vector) source's rows:
    (a) the share of its relevant rows that reach the top 10, and (b) what a fixed bump
    of its votes does to nautilus's nDCG@10 with the default embedder."""
    lines = [
        f"**The vector source's rows ({mode})**: (a) the share of its relevant rows "
        "that reach the top 10; (b) nDCG@10 of nautilus (default) with a stage-2 bump "
        "of 10% / 50% of the vector source's votes, Δ paired [95% CI] (a fusion that "
        "does not under-rate it gains nothing from the bump)",
        "",
        "| cell | (a) nautilus (default) | (a) RRF ranked only | (a) nautilus (onnx) "
        "| (b) nautilus (default) | +10% Δ [95% CI] | +50% Δ [95% CI] |",
        "|---|---|---|---|---|---|---|",
    ]

    def share(scores: dict[str, list[float]]) -> str:
        total = sum(scores.get("vector_relevant", []))
        return f"{sum(scores['vector_top']) / total:.3f}" if total else "—"

    for cell, scores in cells.items():
        ours = scores[NAUTILUS]["ndcg"]
        row = [
            cell,
            share(scores[NAUTILUS]),
            share(scores["RRF ranked only"]),
            share(scores[NAUTILUS_ONNX]) if NAUTILUS_ONNX in scores else "—",
            f"{mean(ours):.3f}",
        ]
        row += [paired(scores[bumped_name(b)]["ndcg"], ours) for b in VECTOR_BUMPS]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def run(
    datasets: Path,
    only: str | None,
    onnx_queries: int | None = None,
    safety: bool = True,
    work_dir: Path | None = None,
    modes: tuple[str, ...] = MODES,
) -> tuple[str, dict[str, Any]]:
    """Every collection, both scenarios, in each of ``modes``: ``declared`` (the sources
    say whether their order is relevance, as nautilus's own do) and ``undeclared``
    (``ranked=None`` on every result: the ranker detects it). With ``safety``, what each
    boost level does (``benchmarks/quality/boost_safety.py``: share gained, the others' recall
    kept, Δ nDCG, every level and demotion, both embedders, with and without a cap)."""
    from benchmarks.quality import boost_safety  # it builds on this module

    sections: dict[str, list[str]] = {mode: [] for mode in modes}
    cells: dict[str, dict[str, dict[str, dict[str, list[float]]]]] = {m: {} for m in modes}
    summary: dict[str, Any] = {}
    boost_cells: boost_safety.Cells = {}
    hybrid_lines: list[str] = []
    vector_embedder = onnx_embedder()
    with tempfile.TemporaryDirectory() as scratch:
        tmp = str(work_dir) if work_dir is not None else scratch
        for collection in each_collection(datasets, only):
            name = collection.name
            rerank = CentralRerank(collection, vector_embedder)
            fetched_by = {}
            for scenario in ("hybrid", "partitioned"):
                broker = build_broker(collection, scenario, Path(tmp) / name, vector_embedder)
                fetched_by[scenario] = fetch(broker, collection)
            for mode in modes:
                given = {
                    scenario: (fetched if mode == "declared" else undeclare(fetched))
                    for scenario, fetched in fetched_by.items()
                }
                for scenario in ("partitioned", "hybrid"):
                    started = time.perf_counter()
                    fetched = given[scenario]
                    scores = evaluate(
                        collection, fetched, fetched_by["hybrid"], onnx_queries, rerank
                    )
                    sections[mode].append(quality_table(f"{name} ({mode})", scenario, scores))
                    cells[mode][f"{name} {scenario}"] = scores
                    summary[f"{mode}/{name}/{scenario}"] = {
                        k: mean(v["ndcg"]) for k, v in scores.items() if not k.startswith("_")
                    }
                    print(
                        f"{name}/{scenario}/{mode}: {time.perf_counter() - started:.1f} s",
                        file=sys.stderr,
                        flush=True,
                    )
            if safety:
                more, lines = boost_safety.collection_cells(
                    collection, fetched_by, list(boost_safety.EMBEDDERS), list(modes)
                )
                boost_cells.update(more)
                hybrid_lines += lines
    out = [floor_table(cells[mode], mode) for mode in modes]
    out += [bias_table(cells[mode], mode) for mode in modes]
    if boost_cells:
        out.append(boost_safety.tables(boost_cells, hybrid_lines))
    for mode in modes:
        out += sections[mode]
    return "\n\n".join(out), summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DATASETS)
    parser.add_argument("--only", choices=NAMES)
    parser.add_argument("--out", type=Path, help="write the markdown tables here")
    parser.add_argument(
        "--onnx-queries",
        type=int,
        default=None,
        help="run the onnx strategy on the first N queries of each collection",
    )
    parser.add_argument("--no-safety", action="store_true", help="skip the boost-safety tables")
    parser.add_argument(
        "--work-dir",
        type=Path,
        help="keep the source databases here and reuse "
        "them on the next run (the MiniLM vector build is the slow part)",
    )
    parser.add_argument(
        "--undeclared",
        action="store_true",
        help="only the undeclared run: ranked=None on every result",
    )
    parser.add_argument(
        "--declared",
        action="store_true",
        help="only the declared run (the sources' own ranked flags)",
    )
    parser.add_argument(
        "--backend",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="postgres: SQLite and PostgreSQL side by side (benchmarks/sources/backends.py)",
    )
    parser.add_argument("--dsn", help="with --backend postgres: this server, not an embedded one")
    args = parser.parse_args()
    configure_logging("warning", "console")
    if args.backend == "postgres":
        from benchmarks.sources.backends import run as run_backends

        text = run_backends(args.datasets, args.only, args.dsn)
    else:
        modes = (
            tuple(
                m
                for m, only_this in zip(MODES, (args.declared, args.undeclared), strict=True)
                if only_this
            )
            or MODES
        )
        text, _ = run(
            args.datasets, args.only, args.onnx_queries, not args.no_safety, args.work_dir, modes
        )
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
