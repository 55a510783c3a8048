"""``NAUTILUS_RANKING_MAX_TOKENS`` inside the broker's ``merge``, and the one log line
per ranked request (on the judged set, judged.py, in-process)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import AGENT, CONTEXT, claims, static_source, write_config
from judged import ARTICLES, TICKETS, WIKI
from structlog.testing import capture_logs

from nautilus_ranking import NautilusSettings
from nautilus_ranking.selection.tokens import count_tokens
from nautilus_ranking.upstream import attach_ranking

QUESTION = "faq: refund for a duplicate charge"


def config(folder: Path) -> Path:
    return write_config(
        folder,
        [
            static_source("articles", ARTICLES, "faq"),
            static_source("tickets", TICKETS, "faq"),
            static_source("wiki", WIKI, "faq"),
        ],
    )


def ranked(path: Path, settings: NautilusSettings) -> tuple[Any, Any]:
    from nautilus import Broker

    broker = Broker.from_config(path)
    try:
        attached = attach_ranking(broker, settings)
        response = broker.request(AGENT, QUESTION, dict(CONTEXT))
    finally:
        broker.close()
    ranking = attached.ranking(response.request_id)
    assert ranking is not None and ranking.fallback is None
    return response, ranking


def compact(row: Any) -> str:
    return json.dumps(row, separators=(",", ":"), ensure_ascii=False, default=str)


def test_the_budget_leaves_the_lowest_ranked_rows_out_across_sources(tmp_path: Path) -> None:
    from nautilus.core.attestation_payload import compute_response_hash

    path = config(tmp_path)
    _, whole = ranked(path, NautilusSettings(ranking_top_k=10))
    costs = count_tokens([compact(r.row) for r in whole.ranking])
    budget = sum(costs[:6])  # the best six fit exactly
    response, cut = ranked(path, NautilusSettings(ranking_top_k=10, ranking_max_tokens=budget))
    order = [(r.source_id, r.row["id"]) for r in whole.ranking]
    kept = [(r.source_id, r.row["id"]) for r in cut.ranking]
    assert kept == order[:6]  # the lowest-ranked left, whatever their source
    assert len({sid for sid, _ in kept}) > 1
    assert cut.budget["tokens_used"] == budget and cut.budget["rows_left_out"] == 4
    delivered = [(sid, row["id"]) for sid, rows in response.data.items() for row in rows]
    assert sorted(delivered, key=kept.index) == kept
    # each row was counted as what data carries; the attestation covers the budgeted rows
    assert sum(count_tokens([compact(r) for rows in response.data.values() for r in rows])) == (
        budget
    )
    assert (
        compute_response_hash(response.data) == claims(response.attestation_token)["response_hash"]
    )


def test_a_budget_alone_cuts_the_brokers_own_order(tmp_path: Path) -> None:
    from nautilus import Broker

    path = config(tmp_path)
    answers = []
    for settings in (NautilusSettings(), NautilusSettings(ranking_max_tokens=60)):
        broker = Broker.from_config(path)
        try:
            attached = attach_ranking(broker, settings)
            assert not attached.enabled  # a budget does not turn ranking on
            answers.append(broker.request(AGENT, QUESTION, dict(CONTEXT)).data)
        finally:
            broker.close()
    whole, cut = ([r for rows in data.values() for r in rows] for data in answers)
    assert list(answers[1]) == list(answers[0])  # every source keeps its key
    assert 0 < len(cut) < len(whole) and cut == whole[: len(cut)]  # the broker's order, cut
    assert sum(count_tokens([compact(r) for r in cut])) <= 60


def test_one_log_line_per_ranked_request_names_the_settings(tmp_path: Path) -> None:
    from nautilus import Broker

    broker = Broker.from_config(config(tmp_path))
    try:
        attach_ranking(broker, NautilusSettings(ranking_top_k=5, ranking_idf=True))
        with capture_logs() as logs:
            one = broker.request(AGENT, QUESTION, dict(CONTEXT))
            two = broker.request(AGENT, "faq: webhook deliveries failing", dict(CONTEXT))
    finally:
        broker.close()
    lines = [e for e in logs if e["event"] == "upstream_request_ranked"]
    assert [e["request_id"] for e in lines] == [one.request_id, two.request_id]
    assert lines[0]["settings"] == {
        "NAUTILUS_RANKING_TOP_K": 5,
        "NAUTILUS_RANKING_IDF": True,
        "NAUTILUS_EMBEDDER": "hashing",
    }
    assert lines[0]["ranked"] is True and lines[0]["rows"] == 5
    assert lines[0]["routing_words_left_out"] is True
    assert "faq" not in json.dumps(lines[0]["settings"])  # nothing the agent typed
