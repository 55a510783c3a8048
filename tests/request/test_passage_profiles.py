"""A ranking profile's knobs decide how its answers hand a long row over: its budget
(``ranking_max_tokens``) and whether a row too large for it goes as its passage
(``ranking_budget_passages``), for a top K and for pages alike; a profile that turns
passages off hands the row over as before (left out, or at rank 1 whole and flagged)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from long_rows import LONG, QUERY, write_sources

from nautilus_ranking.request.answer import answer_sync
from nautilus_ranking.request.engine import Engine
from nautilus_ranking.request.model import parse_request

PROFILES = {
    "NAUTILUS_RANKING_TOP_K": "5",  # the global knobs: no budget
    # both hand over under 400 tokens; only "parts" hands a row too large over in part
    "NAUTILUS_PROFILES__PARTS__RANKING_MAX_TOKENS": "400",
    "NAUTILUS_PROFILES__PARTS__RANKING_TOP_K": "5",
    "NAUTILUS_PROFILES__WHOLE__RANKING_MAX_TOKENS": "400",
    "NAUTILUS_PROFILES__WHOLE__RANKING_TOP_K": "5",
    "NAUTILUS_PROFILES__WHOLE__RANKING_BUDGET_PASSAGES": "false",
}


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Engine:
    monkeypatch.setenv("NAUTILUS_CONFIG", str(write_sources(tmp_path)))
    for name, value in PROFILES.items():
        monkeypatch.setenv(name, value)
    return Engine.assemble()


def long_entry(engine: Engine, profile: str | None, **body: Any) -> dict[str, Any]:
    """The long row's ranking entry (None: not handed over), its text, and the budget."""
    result = answer_sync(engine, parse_request({"query": QUERY, **body}), profile=profile)
    assert result.profile == profile
    response = result.response
    for r in response.ranking:
        if r.row["id"] == "long":
            return {"entry": r.entry(), "body": r.row["body"], "budget": response.budget}
    return {"entry": None, "budget": response.budget}


@pytest.mark.parametrize("paged", [False, True])
def test_a_profiles_budget_and_passages_knob_decide_the_hand_over(
    engine: Engine, paged: bool
) -> None:
    body = {"page": 1} if paged else {}
    parts = long_entry(engine, "parts", **body)
    assert parts["entry"] is not None
    passage = parts["entry"]["passage"]
    assert parts["body"] == LONG[passage["start"] : passage["end"]]
    assert parts["budget"]["max_tokens"] == 400 and parts["budget"]["tokens_used"] <= 400
    whole = long_entry(engine, "whole", **body)
    assert whole["entry"] is None  # as before passages: too large, left out
    assert whole["budget"]["too_large_ranks"] == [2]
    # the global knobs set no budget: every row whole, nothing marked
    plain = long_entry(engine, None, **body)
    assert plain["body"] == LONG and "passage" not in plain["entry"]
    engine.broker.close()


def test_whole_is_no_override() -> None:
    """A service that takes no override still takes ``whole``: it sets no knob."""
    from nautilus_ranking.request.plan import forbid_overrides, given_overrides

    request = parse_request({"query": QUERY, "whole": ["row:" + "ab" * 12]})
    assert given_overrides(request) == {}
    forbid_overrides(request)  # no 403
