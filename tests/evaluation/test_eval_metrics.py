"""nautilus-ranking eval's metrics: worked examples, and a cross-check against trec_eval
(pytrec_eval) on the shared collections, to 1e-9.

trec_eval orders a run by score, breaking ties by document id in *reverse*
lexicographic order; nautilus's metrics take the ranked list as the synthesizer
ordered it. The cross-check therefore hands trec_eval tie-free scores (``n - i``
for position ``i``), and one test shows the tie-break to match when scores tie.
"""

from __future__ import annotations

import asyncio
import math
import random
from pathlib import Path

import pytest
import pytrec_eval
from eval_support import corpus_ids, dataset, qrels, queries

from nautilus_ranking.broker import Broker
from nautilus_ranking.embedders import HashingEmbedder
from nautilus_ranking.evaluation.alternatives import Alternative
from nautilus_ranking.evaluation.collection import write_sources
from nautilus_ranking.evaluation.metrics import (
    first_occurrences,
    ndcg_at,
    recall_at,
    reciprocal_rank,
)
from nautilus_ranking.evaluation.sweep import Fetched, ranked_rows, row_id, score
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.synthesis.ranking import RankingSynthesizer

MEASURES = {"ndcg_cut.10", "recall.10", "recip_rank"}
Run = dict[str, list[str | None]]


# --- worked examples ---------------------------------------------------------------------


def test_ndcg_worked_example_with_grades() -> None:
    grades = {"a": 2, "b": 1, "c": 0}
    # b at rank 1 (gain 1), x unjudged, a at rank 3 (gain 2); ideal: a, b
    dcg = 1 / math.log2(2) + 2 / math.log2(4)
    idcg = 2 / math.log2(2) + 1 / math.log2(3)
    assert ndcg_at(["b", "x", "a"], grades) == pytest.approx(dcg / idcg, abs=1e-12)
    assert ndcg_at(["a", "b"], grades) == pytest.approx(1.0)
    assert ndcg_at(["b", "x", "a"], grades, k=1) == pytest.approx(1 / 2)  # 1 / (2 / 1)


def test_recall_counts_grade_one_and_up_only() -> None:
    grades = {"a": 2, "b": 1, "c": 0}  # c is judged, not relevant
    assert recall_at(["b", "c", "a"], grades, k=2) == 1 / 2
    assert recall_at(["b", "c", "a"], grades, k=3) == 2 / 2
    assert recall_at(["x"], {"c": 0}) == 0.0  # nothing relevant: 0, never a division by 0


def test_reciprocal_rank_looks_past_the_cutoff() -> None:
    grades = {"z": 1}
    ranked = [f"d{i}" for i in range(14)] + ["z"]
    assert reciprocal_rank(ranked, grades) == 1 / 15
    assert reciprocal_rank(["a"], grades) == 0.0


def test_a_repeated_id_counts_once_and_a_row_without_id_keeps_its_place() -> None:
    grades = {"a": 1, "b": 1}
    assert first_occurrences(["x", "b", "b", None, "a"]) == ["x", "b", None, "a"]
    assert reciprocal_rank(["x", "x", "b"], grades) == 1 / 2  # x counted once
    assert reciprocal_rank([None, "a"], grades) == 1 / 2  # the id-less row is read
    assert recall_at(["b", "b", "b", "a"], grades, k=2) == 2 / 2  # b, a after dedup


# --- the reference ---------------------------------------------------------------------


def trec_eval(run: Run, grades: dict[str, dict[str, int]]) -> dict[str, dict[str, float]]:
    """pytrec_eval on a tie-free run: score ``n - i`` at position ``i``; a row without an id
    becomes a placeholder id no judgment has."""
    trec_run = {}
    for qid, docs in run.items():
        kept = first_occurrences(docs)
        trec_run[qid] = {
            doc if doc is not None else f"__no_id_{i}": float(len(kept) - i)
            for i, doc in enumerate(kept)
        }
    evaluator = pytrec_eval.RelevanceEvaluator({q: grades[q] for q in run}, MEASURES)
    return dict(evaluator.evaluate({q: r for q, r in trec_run.items() if r}))


def assert_same_as_trec_eval(run: Run, grades: dict[str, dict[str, int]]) -> int:
    reference = trec_eval(run, grades)
    checked = 0
    for qid, docs in run.items():
        expected = reference.get(qid, {"ndcg_cut_10": 0.0, "recall_10": 0.0, "recip_rank": 0.0})
        got = {
            "ndcg_cut_10": ndcg_at(docs, grades[qid]),
            "recall_10": recall_at(docs, grades[qid]),
            "recip_rank": reciprocal_rank(docs, grades[qid]),
        }
        for measure, value in got.items():
            assert value == pytest.approx(expected[measure], abs=1e-9), (qid, measure)
        checked += 1
    return checked


