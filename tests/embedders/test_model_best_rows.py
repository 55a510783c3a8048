"""A large batch: the model embeds its best rows by words only
(``NAUTILUS_EMBEDDER_MAX_ROWS``); the others keep their lexical score, on the model's
scale, and are never dropped; the embedding deadline's report is not touched by them."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from nautilus_ranking import AdapterResult, NautilusSettings, RankingSynthesizer
from nautilus_ranking.synthesis.embedding_deadline import best_by_source_rank, best_by_words


class CountingModel:
    """A dense embedder (not a word embedder) that records each text it embeds."""

    dim = 16
    model_id = "counting-test"

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def embed(self, text: str) -> list[float]:
        self.embedded.append(text)
        vector = np.zeros(self.dim)
        for word in text.lower().split():
            vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % self.dim] += 1.0
        return vector.tolist()


ROWS = [{"id": f"r{i}", "title": f"note {i} about the weather"} for i in range(8)] + [
    {"id": "disk", "title": "orders-db disk full on the primary"},
    {"id": "lag", "title": "orders-db replication lag"},
]


def test_the_best_by_words_are_chosen_in_order_ties_by_position() -> None:
    assert best_by_words(np.array([0.1, 0.9, 0.5, 0.9]), 2).tolist() == [1, 3]
    assert best_by_words(None, 2).tolist() == [0, 1]


def test_only_the_best_rows_are_embedded_and_every_row_is_kept() -> None:
    model = CountingModel()
    ranker = RankingSynthesizer(top_k=None, embedder=model, embedding_max_rows=3)
    found = ranker.merge_ranked([AdapterResult("notes", ROWS)], {"query": "orders-db disk full"})
    ranked = found.ranking
    query_and_rows = model.embedded
    assert len(query_and_rows) == 1 + 3  # the query, and the three best rows by words
    assert any("orders-db disk full on the primary" in t for t in query_and_rows)
    assert sorted(r.row["id"] for r in ranked) == sorted(r["id"] for r in ROWS)
    assert ranked[0].row["id"] == "disk"
    assert found.embedding is None  # not a deadline: nothing to report


@pytest.mark.parametrize("query", ["???", "\U0001f980\U0001f980", "-- !"])
def test_a_query_without_words_embeds_its_sources_best_rows_only(query: str) -> None:
    """No words to pick rows by: each source's first rows, then its second, as many as
    the setting allows; never every row (a large batch would run into the deadline)."""
    model = CountingModel()
    ranker = RankingSynthesizer(top_k=None, embedder=model, embedding_max_rows=3)
    results = [AdapterResult("first", ROWS[:5]), AdapterResult("second", ROWS[5:])]
    found = ranker.merge_ranked(results, {"query": query})
    ranked = found.ranking
    assert model.embedded[0] == query
    assert sorted(model.embedded[1:]) == [
        "r0 note 0 about the weather",
        "r1 note 1 about the weather",
        "r5 note 5 about the weather",
    ]
    assert sorted(r.row["id"] for r in ranked) == sorted(r["id"] for r in ROWS)
    assert found.embedding is None


def test_the_sources_best_rows_are_chosen_in_order_ties_by_position() -> None:
    assert best_by_source_rank(np.array([1, 2, 3, 1, 2]), 3).tolist() == [0, 1, 3]


def test_unset_embeds_every_row_and_the_setting_is_declared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = CountingModel()
    RankingSynthesizer(top_k=None, embedder=model).rank(
        [AdapterResult("notes", ROWS)], {"query": "orders-db disk full"}
    )
    assert len(model.embedded) == 1 + len(ROWS)
    assert NautilusSettings().embedder_max_rows == 100
    monkeypatch.setenv("NAUTILUS_EMBEDDER_MAX_ROWS", "0")
    assert NautilusSettings().embedder_max_rows == 0
