"""The MCP search tool's text says whose number the confidence is, as the JSON answer does."""

from __future__ import annotations

from typing import Any

from nautilus_ranking.mcp.results import search_text


def _out(fit: str) -> dict[str, Any]:
    return {
        "query": "checkout 502",
        "results": [],
        "sources_errored": [],
        "page": None,
        "confidence": 0.4,
        "confidence_fit": fit,
    }


def test_the_shipped_number_is_labelled_not_a_probability() -> None:
    text = search_text(_out("shipped"))
    assert "confidence that a result is relevant: 0.40 (the shipped fit's" in text
    assert "not a probability" in text


def test_a_local_fit_reads_as_it_is() -> None:
    assert search_text(_out("local")).endswith("confidence that a result is relevant: 0.40")
