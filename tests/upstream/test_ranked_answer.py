"""The ranked answer's parts that need no broker: it names the profile that ranked it,
and over MCP it is held to the broker's byte bound, explanation cut before rows (the
real broker: tests/upstream/inside/test_ranked_servers.py)."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from nautilus_ranking.feedback.cites import read_cite
from nautilus_ranking.records import RankedRow
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.upstream.outcome import RequestRanking
from nautilus_ranking.upstream.ranked_answer import answer_text, ranked_answer, within_bytes
from nautilus_ranking.upstream.ranked_cites import BrokerCiting
from nautilus_ranking.upstream.ranked_servers import (
    DEFAULT_MAX_RESPONSE_BYTES,
    max_response_bytes,
)

ROWS = {
    "runbooks": [{"id": f"r{i}", "text": "disk full on orders-db " * 3} for i in range(4)],
    "tickets": [{"id": f"t{i}", "text": "orders-db out of space " * 3} for i in range(4)],
}


class Response:
    """What ``ranked_answer`` reads of the broker's ``BrokerResponse``."""

    def model_dump(self, mode: str) -> dict[str, Any]:
        return {
            "request_id": "req-1",
            "data": {s: list(rows) for s, rows in ROWS.items()},
            "truncated_sources": [],
            "attestation_token": "x" * 1000,
        }


def outcome(profile: str | None) -> RequestRanking:
    ranking = [
        RankedRow(s, row, 1.0 / (i + 1), i + 1, i // 2 + 1, relevance=0.5, similarity=0.25)
        for i, (s, row) in enumerate(
            (s, ROWS[s][n]) for n in range(4) for s in ("runbooks", "tickets")
        )
    ]
    return RequestRanking("req-1", "disk full", tuple(ranking), profile=profile)


def test_the_answer_names_the_profile_that_ranked_it() -> None:
    assert ranked_answer(Response(), outcome("support"))["ranking"]["profile"] == "support"
    assert ranked_answer(Response(), outcome(None))["ranking"]["profile"] is None


def test_explain_is_cut_before_rows_to_fit_the_byte_bound() -> None:
    explained = ranked_answer(Response(), outcome(None), explain=True)
    lean = ranked_answer(Response(), outcome(None))
    assert explained["ranking"]["explained_rows"] == 8
    full, bare = len(answer_text(explained).encode()), len(answer_text(lean).encode())
    assert within_bytes(explained, full) == explained  # within the bound: untouched
    # between the lean answer and the explained one: explanation cut, every row kept
    bound = (full + bare) // 2
    held = within_bytes(explained, bound)
    assert len(answer_text(held).encode()) <= bound
    assert [e["row"]["id"] for e in held["rows"]] == [e["row"]["id"] for e in lean["rows"]]
    kept = [("explain" in e) for e in held["rows"]]
    assert 0 < sum(kept) < 8 and kept == sorted(kept, reverse=True)  # the best keep theirs
    assert held["ranking"]["explained_rows"] == sum(kept)
    assert held["truncated_sources"] == []
    # below the lean answer: every explanation gone, then rows from the end, named
    tight = within_bytes(explained, bare - 200)
    assert len(answer_text(tight).encode()) <= bare - 200
    assert not any("explain" in e for e in tight["rows"])
    assert [e["rank"] for e in tight["rows"]] == list(range(1, len(tight["rows"]) + 1))
    assert 0 < len(tight["rows"]) < 8 and tight["truncated_sources"]
    assert tight["attestation_token"] == "x" * 1000  # never cut
    assert within_bytes(explained, None) == explained


def test_the_bound_is_the_brokers_mcp_setting() -> None:
    def broker(value: object) -> object:
        return SimpleNamespace(
            config=SimpleNamespace(mcp=SimpleNamespace(max_response_bytes=value))
        )

    assert max_response_bytes(broker(5000)) == 5000
    assert max_response_bytes(broker(None)) is None  # the broker's own: unbounded
    assert max_response_bytes(None) == DEFAULT_MAX_RESPONSE_BYTES
    assert max_response_bytes(broker("5000")) == DEFAULT_MAX_RESPONSE_BYTES


def test_the_attestation_can_leave_the_text_the_agent_reads() -> None:
    import hashlib

    from nautilus_ranking.selection.tokens import count_tokens
    from nautilus_ranking.upstream.ranked_answer import attestation_out_of_text

    answer = ranked_answer(Response(), outcome(None))
    token, text = attestation_out_of_text(answer)
    assert token == "x" * 1000 and "attestation_token" not in text
    assert text["attestation_token_sha256"] == hashlib.sha256(token.encode()).hexdigest()
    parts = text["ranking"]["answer_tokens"]
    assert parts["rows"] == count_tokens([answer_text(answer["rows"])])[0]
    assert parts["envelope"] > 0
    assert {k: v for k, v in text.items() if k != "attestation_token_sha256"} == {
        **{k: v for k, v in answer.items() if k != "attestation_token"},
        "ranking": {**answer["ranking"], "answer_tokens": parts},
    }


def test_with_feedback_on_the_ranked_rows_carry_positions_and_cites(tmp_path: Path) -> None:
    """Feedback off, the ranked answer is left as it is; on, its ``rows`` (ours, not the
    attested ``data``) gain each row's position and cite, made for the agent."""
    settings = NautilusSettings(data_dir=tmp_path, cursor_key="k" * 40)
    assert BrokerCiting.of(settings) is None
    citing = BrokerCiting.of(settings.model_copy(update={"feedback": True}))
    assert citing is not None
    plain = ranked_answer(Response(), outcome(None))
    cited = citing.cite(ranked_answer(Response(), outcome(None)), outcome(None), "agent-7")
    assert cited["ranking_id"] == "req-1"
    assert [e["position"] for e in cited["rows"]] == list(range(1, 9))
    stripped = [
        {k: v for k, v in e.items() if k not in ("position", "cite")} for e in cited["rows"]
    ]
    assert stripped == plain["rows"]
    assert {k: v for k, v in cited.items() if k not in ("rows", "ranking_id")} == {
        k: v for k, v in plain.items() if k != "rows"
    }
    first = read_cite(citing.keys, cited["rows"][0]["cite"], 86_400, time.time())
    assert (first.source, first.row_id, first.position) == ("runbooks", "r0", 1)
    assert first.client.startswith("hmac:") and "agent-7" not in first.client
