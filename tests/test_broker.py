"""Broker: fan-out, failure isolation, hashes, and the no-op guarantee — on real SQLite files."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeSource
from structlog.testing import capture_logs

from nautilus_ranking import (
    AdapterResult,
    BasicSynthesizer,
    Broker,
    ConfigError,
    NautilusSettings,
    RankingSynthesizer,
    compute_response_hash,
)
from nautilus_ranking.response_hash import canonical_json
from nautilus_ranking.rows import CanonicalRows
from nautilus_ranking.sources.factory import SourceConfigError

DEMO_QUERY = "orders database disk full"


class WaitsForPeer(FakeSource):
    """Answers only once its peer has started: the broker must call sources concurrently."""

    def __init__(self, source_id: str, started: asyncio.Event, peer: asyncio.Event) -> None:
        super().__init__(source_id, [{"id": source_id}], timeout_s=2.0)
        self.started, self.peer = started, peer

    async def search(self, query: str, context: Mapping[str, Any], limit: int) -> Any:
        self.started.set()
        await self.peer.wait()
        return self.result


def demo_broker(**settings: Any) -> Broker:
    return Broker.from_config(None, NautilusSettings(**settings))


def test_demo_config_answers_from_every_source() -> None:
    response = demo_broker().request(DEMO_QUERY)
    assert response.sources_queried == ["tickets", "graph", "runbooks", "postmortems"]
    assert response.sources_errored == []
    assert all(response.data[s] for s in response.sources_queried)
    json.dumps(response.data)  # JSON-native, no default= needed


def test_all_knobs_unset_is_byte_identical_to_passthrough() -> None:
    broker = demo_broker()
    assert isinstance(broker.synthesizer, BasicSynthesizer)
    results = asyncio.run(broker.fetch(DEMO_QUERY))
    response = broker.request(DEMO_QUERY)
    passthrough = BasicSynthesizer().merge(results)
    assert json.dumps(response.data) == json.dumps(passthrough)
    assert response.response_hash == compute_response_hash(passthrough)
    assert response.source_response_hashes == {
        r.source_id: compute_response_hash(r.rows) for r in results
    }


@pytest.mark.parametrize("lexical", ["bm25", "cosine"])
def test_the_lexical_scorer_alone_leaves_passthrough(lexical: str) -> None:
    """The scorer is how content is scored once ranking is on; it turns nothing on."""
    broker = demo_broker(ranking_lexical=lexical)
    assert isinstance(broker.synthesizer, BasicSynthesizer)
    results = asyncio.run(broker.fetch(DEMO_QUERY))
    passthrough = BasicSynthesizer().merge(results)
    assert broker.request(DEMO_QUERY).response_hash == compute_response_hash(passthrough)


def test_a_ranking_knob_switches_the_synthesizer_and_reorders() -> None:
    broker = demo_broker(ranking_top_k=5)
    assert isinstance(broker.synthesizer, RankingSynthesizer)
    response = broker.request(DEMO_QUERY)
    assert sum(map(len, response.data.values())) == 5
    assert [r.rank for r in response.ranking] == [1, 2, 3, 4, 5]
    assert set(response.data) == set(response.sources_queried)  # every source keeps its key
    for sid, rows in response.data.items():
        assert rows == [r.row for r in response.ranking if r.source_id == sid]
    # source hashes are over the raw rows, before any reordering
    passthrough = demo_broker().request(DEMO_QUERY)
    assert response.source_response_hashes == passthrough.source_response_hashes


def test_boost_moves_the_boosted_source_up_without_wiping_out_the_others() -> None:
    plain = demo_broker(ranking_top_k=8).request(DEMO_QUERY)
    boosted = demo_broker(ranking_top_k=8, source_boosts="graph:high").request(DEMO_QUERY)
    count = [sum(r.source_id == "graph" for r in x.ranking) for x in (plain, boosted)]
    assert count[1] >= count[0]
    assert len({r.source_id for r in boosted.ranking}) >= 3


def test_failing_slow_and_garbage_sources_are_isolated() -> None:
    good_rows = [{"id": 1, "title": "disk full"}, {"id": 2, "title": "disk slow"}]
    broker = Broker(
        [
            FakeSource("good", good_rows),
            FakeSource("raises", raises=RuntimeError("connection refused")),
            FakeSource("slow", hang=True, timeout_s=0.05),
            FakeSource("garbage", result="<html>502</html>"),
            FakeSource("mixed", [{"id": 3}, None, "x"]),
        ],
        RankingSynthesizer(idf=True),
    )
    with capture_logs() as logs:
        response = broker.request("disk")
    errors = {e.source_id: e.error_type for e in response.sources_errored}
    assert errors == {"raises": "RuntimeError", "slow": "timeout", "garbage": "invalid_response"}
    assert response.data["good"] == [good_rows[0], good_rows[1]]
    assert response.data["mixed"] == [{"id": 3}]
    assert set(response.data) == {"good", "mixed"}
    events = [e["event"] for e in logs if e["log_level"] == "warning"]
    assert events.count("source_failed") == 3 and "source_rows_invalid" in events
    messages = {e.source_id: e.message for e in response.sources_errored}
    assert messages["raises"] == "connection refused"


def test_sources_are_called_concurrently() -> None:
    async def run() -> Any:
        a, b = asyncio.Event(), asyncio.Event()
        broker = Broker([WaitsForPeer("a", a, b), WaitsForPeer("b", b, a)])
        return await broker.arequest("x")

    response = asyncio.run(run())
    assert response.sources_errored == [] and set(response.data) == {"a", "b"}


def test_request_inside_an_event_loop_says_to_use_arequest() -> None:
    async def run() -> None:
        Broker([FakeSource("a")]).request("x")

    with pytest.raises(RuntimeError, match="arequest"):
        asyncio.run(run())


def test_response_hash_row_order_matters_key_order_does_not() -> None:
    a, b = {"id": 1, "t": "x"}, {"id": 2, "t": "y"}
    assert compute_response_hash({"s": [a, b], "r": []}) == compute_response_hash(
        {"r": [], "s": [{"t": "x", "id": 1}, b]}
    )
    assert compute_response_hash({"s": [a, b]}) != compute_response_hash({"s": [b, a]})
    assert compute_response_hash({}).startswith("sha256:")


def test_boost_for_an_unknown_source_is_warned_and_dropped() -> None:
    with capture_logs() as logs:
        broker = demo_broker(source_boosts="graph:high,nosuch:low")
    assert isinstance(broker.synthesizer, RankingSynthesizer)
    assert broker.synthesizer.source_boosts == {"graph": "high"}
    [event] = [e for e in logs if e["log_level"] == "warning"]
    assert event["value"] == "nosuch" and "graph" in event["valid"]


def test_only_unknown_boosts_leaves_passthrough() -> None:
    with capture_logs():
        assert isinstance(demo_broker(source_boosts="nosuch").synthesizer, BasicSynthesizer)


def test_boost_for_an_unknown_source_is_an_error_in_strict_mode() -> None:
    with pytest.raises(ConfigError, match="no source has id 'nosuch'"):
        demo_broker(source_boosts="nosuch:high", config_strict=True)


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "nautilus.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_config_interpolates_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "t.jsonl").write_text('{"id": "a", "title": "disk full"}\n', encoding="utf-8")
    monkeypatch.setenv("TICKETS_TABLE", "tickets")
    path = write_config(
        tmp_path,
        """
