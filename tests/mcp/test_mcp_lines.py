"""What the MCP ``search`` tool's text says of one row: its line."""

from __future__ import annotations

from nautilus_ranking.mcp.results import _line


def test_a_vector_rows_line_does_not_end_with_the_embedding_models_name() -> None:
    row = {
        "id": "PM-7",
        "title": "Audit topic filled a Kafka broker",
        "text": "retention was unbounded",
        "embedding_model": "hashing-v2-65536",
    }
    line = _line(row)
    assert line == "PM-7 — Audit topic filled a Kafka broker | retention was unbounded"
    assert "hashing" not in line
