"""The determinism promise says where it holds: the same rows give the same bytes with
a warm cache and no embedding deadline fallback, and an answer past the deadline says so
in ``embedding`` (docs/design.md's contract, the deadline's entry in configuration.md)."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _bullet(page: str, start: str) -> str:
    """The bullet of ``page`` that starts with ``start``, up to the next bullet."""
    text = (DOCS / page).read_text(encoding="utf-8")
    found = re.search(re.escape(start) + r".*?(?=\n- |\n\n)", text, re.S)
    assert found is not None, f"{page}: no bullet starting {start!r}"
    return " ".join(found.group(0).split())


def test_the_determinism_contract_names_the_embedding_deadline() -> None:
    contract = _bullet("design.md", "- **Deterministic.**")
    assert "warm cache" in contract
    assert "NAUTILUS_EMBEDDER_DEADLINE_MS" in contract
    assert "`embedding`" in contract and "ranking_hash" in contract
    assert "NAUTILUS_EMBEDDER_DEADLINE_MS=0" in contract


def test_the_deadlines_entry_says_what_it_does_to_determinism() -> None:
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    entry = text.split("### `NAUTILUS_EMBEDDER_DEADLINE_MS`", 1)[1].split("\n### ", 1)[0]
    determinism = " ".join(entry.split("- Determinism:", 1)[1].split("\n- ", 1)[0].split())
    assert "warm cache" in determinism and "`embedding`" in determinism
    assert "Set `0`" in determinism
