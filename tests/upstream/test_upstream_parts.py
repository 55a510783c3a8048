"""The parts of the attachment to the Nautilus broker that need no broker: row views,
source kinds, the bounded accessor, the synthesizer and its fallbacks (the real broker:
test_nautilus_broker.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from structlog.testing import capture_logs

from nautilus_ranking import NautilusSettings, RankingSynthesizer
from nautilus_ranking.embedders.default import model_installed
from nautilus_ranking.upstream import IncompatibleBrokerError, attach_ranking
from nautilus_ranking.upstream.outcome import RequestRanking
from nautilus_ranking.upstream.request_scope import current_scope, request_scope
from nautilus_ranking.upstream.row_views import row_view
from nautilus_ranking.upstream.source_kinds import UNKNOWN, kind_of, kinds_of
from nautilus_ranking.upstream.store import RankingStore, kept_size
from nautilus_ranking.upstream.synthesizer import BrokerSynthesizer
from nautilus_ranking.upstream.version import check_broker_version


def test_a_pgvector_row_is_read_through_its_metadata_without_its_vector() -> None:
    kind = kind_of(
        SimpleNamespace(id="notes", type="pgvector", embedding_column=None, metadata_column=None)
    )
    row = {
        "id": "N-1",
        "metadata": json.dumps({"title": "disk full", "id": "x"}),
        "embedding": [0.1, 0.2],
    }
    view = row_view(row, kind)
    assert view == {"id": "N-1", "title": "disk full"}  # the row's own keys win
    assert row["metadata"].startswith("{") and "embedding" in row  # never changed
    broken = {"id": "N-2", "metadata": "not json", "embedding": [0.1]}
    assert row_view(broken, kind) == {"id": "N-2", "metadata": "not json"}
    plain = {"id": 1, "title": "t"}
    assert row_view(plain, kinds_of([SimpleNamespace(id="t", type="postgres")])["t"]) is plain
    assert row_view({"id": 1, "embedding": [1.0]}, UNKNOWN) == {"id": 1}


def test_only_pgvector_order_is_declared_relevance() -> None:
    kinds = kinds_of(
        SimpleNamespace(id=t, type=t)
        for t in ("pgvector", "postgres", "static", "elasticsearch", "neo4j", "mine")
    )
    assert {sid: k.ranked for sid, k in kinds.items()} == {
        "pgvector": True,
        "postgres": False,
        "static": False,
        "elasticsearch": False,
        "neo4j": False,
        "mine": None,
    }


def test_the_store_keeps_the_latest_only() -> None:
    store = RankingStore(keep=2)
    for i in range(3):
        store.put(RequestRanking(f"r{i}", "q", ()))
    assert [store.get(f"r{i}") is not None for i in range(3)] == [False, True, True]
    with pytest.raises(ValueError, match="keep must be an integer >= 0"):
        RankingStore(keep=-1)
    nothing = RankingStore(keep=0)  # a served broker's: its ranked route needs none
    nothing.put(RequestRanking("r", "q", ()))
    assert nothing.get("r") is None and len(nothing) == 0


def sized(request_id: str, body: str) -> RequestRanking:
    return RequestRanking(request_id, "q", (), source_rows={"s": [{"id": 1, "body": body}]})


def test_the_store_is_bounded_in_bytes_of_compact_json() -> None:
    one = kept_size(sized("r0", "x" * 1000))
    # the row's compact JSON ({"id":1,"body":" + 1,000 x + "}: 16 + 1000 + 2) and the
    # ranking's own
    assert one == 16 + 1000 + 2 + len(json.dumps(sized("r0", "").to_dict(), separators=(",", ":")))
    store = RankingStore(keep=100, max_bytes=3 * one)
    for i in range(5):
        store.put(sized(f"r{i}", "x" * 1000))
    assert [store.get(f"r{i}") is not None for i in range(5)] == [False, False, True, True, True]
    assert store.bytes == 3 * one


def test_an_answer_larger_than_the_bound_is_not_kept_with_one_warning() -> None:
    store = RankingStore(keep=100, max_bytes=500)
    with capture_logs() as logs:
        store.put(sized("small", "x"))
        store.put(sized("big", "x" * 1000))
        store.put(sized("bigger", "x" * 2000))
    assert store.get("small") is not None and store.get("big") is None
    assert store.get("bigger") is None
    assert [e["event"] for e in logs] == ["upstream_ranking_not_kept"]
    assert logs[0]["max_bytes"] == 500 and logs[0]["request_id"] == "big"


class Passthrough:
    def merge(self, results: list[Any]) -> dict[str, list[dict[str, Any]]]:
        return {r.source_id: list(r.rows) for r in results if r.error is None}


def result(sid: str, rows: list[dict[str, Any]]) -> Any:
    return SimpleNamespace(source_id=sid, rows=rows, error=None, duration_ms=1)


RESULTS = [
    result(
        "runbooks", [{"id": "RB-1", "title": "kafka lag"}, {"id": "RB-2", "title": "disk full"}]
    ),
    result(
        "tickets", [{"id": "T-1", "title": "disk full on orders-db"}, {"id": "T-2", "title": "tls"}]
    ),
]


def synthesizer(ranker: RankingSynthesizer | None) -> BrokerSynthesizer:
    kinds = kinds_of(SimpleNamespace(id=s, type="static") for s in ("runbooks", "tickets"))
    return BrokerSynthesizer(ranker, Passthrough(), lambda: kinds)


def test_without_a_ranker_the_brokers_own_answer_is_returned() -> None:
    assert synthesizer(None).merge(RESULTS) == Passthrough().merge(RESULTS)


def test_ranked_rows_are_the_brokers_own_sources_by_their_best_row() -> None:
    with request_scope("disk full on orders-db") as scope:
        merged = synthesizer(RankingSynthesizer(top_k=2)).merge(RESULTS)
    assert list(merged) == ["tickets", "runbooks"]
    assert merged["tickets"][0] is RESULTS[1].rows[0]
    assert merged["runbooks"] == [RESULTS[0].rows[1]]
    assert scope.outcome is not None
    assert scope.outcome.dropped == {
        "runbooks": [RESULTS[0].rows[0]],
        "tickets": [RESULTS[1].rows[1]],
    }
    assert current_scope() is None


def test_outside_a_request_it_falls_back_with_one_warning() -> None:
    with capture_logs() as logs:
        merged = synthesizer(RankingSynthesizer(top_k=1)).merge(RESULTS)
    assert merged == Passthrough().merge(RESULTS)
    [event] = logs
    assert (
        event["event"] == "upstream_ranking_failed" and event["error_type"] == "NoRequestScopeError"
    )


def test_an_untested_broker_version_warns_once() -> None:
    with capture_logs() as logs:
        assert check_broker_version("0.4.1") is False
    [event] = logs
    assert event["event"] == "upstream_broker_untested" and event["version"] == "0.4.1"


class FakeBroker:
    """What attach_ranking uses of a nautilus.Broker: ``_synthesizer``, ``sources`` and an
    ``arequest`` that awaits before and after ``merge`` (as the broker's fan-out does)."""

    def __init__(self, request_ids: list[Any]) -> None:
        self._synthesizer = Passthrough()
        self.sources = [SimpleNamespace(id=s, type="static") for s in ("runbooks", "tickets")]
        self.request_ids = request_ids

    async def arequest(
        self, agent_id: str, intent: str, context: dict[str, Any] | None = None, **kwargs: Any
    ) -> Any:
        await asyncio.sleep(0)
        data = self._synthesizer.merge(RESULTS)
        await asyncio.sleep(0)
        return SimpleNamespace(request_id=self.request_ids.pop(0), data=data)


def test_the_wrapper_files_each_ranking_under_its_request_id() -> None:
    broker = FakeBroker(["r1", "r2"])
    with capture_logs():  # the broker is not installed here: the version warning
        attached = attach_ranking(broker, NautilusSettings(ranking_top_k=1))

    async def both() -> list[Any]:
        return await asyncio.gather(
            broker.arequest("a", "kafka lag"), broker.arequest("a", "disk full on orders-db")
        )

    first, second = asyncio.run(both())
    assert [r["id"] for rows in first.data.values() for r in rows] == ["RB-1"]
    assert [r["id"] for rows in second.data.values() for r in rows] == ["T-1"]
    ranked = attached.ranking("r1")
    assert ranked is not None and ranked.query == "kafka lag"
    assert attach_ranking(broker) is attached


def test_a_response_that_cannot_be_filed_is_still_returned() -> None:
    broker = FakeBroker([None])
    broker.request_ids = [Unprintable()]
    with capture_logs():
        attach_ranking(broker, NautilusSettings(ranking_top_k=1))
    with capture_logs() as logs:
        response = asyncio.run(broker.arequest("a", "kafka lag"))
    assert response.data == {"runbooks": [RESULTS[0].rows[0]], "tickets": []}
    assert [e["event"] for e in logs] == ["upstream_ranking_not_filed"]


class Unprintable:
    def __str__(self) -> str:
        raise ValueError("no id")


def test_an_object_that_is_no_broker_is_refused() -> None:
    with pytest.raises(IncompatibleBrokerError, match="has no _synthesizer"):
        attach_ranking(SimpleNamespace(sources=[]))


def test_a_missing_seam_leaves_the_ranked_route_and_tool_out_with_one_warning() -> None:
    from fastapi import FastAPI

    from nautilus_ranking.upstream import version
    from nautilus_ranking.upstream.ranked_servers import add_ranked_route, add_ranked_tool

    version._missing_said.clear()
    app = FastAPI()  # no POST /v1/request to go through
    with capture_logs() as logs:
        assert add_ranked_route(app) is False
        assert add_ranked_route(app) is False
        assert add_ranked_tool(SimpleNamespace()) is False
    assert [r.path for r in app.routes if getattr(r, "path", "") == "/v1/request/ranked"] == []
    assert [(e["event"], e["seam"]) for e in logs] == [
        (
            "upstream_seam_missing",
            "APIRoute POST /v1/request: endpoint(body, request) and its dependencies",
        ),
        ("upstream_seam_missing", "FastMCP._tool_manager.get_tool('nautilus_request').fn"),
    ]
    with pytest.raises(KeyError, match="not a declared seam"):
        version.seam_missing("Broker._something_else", "nothing")


def test_routing_words_leave_the_query_when_it_has_other_words() -> None:
    from nautilus_ranking.upstream.routing_words import RoutingWords

    words = RoutingWords({"scan_result", "scan result", "support"}, {"support", "help desk"})
    assert words.query("Support: my browser is not supported") == "my browser is not supported"
    assert words.query("scan result for host a") == "for host a"  # a phrase, whole
    assert words.query("help desk: hours") == "hours"  # a curated prefix, always
    assert words.query("help desk hours") == "help desk hours"  # curated kept as content
    assert words.query("supportive staff") == "supportive staff"  # whole words only
    assert words.query("support:") == "support:"  # nothing else: ranked by itself


def test_a_profiles_budget_applies_to_its_agents_requests_only() -> None:
    from nautilus_ranking.upstream.agent_profiles import AgentRankers

    rows = [{"id": i, "body": "word " * 20} for i in range(6)]
    agents = AgentRankers({"agent-b": "lean"}, {"lean": None}, {"lean": 40})
    synthesizer = BrokerSynthesizer(None, Passthrough(), lambda: {}, agents)
    with request_scope("q", "agent-a"):
        assert synthesizer.merge([result("s", rows)]) == {"s": rows}  # no budget: as is
    with request_scope("q", "agent-b"):
        cut = synthesizer.merge([result("s", rows)])["s"]
    assert 0 < len(cut) < len(rows) and cut == rows[: len(cut)]


@pytest.mark.skipif(not model_installed(), reason="needs the embed extra")
def test_the_attachment_loads_the_model_at_attach(tmp_path: Path) -> None:
    """The broker's first ranked request does not pay the model's load: attaching does."""
    settings = NautilusSettings(ranking_top_k=1, embedder="onnx", data_dir=tmp_path)
    with capture_logs() as logs:
        attached = attach_ranking(FakeBroker(["r1"]), settings)
    assert attached.synthesizer.ranker is not None
    embedder = attached.synthesizer.ranker.embedder
    assert embedder._session is not None
    assert [e["model_id"] for e in logs if e["event"] == "embedder_loaded"] == [
        "all-MiniLM-L6-v2-onnx-int8-matmul"
    ]
