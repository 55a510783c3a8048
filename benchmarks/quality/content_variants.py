"""Where the default falls short of the central reference: content scored other ways.

The default (the model, IDF on) is within 0.005 of ``central_rerank_hybrid`` in six of
the eight cells of ``idf_default.py`` and about 0.01 below it in CACM's two. This runs
the same cells (sources undeclared, text mode, top 10, the model) with the shipped
ranker and with one part of it replaced at a time, each difference taken against the
central reference on the same union:

* ``bm25 a=0.7`` / ``bm25 a=0.5``: the lexical half beside the model is the batch's BM25
  (the lexical scorer of ranking by words) instead of the IDF-weighted word cosine, at
  the shipped semantic share and at an even split;
* ``corpus bm25``: the lexical half is the central index's own BM25, with whole-corpus
  statistics a broker never has (an upper bound on what better statistics could give);
* ``content ranks``: content is the reciprocal-rank fusion (k = 60) of its semantic and
  lexical orders (as the central reference fuses BM25 and the model), not the convex
  combination of their normalised scores;
* ``content alone``: no vote from the sources' own orders, only content's.

The shipped ranking's difference carries its 95% paired bootstrap interval.

The replacements are made on the module functions the ranking pass calls, for the
length of one cell, and undone after: nothing here changes what the package ships.

    python -m benchmarks.quality.content_variants [--datasets DIR] [--work-dir DIR]

``--work-dir``: the fetched rows of ``confidence_fit.py`` / ``idf_default.py`` (reused).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

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
from benchmarks.quality.ir_collections import (
    DATASETS,
    ci_text,
    each_collection,
    ndcg_at,
    paired_ci,
)
from benchmarks.quality.partitioned import onnx_embedder
from nautilus_ranking import RankingSynthesizer
from nautilus_ranking.embedders import embedder_from_name
from nautilus_ranking.log import configure_logging
from nautilus_ranking.sources.sqlite.fts import fts_match_expression
from nautilus_ranking.synthesis import content, fusion, lexical
from nautilus_ranking.synthesis.candidates import row_texts
from nautilus_ranking.text.tokens import TokenBatch

#: The bar: a cell at or above the central reference minus this.
BAR = -0.005


class Query:
    """The query being ranked and its collection's central index (``corpus bm25`` reads them)."""

    text = ""
    central: CentralRerank | None = None


def _batch_bm25(
    sub: Any, texts: Any, batch: Any, query_tokens: list[str], weights: Any, warnings: Any
) -> Any:
    texts = texts if texts is not None else row_texts(sub.rows, warnings)
    batch = batch if batch is not None else TokenBatch.from_texts(texts)
    every = np.arange(batch.n_texts)
    return lexical.bm25_scores(batch, query_tokens, every, True), texts, batch


def _corpus_bm25(
    sub: Any, texts: Any, batch: Any, query_tokens: list[str], weights: Any, warnings: Any
) -> Any:
    texts = texts if texts is not None else row_texts(sub.rows, warnings)
    batch = batch if batch is not None else TokenBatch.from_texts(texts)
    assert Query.central is not None
    ids = [str(row.get("id")) for row in sub.rows]
    expression = fts_match_expression(Query.text)
    marks = ",".join("?" * len(ids))
    found = dict(
        Query.central._db.execute(
            f"SELECT id, bm25(docs) FROM docs WHERE docs MATCH ? AND id IN ({marks})",
            [expression, *ids],
        ).fetchall()
    )
    return np.array([-found.get(i, 0.0) for i in ids], dtype=np.float64), texts, batch


def _rank_fused(semantic: np.ndarray, lexical_part: np.ndarray, share: float = 0.7) -> np.ndarray:
    """RRF (k = 60) of the two normalised scores' orders (a row scoring 0 has no term),
    scaled so that first in both is 1."""
    k = fusion.RRF_K
    fused = np.zeros(len(semantic), dtype=np.float64)
    for scores in (semantic, lexical_part):
        ranks = fusion.descending_ranks(scores)
        fused += np.where(scores > 0, 1.0 / (k + ranks), 0.0)
    scaled: np.ndarray = fused * ((k + 1.0) / 2.0)
    return scaled


def _no_source_votes(*args: Any, **kwargs: Any) -> Any:
    evidence, voters = _ORIGINAL["source_evidence"](*args, **kwargs)
    return np.zeros_like(evidence), voters


def _no_unranked_votes(similarity: np.ndarray, *args: Any, **kwargs: Any) -> np.ndarray:
    return np.zeros(len(similarity), dtype=np.float64)


_ORIGINAL: dict[str, Callable[..., Any]] = {
    "words": content.words_beside_model,
    "convex": fusion.convex_content,
    "source_evidence": fusion.source_evidence,
    "unranked_votes": fusion.unranked_votes,
}

