"""Inside the Nautilus broker the answer abstains in ``merge``: ``data`` is empty, so the
broker's hash and attestation are the abstained answer's, and the ranked route and tool
say why and which rows were nearest (a stand-in broker: what ``attach_ranking`` uses)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from structlog.testing import capture_logs
from test_upstream_parts import RESULTS, FakeBroker, synthesizer

from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.synthesis.ranking import RankingSynthesizer
from nautilus_ranking.upstream import attach_ranking
from nautilus_ranking.upstream.ranked_answer import ranked_answer
from nautilus_ranking.upstream.request_scope import request_scope

QUERY = "disk full on orders-db"


def abstaining(min_confidence: float) -> Any:
    ranker = RankingSynthesizer(top_k=2)
    merging = synthesizer(ranker)
    merging.min_confidence = min_confidence
    return merging


def test_below_the_minimum_merge_hands_over_no_rows_and_keeps_the_nearest() -> None:
    with request_scope(QUERY) as scope:
        merged = abstaining(1.0).merge(RESULTS)
    assert merged == {"runbooks": [], "tickets": []}  # every source keeps its key
    outcome = scope.outcome
    assert outcome is not None and outcome.ranking == ()
    assert outcome.abstain is not None and outcome.abstain["abstained"] is True
    assert [r.row["id"] for r in outcome.nearest] == ["T-1", "RB-2"]
    assert outcome.confidence is not None and outcome.confidence["value"] is not None
    shown = outcome.to_dict()
    assert [n["id"] for n in shown["abstain"]["nearest"]] == ["T-1", "RB-2"]
    answer = ranked_answer(
        SimpleNamespace(model_dump=lambda mode: {"request_id": "r", "data": merged}), outcome
    )
    assert answer["rows"] == [] and answer["sources"] == ["runbooks", "tickets"]
    assert answer["ranking"]["abstained"] is True
    assert [(n["source"], n["id"]) for n in answer["ranking"]["abstain"]["nearest"]] == [
        ("tickets", "T-1"),
        ("runbooks", "RB-2"),
    ]


def test_at_zero_or_above_the_confidence_merge_hands_over_the_rows() -> None:
    with request_scope(QUERY) as scope:
        merged = abstaining(0.0).merge(RESULTS)
    assert [r["id"] for rows in merged.values() for r in rows] == ["T-1", "RB-2"]
    assert scope.outcome is not None and scope.outcome.abstain == {
        "min_confidence": 0.0,
        "abstained": False,
    }
    answer = ranked_answer(
        SimpleNamespace(model_dump=lambda mode: {"request_id": "r", "data": merged}),
        scope.outcome,
    )
    assert answer["ranking"]["abstained"] is False
    assert answer["ranking"]["confidence"] == scope.outcome.confidence["value"]  # type: ignore[index]


def test_a_failed_source_never_makes_the_broker_abstain() -> None:
    failed = SimpleNamespace(source_id="graph", rows=[], error="timeout", duration_ms=1)
    with request_scope(QUERY) as scope:
        merged = abstaining(1.0).merge([*RESULTS, failed])
    assert sum(map(len, merged.values())) == 2
    assert scope.outcome is not None and scope.outcome.abstain is not None
    assert scope.outcome.abstain["reason"] == "fail open: 1 source(s) failed"


def test_each_agent_s_profile_has_its_own_minimum(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NAUTILUS_PROFILES__STRICT__RANKING_MIN_CONFIDENCE", "1")
    monkeypatch.setenv("NAUTILUS_PROFILES__STRICT__AGENTS", "strict-bot")
    broker = FakeBroker(["r1", "r2"])
    with capture_logs():  # the broker is not installed here: the version warning
        attached = attach_ranking(broker, NautilusSettings(ranking_top_k=2))

    async def both() -> list[Any]:
        return list(
            await asyncio.gather(
                broker.arequest("strict-bot", QUERY), broker.arequest("someone", QUERY)
            )
        )

    strict, other = asyncio.run(both())
    assert strict.data == {"runbooks": [], "tickets": []}
    assert [r["id"] for rows in other.data.values() for r in rows] == ["T-1", "RB-2"]
    strict_ranking, other_ranking = attached.ranking("r1"), attached.ranking("r2")
    assert strict_ranking is not None and strict_ranking.abstain is not None
    assert strict_ranking.abstain["abstained"] is True and strict_ranking.profile == "strict"
    assert other_ranking is not None and other_ranking.abstain is None
