"""Which copy of a document is kept: the best-ranked one, unless an operator names the
sources whose copy is canonical (``NAUTILUS_RANKING_CANONICAL_SOURCES``, in order)."""

from __future__ import annotations

from typing import Any

import pytest

from nautilus_ranking import AdapterResult, NautilusSettings, RankingSynthesizer
from nautilus_ranking.request.errors import ProblemError
from nautilus_ranking.request.model import parse_request

ARTICLE = (
    "To grow the orders database volume, stop the writers, extend the volume and "
    "restart the primary; the replica catches up on its own within minutes."
)
PASTED = "Hi Tom, thanks for writing in! " + ARTICLE + " Best, the support team"


def results() -> list[AdapterResult]:
    return [
        AdapterResult("tickets", [{"id": "T-9", "text": PASTED}, {"id": "T-1", "text": "disk"}]),
        AdapterResult("helpcenter", [{"id": "HC-4", "text": ARTICLE}]),
        AdapterResult("wiki", [{"id": "W-2", "text": ARTICLE + " (mirrored)"}]),
    ]


def rank(**settings: Any) -> list[Any]:
    ranker = RankingSynthesizer(near_duplicates=0.5, **settings)
    return ranker.rank(results(), {"query": "Tom: orders database volume, thanks"})


def test_the_best_ranked_copy_is_kept_by_default() -> None:
    ranked = rank()
    assert [r.row["id"] for r in ranked][:1] == ["T-9"]  # the pasted ticket ranks first
    assert {c.id for c in ranked[0].also_from} == {"HC-4", "W-2"}


def test_a_canonical_source_keeps_its_copy_in_the_best_copys_place() -> None:
    plain = rank()
    ranked = rank(canonical_sources=["helpcenter"])
    first = ranked[0]
    assert (first.source_id, first.row["id"]) == ("helpcenter", "HC-4")
    assert first.rank == 1 and first.score == plain[0].score  # the document's place
    assert [(c.source_id, c.id, c.copy) for c in first.also_from] == [
        ("tickets", "T-9", "near"),
        ("wiki", "W-2", "near"),
    ]
    assert [r.row["id"] for r in ranked[1:]] == [r.row["id"] for r in plain[1:]]


def test_the_first_named_source_with_a_copy_wins() -> None:
    assert rank(canonical_sources=["wiki", "helpcenter"])[0].row["id"] == "W-2"
    assert rank(canonical_sources=["nowhere", "helpcenter"])[0].row["id"] == "HC-4"
    # a named source without a copy of the document changes nothing
    assert rank(canonical_sources=["nowhere"]) == rank()


def test_exact_copies_keep_the_canonical_one_too() -> None:
    row = {"id": "KB-1", "text": ARTICLE}
    batch = [AdapterResult("tickets", [row]), AdapterResult("helpcenter", [dict(row)])]
    ranker = RankingSynthesizer(top_k=5, canonical_sources=["helpcenter"])
    [kept] = ranker.rank(batch, {"query": "orders database volume"})
    assert kept.source_id == "helpcenter"
    assert [(c.source_id, c.copy) for c in kept.also_from] == [("tickets", "exact")]


def test_the_variable_is_a_list_that_does_not_turn_ranking_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NAUTILUS_RANKING_CANONICAL_SOURCES", " HelpCenter, wiki ,, ")
    settings = NautilusSettings()
    assert settings.ranking_canonical_sources == ["helpcenter", "wiki"]
    assert settings.ranking_enabled is False


def test_a_request_names_them_and_an_unknown_id_is_refused() -> None:
    from fakes import FakeSource

    from nautilus_ranking.broker import Broker
    from nautilus_ranking.request.engine import Engine
    from nautilus_ranking.request.plan import plan

    broker = Broker([FakeSource("tickets", []), FakeSource("helpcenter", [])])
    engine = Engine.of(broker)
    ok = plan(
        parse_request({"query": "q", "top_k": 3, "canonical_sources": ["helpcenter"]}),
        engine.broker,
        engine.settings,
        engine.embedder,
        100,
    )
    assert ok.effective.ranking_canonical_sources == ["helpcenter"]
    with pytest.raises(ProblemError) as refused:
        plan(
            parse_request({"query": "q", "canonical_sources": ["nope"]}),
            engine.broker,
            engine.settings,
            engine.embedder,
            100,
        )
    assert refused.value.extra["errors"][0]["field"] == "canonical_sources"