sources:
  - id: t
    type: sqlite_table
    path: ${TICKETS_DB:-t.db}
    seed: t.jsonl
    table: ${TICKETS_TABLE}
    search_columns: [title]
""",
    )
    response = Broker.from_config(path).request("disk")
    assert response.data == {"t": [{"id": "a", "title": "disk full"}]}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "sources: [{id: t, type: sqlite_table, path: '${NOT_SET_ANYWHERE}'}]",
            "NOT_SET_ANYWHERE is not set",
        ),
        ("sources: [{id: t, type: mongo}]", "unknown type 'mongo'"),
        ("sources: [{id: t, type: sqlite_table, path: x.db}]", "missing option 'seed'"),
        (
            "sources: [{id: t, type: sqlite_fts, path: x, seed: y, columns: [a], timeout_s: -1}]",
            "timeout_s",
        ),
        (
            "sources: [{id: a, type: sqlite_graph, path: a, entities: e, edges: d},"
            " {id: A, type: sqlite_graph, path: a, entities: e, edges: d}]",
            "duplicate source id",
        ),
        ("just a string", "expected a mapping"),
        ("sources: [\n  - bad: [", "not valid YAML"),
        ("limit: 0\nsources: []", "limit: Input should be greater than or equal to 1, got 0"),
        ("!!python/object/apply:os.system ['echo pwned']", "not valid YAML"),
    ],
)
def test_bad_config_is_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SourceConfigError, match=message):
        Broker.from_config(write_config(tmp_path, text))


def test_missing_config_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SourceConfigError, match="cannot read sources config"):
        Broker.from_config(tmp_path / "absent.yaml")


def test_a_broken_source_fails_only_its_own_requests(tmp_path: Path) -> None:
    (tmp_path / "ok.jsonl").write_text('{"id": "a", "title": "disk full"}\n', encoding="utf-8")
    (tmp_path / "b.jsonl").write_text('{"id": "b", "title": "disk"}\n', encoding="utf-8")
    path = write_config(
        tmp_path,
        """
