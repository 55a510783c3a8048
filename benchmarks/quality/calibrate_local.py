"""``nautilus-ranking calibrate``'s fit, measured held out of it on each shared collection.

Each collection is one deployment: the three real sources of ``partitioned.py`` (fts,
sql, vector; a third of the corpus each), ranked with the default settings of the
embedder (top 10). Its queries are the collection's judged ones (label: a relevant row
in the top 10) and the package's shipped off-topic queries
(``nautilus_ranking/calibration/null_queries.txt``, label 0).

Cross-fitted, as calibrate would be run on the deployment: the queries are split into
``OUTER`` folds; on each, :func:`nautilus_ranking.calibration.fit.calibrate_fit` (what
the command runs) fits on the other folds and chooses ``p``: the least ``p`` abstaining
on ``NULL_RATE`` of off-topic queries (with probability 0.95 over their draw), capped by
the conformal quantile for a false-abstain rate of ``ALPHA`` (with too few answerable
queries, ``n < 1/alpha - 1``, uncapped: the off-topic side alone), and the held-out
fold is scored by that fit and abstains below that ``p``. So every query, judged or
off-topic, is scored by a fit that did not see it. Reported per collection and pooled:
the ECE (10 bins, 95% bootstrap interval), the off-topic abstain and the false abstain
(the answerable queries abstained on) with Clopper-Pearson intervals, the nDCG@10 lost
over the judged queries (an abstained answer counted 0), which side set ``p`` in each
fold, and what calibrate promised where it could not promise ``ALPHA``.

    python -m benchmarks.quality.calibrate_local [--datasets DIR] [--work-dir DIR]
        [--embedder hashing|onnx] [--alpha A] [--null-rate R] [--seed N] [--out FILE.md]

``--work-dir``: the fetched rows of ``confidence_fit.py`` (its own queries, reused)
and the off-topic queries' (kept there).
"""

from __future__ import annotations

import argparse
import asyncio
import pickle
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.quality.confidence_fit import ensure_fetched, fetched_path, own_answers
from benchmarks.quality.ir_collections import DATASETS, Collection, each_collection, ndcg_at
from benchmarks.quality.partitioned import SOURCE_LIMIT, build_broker, onnx_embedder
from nautilus_ranking import AdapterResult, RankingSynthesizer
from nautilus_ranking.calibration.collect import shipped_entry
from nautilus_ranking.calibration.fit import Observations, calibrate_fit, fold_of
from nautilus_ranking.calibration.null_queries import shipped_null_queries
from nautilus_ranking.embedders import embedder_from_name
from nautilus_ranking.embedders.default import idf_default
from nautilus_ranking.log import configure_logging
from nautilus_ranking.selection.abstain_threshold import clopper_pearson
from nautilus_ranking.selection.confidence import FEATURES
from nautilus_ranking.selection.confidence_fitting import ece, ece_interval, predict

SCENARIO = "partitioned"
TOP_K = 10
OUTER = 5
ALPHA = 0.02
NULL_RATE = 0.9
SEED = 681


@dataclass
class Scored:
    """One collection's queries ranked: signals, whether judged, label, nDCG@10."""

    setup: str
    x: np.ndarray
    judged: np.ndarray
    label: np.ndarray
    ndcg: np.ndarray


def null_answers(
    collection: Collection, work: Path, embedder: str, vector: Any
) -> list[list[AdapterResult]]:
    """The sources' answers to the shipped off-topic queries (kept in ``work``)."""
    cache = work / embedder / collection.name / f"{SCENARIO}-null.pickle"
    if cache.is_file():
        with cache.open("rb") as handle:
            kept: list[list[AdapterResult]] = pickle.load(handle)
            return kept
    broker = build_broker(collection, SCENARIO, work / embedder / collection.name, vector)

    async def run() -> list[list[AdapterResult]]:
        broker.limit = SOURCE_LIMIT
        return [await broker.fetch(text) for text in shipped_null_queries()]

    with broker:
        answers = asyncio.run(run())
    with cache.open("wb") as handle:
        pickle.dump(answers, handle)
    return answers


def score_collection(collection: Collection, datasets: Path, work: Path, embedder: str) -> Scored:
    """Rank the collection's judged and off-topic queries under the embedder's defaults
    (kept in ``work``)."""
    kept = work / embedder / collection.name / f"{SCENARIO}-scored.pickle"
    if kept.is_file():
        with kept.open("rb") as handle:
            found: Scored = pickle.load(handle)
            return found
    found = _score(collection, datasets, work, embedder)
    with kept.open("wb") as handle:
        pickle.dump(found, handle)
    return found


def _score(collection: Collection, datasets: Path, work: Path, embedder: str) -> Scored:
    ensure_fetched(datasets, work, embedder, [collection.name])
    own = own_answers(fetched_path(work, embedder, collection.name, SCENARIO))
    vector = onnx_embedder() if embedder == "onnx" else None
    nulls = null_answers(collection, work, embedder, vector)
    ranker = RankingSynthesizer(
        top_k=TOP_K,
        idf=idf_default(embedder),
        lexical="bm25",
        embedder=embedder_from_name(
            embedder, cache_size=200_000, data_dir=work / "vectors", disk_cache_mb=512
        ),
    )
    texts = shipped_null_queries()
    items = [(texts[i], r, {}) for i, r in enumerate(nulls)]
    items += [(collection.queries[q], r, collection.qrels[q]) for q, r in sorted(own.items())]
    rows, setups = [], []
    for text, results, grades in items:
        ranked = ranker.merge_ranked(results, {"query": text})
        if ranked.confidence is None:
            continue
        ids = [str(r.row.get("id")) for r in ranked.ranking]
        label = int(any(grades.get(d, 0) >= 1 for d in ids[:TOP_K]))
        vector_ = ranked.confidence.signals.vector()
        rows.append((vector_, bool(grades), label, ndcg_at(ids, grades, TOP_K) if grades else 0))
        setups.append(ranked.confidence.setup)
    return Scored(
        setups[0],
        np.array([r[0] for r in rows]),
        np.array([r[1] for r in rows]),
        np.array([r[2] for r in rows]),
        np.array([r[3] for r in rows], dtype=float),
    )


