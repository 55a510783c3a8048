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
    # then the row's time, None unless time ranks, and the passage that scored a row
    # past the model's window (never components: absent when unset)
    assert names[6:] == [*NAMES, "time", "passage"]


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
    table = ranked_table([row], explain=True, wide=True).splitlines()
    header = table[0].split()
    assert header[3:-2] == [meta["column"] for _, meta in SCORE_COMPONENTS]
    assert header[-2:] == ["engine", "row"]  # the source's own score, then the row
    # one legend line per column says what it means
    for name, meta in SCORE_COMPONENTS:
        assert any(line.split()[:2] == [meta["column"], f"{name}:"] for line in table), name
    assert "0.250" in table[1] and "0.1250" in table[1]


def test_copies_are_shown_the_same_way_everywhere() -> None:
    from nautilus_ranking.mcp.results import _result, _result_line
    from nautilus_ranking.records import Copy

    copies = (Copy("tickets", "INC-1043", 2, "exact"), Copy("postmortems", "PM-7", 1, "near"))
    row = RankedRow("runbooks", {"id": "RB-15", "title": "disk full"}, 0.5, 1, 3, also_from=copies)
    entry = row.entry()
    assert entry["also_from"] == [
        {"source_id": "tickets", "id": "INC-1043", "source_rank": 2, "copy": "exact"},
        {"source_id": "postmortems", "id": "PM-7", "source_rank": 1, "copy": "near"},
    ]
    assert row.explain()["also_from"] == entry["also_from"]
    assert (
        ranked_table([row], explain=True)
        .splitlines()[1]
        .endswith("(also in: tickets:INC-1043, postmortems:PM-7 (near))")
    )
    line = _result_line(_result(row, explain=False, ranked=True, vectors=False))
    assert "also in: tickets:INC-1043, postmortems:PM-7 (near)" in line


def test_a_long_source_id_is_shown_whole_or_visibly_elided() -> None:
    """The source column widens to the longest id (``regulator_fa`` was all of
    ``regulator_faq`` a reader saw), up to a bound past which the id ends in '…'."""
    rows = [
        RankedRow("regulator_faq", {"id": "F-1", "title": "breach notice"}, 0.5, 1, 1),
        RankedRow("tickets", {"id": "T-1", "title": "disk full"}, 0.4, 2, 1),
        RankedRow("s" * 60, {"id": "L-1", "title": "long"}, 0.3, 3, 1),
    ]
    for explain in (False, True):
        table = ranked_table(rows, explain=explain).splitlines()
        assert table[1].split()[1] == "regulator_faq"
        assert table[2].split()[1] == "tickets"
        shown = table[3].split()[1]
        assert shown.endswith("…") and "s" * 20 in shown and len(shown) <= 32
        # every row's score starts in the same column, under its header
        scores = ("0.5000", "0.4000", "0.3000")
        starts = {line.index(score) for line, score in zip(table[1:4], scores, strict=True)}
        assert len(starts) == 1
    wide = ranked_table(rows, explain=True, wide=True).splitlines()
    assert wide[3].split()[1] == "s" * 60
    short = ranked_table(rows[1:2], explain=False).splitlines()
    assert short[0].startswith(f"{'rank':>4}  {'source':<12} ")  # as before for short ids