sources:
  - {id: ok, type: sqlite_table, path: ok.db, seed: ok.jsonl, table: t, search_columns: [title]}
  - {id: broken, type: sqlite_fts, path: b.db, seed: b.jsonl, columns: [title]}
""",
    )
    broker = Broker.from_config(path)
    (tmp_path / "b.jsonl").unlink()  # the seed disappears after start-up
    response = broker.request("disk")
    assert response.data == {"ok": [{"id": "a", "title": "disk full"}]}
    [error] = response.sources_errored
    assert error.source_id == "broken" and error.error_type == "SeedError"
    assert "b.jsonl not found" in error.message


def test_ranking_is_deterministic_across_requests() -> None:
    broker = demo_broker(ranking_top_k=10, ranking_idf=True, source_boosts="runbooks:low")
    first, second = broker.request(DEMO_QUERY), broker.request(DEMO_QUERY)
    assert first.response_hash == second.response_hash
    assert [r.explain() for r in first.ranking] == [r.explain() for r in second.ranking]


def test_adapter_result_errors_are_skipped_by_both_synthesizers() -> None:
    rows = [{"id": 1, "title": "disk"}]
    results = [AdapterResult("a", rows)]
    assert BasicSynthesizer().merge(results) == {"a": rows}
    assert BasicSynthesizer().merge(results)["a"] is not rows  # a fresh list


class ClosingSource(FakeSource):
    def __init__(self, source_id: str, fail: bool = False) -> None:
        super().__init__(source_id)
        self.closed, self.fail = False, fail

    def close(self) -> None:
        self.closed = True
        if self.fail:
            raise OSError("already gone")


def test_close_releases_every_source_even_if_one_fails() -> None:
    sources = [ClosingSource("a", fail=True), ClosingSource("b")]
    with capture_logs() as logs, Broker(sources) as broker:
        broker.request("x")
    assert all(s.closed for s in sources)
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["source_close_failed"]


def test_the_response_hash_is_made_of_each_rows_text_byte_for_byte() -> None:
    """Rows are encoded once, by the broker or (vectors and all) by the source: the
    hashes equal a fresh encoding of the same rows, with ranking on and off."""
    for broker in (demo_broker(), demo_broker(ranking_top_k=6, ranking_idf=True)):
        for query in (DEMO_QUERY, "orders database replication lag", "zzz"):
            results = asyncio.run(broker.fetch(query))
            vector = next(r for r in results if r.source_id == "postmortems")
            response = broker.request(query)
            assert response.response_hash == compute_response_hash(response.data)
            assert response.source_response_hashes == {
                r.source_id: compute_response_hash(r.rows) for r in results
            }
            assert all("embedding" in row for row in vector.rows)


def test_the_vector_source_hands_over_each_rows_canonical_text(tmp_path: Path) -> None:
    broker = demo_broker(data_dir=tmp_path)
    source = next(s for s in broker.sources if s.id == "postmortems")
    for query in (DEMO_QUERY, "certificate expired", "kafka consumer lag"):
        rows = asyncio.run(source.search(query, {"query": query}, 50))
        assert isinstance(rows, CanonicalRows) and rows
        assert rows.texts == [canonical_json(row) for row in rows]
        assert rows.texts == [
            canonical_json(row)
            for row in asyncio.run(  # again: the kept texts
                source.search(query, {"query": query}, 50)
            )
        ]


def test_a_synthesizer_that_changes_rows_gets_the_hash_of_what_it_returns() -> None:
    class Stamps(BasicSynthesizer):
        def merge(
            self, results: list[AdapterResult], context: Mapping[str, Any] | None = None
        ) -> dict[str, list[dict[str, Any]]]:
            data = super().merge(results, context)
            for rows in data.values():
                for row in rows:
                    row["stamped"] = True
            return data

    base = demo_broker()
    response = Broker(base.sources, Stamps()).request(DEMO_QUERY)
    assert all(row["stamped"] for rows in response.data.values() for row in rows)
    assert response.response_hash == compute_response_hash(response.data)