def shuffled_run(
    folder: Path, seed: int = 7, depth: int = 50
) -> tuple[Run, dict[str, dict[str, int]]]:
    """Per query: the judged documents mixed with unjudged ones, in a seeded random order."""
    grades = qrels(folder)
    ids = corpus_ids(folder)
    rng = random.Random(seed)
    run: Run = {}
    for qid, judged in sorted(grades.items()):
        pool = list(judged) + rng.sample(ids, 40)
        rng.shuffle(pool)
        run[qid] = list(pool[:depth])
    return run, grades


@pytest.mark.parametrize("name", ["cranfield", "cisi", "cacm", "adi"])
def test_metrics_match_trec_eval_on_seeded_runs_of_each_shared_collection(name: str) -> None:
    run, grades = shuffled_run(dataset(name))
    assert assert_same_as_trec_eval(run, grades) == len(grades)


def test_graded_judgments_are_exercised() -> None:
    """Cranfield's grades 1-4: a linear-gain nDCG that ignored grades would differ here."""
    grades = qrels(dataset("cranfield"))
    assert {g for per in grades.values() for g in per.values()} >= {1, 2, 3, 4}


def test_ties_match_when_broken_as_trec_eval_breaks_them() -> None:
    """trec_eval sorts by score, then document id descending: sort the same way, then agree."""
    run, grades = shuffled_run(dataset("adi"), seed=3)
    rng = random.Random(5)
    scored = {
        qid: {d: float(rng.randint(0, 3)) for d in docs if d is not None}
        for qid, docs in run.items()
    }  # four distinct scores: many ties
    evaluator = pytrec_eval.RelevanceEvaluator({q: grades[q] for q in scored}, MEASURES)
    reference = evaluator.evaluate(scored)
    for qid, docs in scored.items():
        by_id_desc = sorted(docs, reverse=True)
        ordered = sorted(by_id_desc, key=lambda d: -docs[d])  # stable: ties keep id desc
        assert ndcg_at(ordered, grades[qid]) == pytest.approx(
            reference[qid]["ndcg_cut_10"], abs=1e-9
        )
        assert reciprocal_rank(ordered, grades[qid]) == pytest.approx(
            reference[qid]["recip_rank"], abs=1e-9
        )


# --- real runs: the SQLite sources, the synthesizers, the eval pipeline --------------------


@pytest.fixture(scope="module")
def adi_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Fetched]:
    folder = dataset("adi")
    out = tmp_path_factory.mktemp("adi-sources")
    settings = NautilusSettings(data_dir=out / "data")
    config = write_sources(folder, out, settings=settings)
    grades, texts = qrels(folder), queries(folder)
    with Broker.from_config(config, settings) as broker:

        async def fetch() -> list[Fetched]:
            return [
                Fetched(q, texts[q], grades[q], await broker.fetch(texts[q]))
                for q in texts
                if q in grades
            ]

        return asyncio.run(fetch())


@pytest.mark.parametrize(
    "ranker",
    [
        None,
        RankingSynthesizer(idf=True, embedder=HashingEmbedder()),
        RankingSynthesizer(top_k=10, source_boosts={"fts": "high"}, embedder=HashingEmbedder()),
    ],
    ids=["passthrough", "idf-on", "fts-high-top10"],
)
def test_eval_scores_match_trec_eval_on_real_adi_runs(
    adi_runs: list[Fetched], ranker: RankingSynthesizer | None
) -> None:
    alternative = Alternative("x", "idf" if ranker else "passthrough", ranker)
    sources = ["fts", "sql", "vector"]
    scored = score(alternative, adi_runs, sources, "id")
    run: Run = {
        f.qid: [row_id(row, "id") for _, row in ranked_rows(alternative, f)] for f in adi_runs
    }
    grades = {f.qid: dict(f.grades) for f in adi_runs}
    reference = trec_eval(run, grades)
    for i, fetched in enumerate(adi_runs):
        expected = reference.get(fetched.qid, {})
        assert scored.ndcg[i] == pytest.approx(expected.get("ndcg_cut_10", 0.0), abs=1e-9)
        assert scored.recall[i] == pytest.approx(expected.get("recall_10", 0.0), abs=1e-9)
        assert scored.rr[i] == pytest.approx(expected.get("recip_rank", 0.0), abs=1e-9)
    assert scored.ndcg.mean() > 0.1  # real runs that find relevant documents
    assert sum(scored.share.values()) == pytest.approx(1.0)
