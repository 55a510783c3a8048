"""The replay re-scores logged lists as the ranking would under other levels."""

from __future__ import annotations

import pytest

from nautilus_ranking import AdapterResult, RankingSynthesizer
from nautilus_ranking.embedders import HashingEmbedder
from nautilus_ranking.proposal.logs import Answer, Shown
from nautilus_ranking.proposal.replay import reorder, replay

WORDS = "disk full alert on the database host after the nightly backup job ran".split()


def _results() -> list[AdapterResult]:
    """Two sources whose rows match the query more or less."""
    rows = {
        src: [
            {"id": f"{src}{i}", "text": " ".join(WORDS[(i * 3 + off) % len(WORDS) :][: 4 + i % 5])}
            for i in range(12)
        ]
        for src, off in (("a", 0), ("b", 5))
    }
    return [AdapterResult(s, r, ranked=True) for s, r in rows.items()]


def _ranked(boosts: dict[str, str]) -> list[tuple[str, str]]:
    ranker = RankingSynthesizer(
        top_k=100, idf=True, embedder=HashingEmbedder(), source_boosts=boosts or None
    )
    return ranker.rank(_results(), {"query": "disk full database backup"})


def _logged(boosts: dict[str, str]) -> Answer:
    rows = _ranked(boosts)
    shown = [
        Shown(
            k,
            r.source_id,
            str(r.row["id"]),
            {"score": r.score, "relevance": r.relevance, "boost_bump": r.boost_bump},
        )
        for k, r in enumerate(rows, start=1)
    ]
    return Answer("q", "", None, "h", dict(boosts), shown, set())


@pytest.mark.parametrize(
    ("logged", "replayed"),
    [({}, {"a": "medium"}), ({"a": "low"}, {"a": "high"}), ({"b": "-low"}, {"b": "-high"}),
     ({"a": "medium"}, {})],
)  # fmt: skip
def test_replay_orders_as_the_ranking_does(
    logged: dict[str, str], replayed: dict[str, str]
) -> None:
    answer = _logged(logged)
    levels: dict[str, str | None] = {**dict.fromkeys(logged), **replayed}
    order = reorder(answer, levels)
    assert order is not None
    by_position = {s.position: (s.source, s.object_id) for s in answer.shown}
    want = [(r.source_id, str(r.row["id"])) for r in _ranked(replayed)]
    assert [by_position[p] for p in order] == want
    assert order != sorted(order)  # the levels did move rows


def test_used_rows_moved_up_count_more_uses() -> None:
    import numpy as np

    answer = _logged({})
    order = reorder(answer, {"a": "high"})
    assert order is not None
    moved_up = next(p for new, p in enumerate(order, start=1) if new < p)
    answer.used.add(moved_up)
    curve = np.linspace(0.9, 0.1, len(answer.shown))[None]
    result = replay([answer], {"a": "high"}, curve, [None])
    assert result.uses == 1 and result.estimated > 1 and result.gain > 0


def test_an_answer_without_components_is_kept_as_logged() -> None:
    import numpy as np

    answer = Answer("q", "", None, "h", {}, [Shown(1, "a", "1", {}), Shown(2, "b", "2", {})], {2})
    result = replay([answer], {"a": "high"}, np.array([[0.8, 0.4]]), [None])
    assert (result.uses, result.estimated, result.not_replayable) == (1, 1, 1)
