"""The relevance-cut table of ``nautilus-ranking eval --sweep``, on rows made here."""

from __future__ import annotations

import pytest

from nautilus_ranking import AdapterResult, HashingEmbedder, NautilusSettings, RankingSynthesizer
from nautilus_ranking.evaluation.cuts import cut_settings, score_cuts
from nautilus_ranking.evaluation.metrics import ndcg_at, recall_at
from nautilus_ranking.evaluation.sweep import Fetched
from nautilus_ranking.selection.cut import CUT_SETTINGS, RelevanceCut, relevance_cut

DOCS = [
    {"id": f"d{i}", "text": text}
    for i, text in enumerate(
        [
            "disk full on the orders database",
            "orders database disk nearly full",
            "team lunch on friday",
            "disk usage alert for orders",
            "quarterly budget review",
            "lunch menu for the week",
            "database backups of orders",
            "holiday calendar",
        ]
    )
]
RUNS = [
    Fetched(
        "q1",
        "orders database disk full",
        {"d0": 1, "d1": 2, "d3": 1},
        [AdapterResult("a", DOCS[:4], ranked=True), AdapterResult("b", DOCS[4:], ranked=True)],
    ),
    Fetched(
        "q2",
        "lunch",
        {"d2": 1, "d5": 1},
        [AdapterResult("a", DOCS[:4], ranked=True), AdapterResult("b", DOCS[4:], ranked=True)],
    ),
]


def test_every_documented_setting_and_the_current_one_are_measured() -> None:
    assert [str(c) if c else "off" for c in cut_settings(None)] == list(CUT_SETTINGS)
    assert cut_settings("relative:0.85")[-1] == RelevanceCut("relative", 0.85)
    assert len(cut_settings("relative:0.8")) == len(CUT_SETTINGS)  # listed once


def test_each_row_is_the_cut_of_one_ranking() -> None:
    settings = NautilusSettings(ranking_top_k=5, ranking_cut="gap:0.1")
    embedder = HashingEmbedder()
    table = score_cuts(settings, embedder, RUNS, "id", k=5)
    assert [t.current for t in table].count(True) == 1
    assert next(t for t in table if t.current).setting == "gap:0.1"
    ranker = RankingSynthesizer(top_k=5, embedder=embedder)
    for entry in table:
        cut = (
            None
            if entry.setting == "off"
            else RelevanceCut(entry.setting.split(":")[0], float(entry.setting.split(":")[1]))
        )
        for q, run in enumerate(RUNS):
            ranked = ranker.rank(run.results, {"query": run.text})
            kept = [str(r.row["id"]) for r in ranked[: relevance_cut(ranked, cut)]]
            assert entry.handed[q] == len(kept)
            assert entry.irrelevant[q] == sum(1 for d in kept if d not in run.grades)
            assert entry.recall[q] == pytest.approx(recall_at(kept, run.grades, 5))
            assert entry.ndcg[q] == pytest.approx(ndcg_at(kept, run.grades, 5))
    off = table[0]
    assert off.setting == "off" and list(off.handed) == [5, 5]


def test_under_passthrough_the_cuts_are_read_on_the_default_ranking() -> None:
    table = score_cuts(NautilusSettings(), HashingEmbedder(), RUNS, "id", k=10)
    assert table[0].current and table[0].setting == "off"
    assert list(table[0].handed) == [8, 8]  # no top K: every row
    assert all(t.handed.min() >= 1 for t in table)
