"""The request model: what every way in accepts, and the clear refusals."""

from __future__ import annotations

import pytest

from nautilus_ranking.request.errors import ProblemError
from nautilus_ranking.request.model import MAX_COUNT, parse_request


@pytest.mark.parametrize("field", ["top_k", "page"])
def test_a_count_with_thousands_of_digits_is_refused_like_the_setting(field: str) -> None:
    """A per-request top_k of 4,000 digits was accepted where NAUTILUS_RANKING_TOP_K
    refuses more than 18 digits."""
    with pytest.raises(ProblemError) as refused:
        parse_request({"query": "disk", field: int("9" * 4000)})
    assert refused.value.status == 422 and refused.value.extra["field"] == field
    assert "more than 18 digits" in refused.value.detail
    assert parse_request({"query": "disk", field: MAX_COUNT}).model_dump()[field] == MAX_COUNT


def test_every_refusal_names_the_field_and_what_is_valid() -> None:
    with pytest.raises(ProblemError) as refused:
        parse_request({"query": "", "top_k": True, "sources": "graph", "topk": 3})
    errors = {e["field"]: e["valid"] for e in refused.value.extra["errors"]}
    assert errors == {
        "query": "a non-empty string",
        "top_k": "an integer >= 1",
        "sources": "a list of source ids",
        "topk": "query, top_k, boosts, idf, sources, max_tokens, whole, cut, near_duplicates, "
        "diversity, max_per_source, canonical_sources, min_confidence, recency, as_of, explain, "
        "vectors, page, cursor",
    }