#: Each variant: the replacements it makes (what the ranking pass calls, by name).
VARIANTS: dict[str, dict[str, Callable[..., Any]]] = {
    "shipped": {},
    "bm25 a=0.7": {"words": _batch_bm25},
    "bm25 a=0.5": {"words": _batch_bm25, "convex": partial(_ORIGINAL["convex"], share=0.5)},
    "corpus bm25": {"words": _corpus_bm25},
    "content ranks": {"words": _batch_bm25, "convex": _rank_fused},
    "content alone": {"source_evidence": _no_source_votes, "unranked_votes": _no_unranked_votes},
}


@contextmanager
def replaced(parts: dict[str, Callable[..., Any]]) -> Iterator[None]:
    """The ranking pass with ``parts`` in place of the shipped functions, restored after."""
    chosen = {**_ORIGINAL, **parts}
    content.words_beside_model = chosen["words"]  # type: ignore[assignment]
    fusion.convex_content = chosen["convex"]  # type: ignore[assignment]
    fusion.source_evidence = chosen["source_evidence"]  # type: ignore[assignment]
    fusion.unranked_votes = chosen["unranked_votes"]  # type: ignore[assignment]
    try:
        yield
    finally:
        content.words_beside_model = _ORIGINAL["words"]  # type: ignore[assignment]
        fusion.convex_content = _ORIGINAL["convex"]  # type: ignore[assignment]
        fusion.source_evidence = _ORIGINAL["source_evidence"]  # type: ignore[assignment]
        fusion.unranked_votes = _ORIGINAL["unranked_votes"]  # type: ignore[assignment]


def cell(
    fetched: dict[str, list], collection: Any, ranker: RankingSynthesizer, central: CentralRerank
) -> dict[str, list[float]]:
    """nDCG@10 of the central reference and of each variant, query by query."""
    scores: dict[str, list[float]] = {"central": [], **{name: [] for name in VARIANTS}}
    Query.central = central
    for qid, results in sorted(fetched.items()):
        grades = collection.qrels.get(qid, {})
        plain = text_mode(results)
        Query.text = collection.queries[qid]
        for name, parts in VARIANTS.items():
            with replaced(parts):
                rows = ranker.rank(plain, {"query": Query.text})
            scores[name].append(ndcg_at([str(r.row.get("id")) for r in rows], grades, TOP_K))
        union = list(dict.fromkeys(str(r["id"]) for res in plain for r in res.rows))
        scores["central"].append(ndcg_at(central.hybrid(union, Query.text), grades, TOP_K))
    return scores


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DATASETS)
    parser.add_argument("--work-dir", type=Path, default=None)
    args = parser.parse_args()
    configure_logging("ERROR")
    model = onnx_embedder()
    if model is None:
        print("the embed extra is not installed: nothing to compare", file=sys.stderr)
        return 1
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="content-variants-"))
    collections = {c.name: c for c in each_collection(args.datasets)}
    ensure_fetched(args.datasets, work, "onnx", collections)
    embedder = embedder_from_name(
        "onnx", cache_size=200_000, data_dir=work / "vectors", disk_cache_mb=512
    )
    ranker = RankingSynthesizer(top_k=TOP_K, idf=True, lexical="bm25", embedder=embedder)
    names = list(VARIANTS)
    lines = [
        "| cell | queries | central BM25+dense | shipped [95% CI] | "
        + " | ".join(names[1:])
        + " |",
        "|---|---|---|" + "---|" * len(names),
    ]
    differences: dict[str, list[float]] = {name: [] for name in names}
    for cname, collection in collections.items():
        central = CentralRerank(collection, model)
        for scenario in SCENARIOS:
            fetched = own_answers(fetched_path(work, "onnx", cname, scenario))
            scores = cell(fetched, collection, ranker, central)
            means = {name: float(np.mean(values)) for name, values in scores.items()}
            for name in names:
                differences[name].append(means[name] - means["central"])
            lines.append(
                f"| {cname}, {scenario} | {len(scores['central'])} | {means['central']:.3f} | "
                + ci_text(paired_ci(scores["shipped"], scores["central"]))
                + " | "
                + " | ".join(f"{means[n] - means['central']:+.3f}" for n in names[1:])
                + " |"
            )
            print(lines[-1], file=sys.stderr, flush=True)
    lines.append(
        "| mean | | | " + " | ".join(f"{np.mean(differences[n]):+.4f}" for n in names) + " |"
    )
    lines.append(
        f"| cells at or above central {BAR:+.3f} | | | "
        + " | ".join(
            f"{sum(d >= BAR for d in differences[n])} of {len(differences[n])}" for n in names
        )
        + " |"
    )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
