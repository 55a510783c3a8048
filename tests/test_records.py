"""The score components are declared once, on RankedRow; every listing follows it."""

from __future__ import annotations

from dataclasses import fields

from nautilus_ranking.cli.output import ranked_table
from nautilus_ranking.records import SCORE_COMPONENTS, SCORE_FIELDS, WHY_COMPONENTS, RankedRow
from nautilus_ranking.synthesis.select import Scores

NAMES = [name for name, _ in SCORE_COMPONENTS]


def test_ranked_row_ends_with_the_components_in_declaration_order() -> None:
    # select() builds RankedRows positionally from Scores columns named as these fields
    names = [f.name for f in fields(RankedRow)]
    assert names[:6] == ["source_id", "row", "score", "rank", "source_rank", "also_from"]
    assert names[6:] == NAMES


def test_scores_hold_every_component_by_its_ranked_row_name() -> None:
    assert {f for f in Scores.__dataclass_fields__} == {"score", "doc", *NAMES}


def test_json_fields_why_and_explain_columns_come_from_the_declaration() -> None:
    assert ("score", *NAMES) == SCORE_FIELDS
    assert set(WHY_COMPONENTS) <= set(NAMES) and "relevance" in WHY_COMPONENTS
    row = RankedRow(
        "a", {"id": 1, "title": "disk full"}, 0.5, 1, 1, similarity=0.25, voters=2, boost_bump=0.125
    )
    assert row.why() == {name: getattr(row, name) for name in WHY_COMPONENTS}
    assert list(row.explain()) == ["source_id", "score", "rank", "source_rank", "also_from", *NAMES]
    table = ranked_table([row], explain=True).splitlines()
    header = table[0].split()
    assert header[3:-1] == [meta["column"] for _, meta in SCORE_COMPONENTS]
    # one legend line per column says what it means
    for name, meta in SCORE_COMPONENTS:
        assert any(line.split()[:2] == [meta["column"], f"{name}:"] for line in table), name
    assert "0.250" in table[1] and "0.1250" in table[1]
