"""Inside the broker: our ranking in a broker built by its own ``Broker.from_config``,
over its ``static`` adapter."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import AGENT, CONTEXT, claims, ids
from structlog.testing import capture_logs

from nautilus_ranking import NautilusSettings
from nautilus_ranking.upstream import BrokerSynthesizer, attach_ranking, attached_ranking

QUERY = "ops: orders-db disk full"


def broker(config: Path) -> Any:
    from nautilus import Broker

    return Broker.from_config(config)


def hashes(response: Any) -> dict[str, Any]:
    """What must not change when the ranking is attached with every knob unset: ``data``
    as JSON in its order, and the token's hash claims over the rows. (``input_hash``
    covers the whole signed payload, the random ``request_id`` and ``iat`` included:
    it differs between any two requests.)"""
    token = claims(response.attestation_token)
    return {
        "data": json.dumps(response.data),
        "response_hash": token["response_hash"],
        "source_response_hashes": token["source_response_hashes"],
    }


def test_with_every_knob_unset_the_answer_is_the_stock_brokers_byte_for_byte(
    ops_config: Path,
) -> None:
    stock, ours = broker(ops_config), broker(ops_config)
    try:
        attached = attach_ranking(ours)
        assert not attached.enabled
        for query in (QUERY, "ops: kafka lag", "ops"):
            a = stock.request(AGENT, query, dict(CONTEXT))
            b = ours.request(AGENT, query, dict(CONTEXT))
            assert hashes(a) == hashes(b)
            assert attached.ranking(b.request_id) is None
    finally:
        stock.close()
        ours.close()


def test_the_top_k_in_rank_order_sources_by_their_best_row(ops_config: Path) -> None:
    from nautilus.core.attestation_payload import compute_response_hash

    b = broker(ops_config)
    try:
        attached = attach_ranking(b, NautilusSettings(ranking_top_k=3))
        response = b.request(AGENT, QUERY, dict(CONTEXT))
    finally:
        b.close()
    ranking = attached.ranking(response.request_id)
    assert ranking is not None and ranking.fallback is None and ranking.query == QUERY
    best = [(r.source_id, r.row["id"]) for r in ranking.ranking]
    assert len(best) == 3 and best[0] == ("tickets", "INC-2")
    # data: the same rows, each source's in global order, sources by their best row
    assert list(response.data) == ["tickets", "runbooks"]
    flat = [(sid, row["id"]) for sid, rows in response.data.items() for row in rows]
    assert sorted(flat, key=best.index) == best
    for sid, rows in response.data.items():
        assert ids(rows) == [row_id for s, row_id in best if s == sid]
    # the rows are the broker's own; the ones left out are reachable
    assert sum(len(rows) for rows in ranking.dropped.values()) == 5 + 4 - 3
    assert all(r.score > 0 for r in ranking.ranking)
    assert ranking.ranking[0].explain()["similarity"] > 0
    # the broker signed what it returned: response_hash verifies over the ranked data,
    # and each source's digest over its rows as the accessor keeps them
    token = claims(response.attestation_token)
    assert token["response_hash"] == compute_response_hash(response.data)
    assert token["source_response_hashes"] == {
        sid: compute_response_hash(rows) for sid, rows in ranking.source_rows.items()
    }
    assert token["source_response_hashes"]["runbooks"] != compute_response_hash(
        response.data["runbooks"]
    )  # trimmed: not recomputable from data alone


def test_below_the_minimum_confidence_the_broker_signs_an_abstained_answer(
    ops_config: Path,
) -> None:
    from nautilus.core.attestation_payload import compute_response_hash

    b = broker(ops_config)
    try:
        attached = attach_ranking(b, NautilusSettings(ranking_top_k=3, ranking_min_confidence=1))
        response = b.request(AGENT, QUERY, dict(CONTEXT))
    finally:
        b.close()
    ranking = attached.ranking(response.request_id)
    assert ranking is not None and ranking.fallback is None and ranking.ranking == ()
    assert ranking.abstain is not None and ranking.abstain["abstained"] is True
    assert [r.source_id for r in ranking.nearest][:1] == ["tickets"]
    assert len(ranking.nearest) == 3 and ranking.confidence is not None
    # data is empty, every source keeps its key: the attestation signs that answer
    assert response.data and all(rows == [] for rows in response.data.values())
    token = claims(response.attestation_token)
    assert token["response_hash"] == compute_response_hash(response.data)


def test_a_boost_from_the_environment_applies(
    ops_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NAUTILUS_RANKING_TOP_K", "2")
    monkeypatch.setenv("NAUTILUS_SOURCE_BOOSTS", "runbooks:high")
    b = broker(ops_config)
    try:
        attached = attach_ranking(b)
        response = b.request(AGENT, QUERY, dict(CONTEXT))
    finally:
        b.close()
    ranking = attached.ranking(response.request_id)
    assert ranking is not None
    assert attached.settings.source_boosts == {"runbooks": "high"}
    assert any(r.boost_bump > 0 for r in ranking.ranking if r.source_id == "runbooks")
    assert sum(len(rows) for rows in response.data.values()) == 2


def test_fifty_concurrent_requests_each_ranked_by_its_own_intent(tmp_path: Path) -> None:
    from conftest import static_source, write_config

    words = [f"w{i:02d}x" for i in range(50)]
    rows = [
        {"id": f"DOC-{i}", "title": f"{w} handbook", "body": "ops notes"}
        for i, w in enumerate(words)
    ]
    b = broker(
        write_config(
            tmp_path, [static_source("docs", rows[::2]), static_source("notes", rows[1::2])]
        )
    )
    attached = attach_ranking(b, NautilusSettings(ranking_top_k=3))
    in_flight, most = 0, 0
    adapters = b._adapters  # the broker's adapters, to see the requests overlap in them
    for _sid, adapter in list(adapters.items()):
        execute = adapter.execute

        async def counted(*args: Any, _execute: Any = execute, **kwargs: Any) -> Any:
            nonlocal in_flight, most
            in_flight += 1
            most = max(most, in_flight)
            try:
                await asyncio.sleep(0.01)  # a source's round trip
                return await _execute(*args, **kwargs)
            finally:
                in_flight -= 1

        adapter.execute = counted

    async def one(i: int) -> Any:
        context = {**CONTEXT, "session_id": f"session-{i}"}
        # distinct callers: the broker serialises the requests of one caller and session
        return await b.arequest(AGENT, f"ops {words[i]}", context, caller={"peer": f"10.0.0.{i}"})

    async def all_of_them() -> list[Any]:
        return await asyncio.gather(*(one(i) for i in range(50)))

    try:
        responses = asyncio.run(all_of_them())
    finally:
        b.close()
    assert most > 1  # the requests were inside the broker at the same time
    for i, response in enumerate(responses):
        ranking = attached.ranking(response.request_id)
        assert ranking is not None and ranking.query == f"ops {words[i]}"
        assert ranking.ranking[0].row["id"] == f"DOC-{i}"
        first_source = next(iter(response.data))
        assert response.data[first_source][0]["id"] == f"DOC-{i}"


def test_a_failure_inside_hands_back_the_passthrough_with_one_warning(
    ops_config: Path,
) -> None:
    stock, b = broker(ops_config), broker(ops_config)
    try:
        attached = attach_ranking(b, NautilusSettings(ranking_top_k=2))
        assert attached.synthesizer.ranker is not None

        def broken(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("the ranker broke")

        attached.synthesizer.ranker.merge_ranked = broken  # type: ignore[method-assign]
        with capture_logs() as logs:
            response = b.request(AGENT, QUERY, dict(CONTEXT))
        expected = stock.request(AGENT, QUERY, dict(CONTEXT))
    finally:
        b.close()
        stock.close()
    assert json.dumps(response.data) == json.dumps(expected.data)
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert [e["event"] for e in warnings] == ["upstream_ranking_failed"]
    assert warnings[0]["error_type"] == "RuntimeError"
    ranking = attached.ranking(response.request_id)
    assert ranking is not None and ranking.fallback == "RuntimeError"


def test_attaching_is_one_call_idempotent_and_found_on_the_broker(ops_config: Path) -> None:
    b = broker(ops_config)
    try:
        first = attach_ranking(b, NautilusSettings(ranking_top_k=2))
        assert attach_ranking(b) is first
        assert attached_ranking(b) is first
        assert isinstance(b._synthesizer, BrokerSynthesizer)
        from nautilus.synthesis import BasicSynthesizer, Synthesizer

        assert isinstance(b._synthesizer, Synthesizer)  # the broker's own protocol
        assert isinstance(first.synthesizer.passthrough, BasicSynthesizer)
    finally:
        b.close()


def test_the_accessor_is_bounded(ops_config: Path) -> None:
    b = broker(ops_config)
    try:
        attached = attach_ranking(b, NautilusSettings(ranking_top_k=2), keep=3)
        responses = [b.request(AGENT, f"ops disk {i}", dict(CONTEXT)) for i in range(5)]
    finally:
        b.close()
    assert len(attached.store) == 3
    assert [attached.ranking(r.request_id) is not None for r in responses] == [
        False,
        False,
        True,
        True,
        True,
    ]


def test_an_untested_broker_version_is_one_clear_warning() -> None:
    from nautilus_ranking.upstream.version import check_broker_version

    with capture_logs() as logs:
        assert check_broker_version("0.4.0") is False
        assert check_broker_version("0.3.0") is True
    [event] = logs
    assert event["event"] == "upstream_broker_untested" and event["version"] == "0.4.0"
    assert "0.3.0" in event["tested"]


def test_attached_in_strict_mode_beside_the_brokers_variables(
    ops_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("NAUTILUS_API_KEY", "NAUTILUS_REVIEWER", "NAUTILUS_BUILD_REV"):
        monkeypatch.setenv(name, "x")
    monkeypatch.setenv("NAUTILUS_CONFIG_STRICT", "true")
    monkeypatch.setenv("NAUTILUS_RANKING_TOP_K", "2")
    b = broker(ops_config)
    try:
        attached = attach_ranking(b)  # strict: a problem would have raised
        response = b.request(AGENT, QUERY, dict(CONTEXT))
    finally:
        b.close()
    assert attached.settings.problems == ()
    assert sum(len(rows) for rows in response.data.values()) == 2


def test_ranking_inside_the_broker_loads_none_of_our_metrics(ops_config: Path) -> None:
    b = broker(ops_config)
    try:
        attach_ranking(b, NautilusSettings(ranking_top_k=3))
        b.request(AGENT, QUERY, dict(CONTEXT))
    finally:
        b.close()
    assert "nautilus_ranking.service.metrics" not in sys.modules


def test_time_from_the_environment_supersedes_across_the_brokers_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker's nautilus.yaml has no place for a time: NAUTILUS_RANKING_TIME_FIELDS
    names it by the broker's source ids, and the newest revision wins across the
    sources NAUTILUS_RANKING_MAY_REVISE names."""
    from conftest import static_source, write_config

    archive = [
        {"id": "R-01", "title": "Regulator FAQ", "body": "report within 24 hours", "at": "2025-01"},
        {"id": "R-02", "title": "Retention FAQ", "body": "keep logs a year", "at": "2025-03-01"},
    ]
    current = [
        {
            "id": "R-01",
            "title": "Regulator FAQ",
            "body": "report within 48 hours",
            "at": 1767225600,
        },
    ]
    config = write_config(
        tmp_path, [static_source("archive", archive), static_source("current", current)]
    )
    monkeypatch.setenv("NAUTILUS_RANKING_TIME_FIELDS", "archive:at,current:at")
    monkeypatch.setenv("NAUTILUS_RANKING_SUPERSEDE", "true")
    monkeypatch.setenv("NAUTILUS_RANKING_DOCUMENT_KEYS", "archive:id,current:id")
    monkeypatch.setenv("NAUTILUS_RANKING_MAY_REVISE", "current:archive")
    monkeypatch.setenv("NAUTILUS_RANKING_RECENCY", "half_life:90d")
    b = broker(config)
    try:
        attached = attach_ranking(b)
        response = b.request(AGENT, "ops: when to report to the regulator", dict(CONTEXT))
    finally:
        b.close()
    ranking = attached.ranking(response.request_id)
    assert ranking is not None and ranking.fallback is None
    kept = [(r.source_id, r.row["id"]) for r in ranking.ranking]
    assert ("current", "R-01") in kept and ("archive", "R-01") not in kept
    first = next(r for r in ranking.ranking if r.row["id"] == "R-01")
    assert [(c.source_id, c.copy, c.time) for c in first.also_from] == [
        ("archive", "revision", "2025-01")
    ]
    assert ranking.time is not None and ranking.time["superseded"] == 1
    assert ranking.time["reference"] == "2026-01-01T00:00:00Z"
    assert ids(response.data["archive"]) == ["R-02"]  # the older revision left data
    assert ranking.to_dict()["time"]["from"] == "newest_row"