def crossfit(scored: Scored) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Each query's held-out probability and abstain, and each fold's promise."""
    n = len(scored.label)
    fold = fold_of(n, OUTER, SEED)
    prob = np.zeros(n)
    abstain = np.zeros(n, dtype=bool)
    promises = []
    shipped = shipped_entry(scored.setup)
    for f in range(OUTER):
        train, test = fold != f, fold == f
        seen = Observations(
            scored.setup, scored.x[train], scored.judged[train], scored.label[train]
        )
        fitted = calibrate_fit(seen, shipped, ALPHA, NULL_RATE)
        features = tuple(fitted.entry["features"])
        at = [FEATURES.index(name) for name in features]
        prob[test] = predict(fitted.entry, scored.x[test][:, at])
        p = fitted.threshold["recommended_p"]
        abstain[test] = prob[test] < p if p is not None else False
        chosen = fitted.threshold
        guaranteed = "" if chosen["false_abstain_guaranteed"] else " (no alpha guarantee)"
        promises.append(f"{chosen['chosen_on']}{guaranteed}: {chosen['promise']}")
    return prob, abstain, promises


def _rate(hit: np.ndarray) -> str:
    k, n = int(hit.sum()), len(hit)
    low, high = clopper_pearson(k, n)
    return f"{k}/{n} = {k / n:.1%} [{low:.1%}, {high:.1%}]" if n else "-"


def report(scored: dict[str, Scored]) -> str:
    lines = [
        f"Cross-fitted ({OUTER} folds within each collection; every query scored by a fit "
        f"that did not see it; shuffle {SEED}), {SCENARIO}, alpha {ALPHA}, null rate {NULL_RATE}.",
        "",
        "| collection | setup | judged (answerable) | off-topic | ECE all [95% CI] | "
        "ECE judged | off-topic abstain [CP 95%] | false abstain [CP 95%] | "
        "nDCG@10 lost | p set by (folds) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    pooled: dict[str, list[np.ndarray]] = {"p": [], "y": [], "a": [], "j": [], "n": []}
    notes = []
    for name, s in scored.items():
        prob, abstain, promises = crossfit(s)
        y = s.label.astype(float)
        low, high = ece_interval(prob, y)
        answerable = s.judged & (s.label == 1)
        lost = float(np.where(abstain[s.judged], s.ndcg[s.judged], 0.0).mean())
        sides = Counter(p.split(":")[0] for p in promises)
        unguaranteed = [p for p in promises if "(no alpha guarantee)" in p]
        lines.append(
            f"| {name} | {s.setup} | {int(s.judged.sum())} ({int(answerable.sum())}) | "
            f"{int((~s.judged).sum())} | {ece(prob, y):.3f} [{low:.3f}, {high:.3f}] | "
            f"{ece(prob[s.judged], y[s.judged]):.3f} | {_rate(abstain[~s.judged])} | "
            f"{_rate(abstain[answerable])} | {lost:.4f} | "
            f"{', '.join(f'{side} {count}' for side, count in sorted(sides.items()))} |"
        )
        if unguaranteed:
            notes.append(f"- {name}: {unguaranteed[0].split(': ', 1)[1]}")
        for key, value in zip("pyajn", (prob, y, abstain, s.judged, s.ndcg), strict=True):
            pooled[key].append(value)
    p, y, a, j, n = (np.concatenate(pooled[k]) for k in "pyajn")
    answerable = j & (y == 1)
    low, high = ece_interval(p, y)
    lost = float(np.where(a[j], n[j], 0.0).mean())
    lines.append(
        f"| pooled | | {int(j.sum())} ({int(answerable.sum())}) | {int((~j).sum())} | "
        f"{ece(p, y):.3f} [{low:.3f}, {high:.3f}] | {ece(p[j], y[j]):.3f} | "
        f"{_rate(a[~j])} | {_rate(a[answerable])} | {lost:.4f} | |"
    )
    if notes:
        lines += [
            "",
            "p set by: null, the off-topic target; answerable, the false-abstain cap.",
            "Where a fold had too few answerable queries for alpha, calibrate promised:",
            *notes,
        ]
    return "\n".join(lines)


def main() -> int:
    global ALPHA, NULL_RATE, SEED
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DATASETS)
    parser.add_argument("--work-dir", type=Path)
    parser.add_argument("--embedder", default="hashing", choices=("hashing", "onnx"))
    parser.add_argument("--out", type=Path, help="write the markdown report here")
    parser.add_argument("--alpha", type=float, default=ALPHA, help="the false-abstain target")
    parser.add_argument("--null-rate", type=float, default=NULL_RATE)
    parser.add_argument("--seed", type=int, default=SEED, help="the outer folds' shuffle")
    args = parser.parse_args()
    ALPHA, NULL_RATE, SEED = args.alpha, args.null_rate, args.seed
    configure_logging("error", "console")
    with tempfile.TemporaryDirectory() as scratch:
        work = args.work_dir if args.work_dir is not None else Path(scratch)
        scored = {}
        for collection in each_collection(args.datasets):
            scored[collection.name] = score_collection(
                collection, args.datasets, work, args.embedder
            )
            print(f"{args.embedder}/{collection.name}: ranked", file=sys.stderr, flush=True)
    text = report(scored)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
