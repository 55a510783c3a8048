"""The ranked answer's hash covers what ``response_hash`` misses: the order across
sources, the reference time, ``as_of`` and the profile; a passthrough has none."""

from __future__ import annotations

from typing import Any

from fakes import FakeSource

from nautilus_ranking.broker import Broker
from nautilus_ranking.ranking_hash import ranking_hash, ranking_hash_of_json, row_name
from nautilus_ranking.request.answer import answer_sync
from nautilus_ranking.request.engine import Engine
from nautilus_ranking.request.model import parse_request
from nautilus_ranking.response_hash import compute_response_hash
from nautilus_ranking.rows import content_id
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.synthesis.ranking import RankingSynthesizer

ROWS = {
    "wiki": [{"id": "W1", "text": "disk full on orders-db", "updated": "2024-01-01"}],
    "tickets": [{"id": "T1", "text": "kafka consumer lag", "updated": "2024-03-01"}],
}
TIMED = {
    "ranking_top_k": 10,
    "ranking_time_fields": "wiki:updated,tickets:updated",
    "ranking_recency": "half_life:30d",
}


def ask(body: dict[str, Any], knobs: dict[str, Any] | None = None) -> dict[str, Any]:
    """``body`` answered as ``POST /v1/query`` answers it, over the two sources."""
    sources = [FakeSource(sid, rows) for sid, rows in ROWS.items()]
    if knobs is None:  # every knob unset: the passthrough
        with Broker(sources) as broker:
            return answer_sync(Engine.of(broker), parse_request(body)).to_json()
    settings = NautilusSettings.model_validate(knobs)
    with Broker(sources, RankingSynthesizer.from_settings(settings)) as broker:
        return answer_sync(Engine.of(broker, settings), parse_request(body)).to_json()


def test_two_orders_of_the_same_rows_share_the_response_hash_not_the_ranking_hash() -> None:
    disk = ask({"query": "disk full"}, TIMED)
    kafka = ask({"query": "kafka lag"}, TIMED)
    assert [e["id"] for e in disk["ranking"]] == ["W1", "T1"]
    assert [e["id"] for e in kafka["ranking"]] == ["T1", "W1"]
    assert disk["response_hash"] == kafka["response_hash"]  # data: the same rows
    assert disk["ranking_hash"] != kafka["ranking_hash"]
    for answer in (disk, kafka):  # anyone holding the answer recomputes it
        assert ranking_hash_of_json(answer) == answer["ranking_hash"]


def test_as_of_and_the_reference_time_change_the_ranking_hash() -> None:
    newest = ask({"query": "disk full"}, TIMED)
    as_of = ask({"query": "disk full", "as_of": "2024-06-01"}, TIMED)
    plain = ask({"query": "disk full"}, {"ranking_top_k": 10})
    dated = ask({"query": "disk full", "as_of": "2024-06-01"}, {"ranking_top_k": 10})
    assert newest["time"]["reference"] == "2024-03-01"
    assert as_of["time"]["reference"] == "2024-06-01"
    orders = {tuple(e["id"] for e in a["ranking"]) for a in (newest, as_of, plain, dated)}
    assert orders == {("W1", "T1")}  # one order, one data: the hashes differ by time alone
    assert len({a["response_hash"] for a in (newest, as_of, plain, dated)}) == 1
    assert len({a["ranking_hash"] for a in (newest, as_of, plain, dated)}) == 4
    assert ranking_hash_of_json(as_of, as_of="2024-06-01") == as_of["ranking_hash"]
    assert ranking_hash_of_json(dated, as_of="2024-06-01") == dated["ranking_hash"]


def test_a_passthrough_answer_has_no_ranking_hash_and_the_upstream_response_hash() -> None:
    answer = ask({"query": "disk full"})
    assert answer["ranking_enabled"] is False and "ranking_hash" not in answer
    assert answer["response_hash"] == compute_response_hash(ROWS)


def test_the_profile_and_the_rows_names_are_covered() -> None:
    rows = [("wiki", {"id": "W1"}), ("tickets", {"title": "no id"})]
    base = ranking_hash(rows)
    assert ranking_hash(rows, profile="support") != base
    assert ranking_hash(list(reversed(rows))) != base
    assert ranking_hash([("tickets", {"id": "W1"}), rows[1]]) != base  # the source counts
    # a row without an id is named by its content, the same in every call
    assert row_name({"title": "no id"}) == content_id({"title": "no id"})
    assert ranking_hash([rows[0], ("tickets", {"title": "other"})]) != base
    assert ranking_hash(rows) == base


def test_a_row_id_or_reference_with_no_json_form_still_hashes() -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    named = row_name({"id": cyclic, "title": "x"})
    assert isinstance(named, str) and named.startswith("sha256-")
    assert ranking_hash([("wiki", {"id": 1})], reference=cyclic).startswith("sha256:")
