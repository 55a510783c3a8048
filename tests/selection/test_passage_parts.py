"""Under a token budget a row too large for it is handed over as its best passage,
marked, rather than left out; the same request with ``whole`` hands it over whole; off,
the budget is what it was."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_process import run_nautilus

from nautilus_ranking.records import BrokerResponse, RankedRow
from nautilus_ranking.request.pages import paging
from nautilus_ranking.selection import apply_budget
from nautilus_ranking.selection.budget import entry_text
from nautilus_ranking.selection.budget_pages import budget_page
from nautilus_ranking.selection.passage_parts import parts_that_fit
from nautilus_ranking.selection.tokens import count_tokens
from nautilus_ranking.settings.model import NautilusSettings

FILLER = " ".join(
    f"The committee reviewed quarterly figures number {i} and staffing plans again."
    for i in range(80)
)
ANSWER = "To restart the payments service drain the queue then run the failover script."
LONG = FILLER + " " + ANSWER + " " + FILLER
#: Room for two passages and a short row, not for a long row whole.
BUDGET = 600


def ranked(rank: int, row: dict[str, Any], passage: dict[str, Any] | None = None) -> RankedRow:
    return RankedRow("docs", row, 1.0 / rank, rank, rank, relevance=0.5, passage=passage)


def ranking() -> list[RankedRow]:
    start = LONG.index(ANSWER)
    scored = {"field": "text", "start": start - 20, "end": start + len(ANSWER), "length": len(LONG)}
    return [
        ranked(1, {"id": "long", "text": LONG}, scored),
        ranked(2, {"id": "short", "text": "payments service notes"}),
        ranked(3, {"id": "long2", "text": FILLER}),
    ]


def test_a_row_too_large_is_handed_over_as_its_passage_marked() -> None:
    data = {"docs": [r.row for r in ranking()]}
    _, kept, fitted = apply_budget(data, ranking(), BUDGET, passages=True)
    assert [r.row["id"] for r in kept] == ["long", "short", "long2"]
    first = kept[0]
    assert ANSWER in first.row["text"] and len(first.row["text"]) < len(LONG)
    marked = first.entry()["passage"]  # the lean entry says which part, and the whole's handle
    assert marked["field"] == "text" and marked["length"] == len(LONG)
    assert LONG[marked["start"] : marked["end"]] == first.row["text"]
    assert marked["handle"].startswith("row:")
    # a row no model scored in passages: its first window
    assert FILLER.startswith(kept[2].row["text"]) and kept[2].passage["start"] == 0
    assert fitted.tokens_used <= BUDGET and not fitted.over_budget_first


def test_off_a_row_too_large_is_left_out_as_before() -> None:
    data = {"docs": [r.row for r in ranking()]}
    _, kept, fitted = apply_budget(data, ranking(), BUDGET, passages=False)
    assert [r.row["id"] for r in kept] == ["long"] and fitted.over_budget_first
    assert kept[0].row["text"] == LONG and "passage" not in kept[0].entry()


def test_whole_names_a_row_handed_over_whole_in_its_place() -> None:
    data = {"docs": [r.row for r in ranking()]}
    _, parts, _ = apply_budget(data, ranking(), BUDGET, passages=True)
    handle = parts[0].entry()["passage"]["handle"]
    _, kept, fitted = apply_budget(data, ranking(), BUDGET, passages=True, whole=[handle])
    assert kept[0].row["text"] == LONG and "passage" not in kept[0].entry()
    assert [r.row["id"] for r in kept] == ["long", "short", "long2"]
    assert fitted.tokens_used > BUDGET  # asked for whole: handed over whatever it costs


def test_a_page_hands_a_row_over_as_its_passage_once() -> None:
    rows = ranking()
    counts = count_tokens([entry_text(r) for r in rows])
    before = budget_page(counts, [True] * 3, 1, BUDGET, 3)
    assert before.too_large  # without passages, the third page's long row is left out
    _, costs = parts_that_fit(rows, counts, BUDGET, entry_text)
    pages = [budget_page(costs, [True] * 3, 1, BUDGET, n) for n in (1, 2, 3)]
    assert [p.kept for p in pages] == [(0,), (1,), (2,)]
    assert not any(p.too_large for p in pages)


def write_sources(tmp: Path) -> Path:
    seed = tmp / "docs.jsonl"
    rows = [
        {"id": "long", "title": "Quarterly notes", "body": LONG},
        {"id": "short", "title": "Payments", "body": "payments service restart notes"},
    ]
    seed.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    path = tmp / "nautilus.yaml"
    path.write_text(
        "sources:\n  - id: docs\n    type: sqlite_fts\n"
        f"    path: docs/docs.db\n    seed: {seed}\n    columns: [title, body]\n"
    )
    return path


def test_the_cli_hands_a_passage_over_and_the_whole_row_when_asked(tmp_path: Path) -> None:
    env = {"NAUTILUS_CONFIG": str(write_sources(tmp_path)), "NAUTILUS_RANKING_TOP_K": "5"}
    query = ["query", "--json", "--max-tokens", "400", "restart payments service failover"]
    first = json.loads(run_nautilus(*query, env=env, check=True).stdout)
    passage = next(e for e in first["ranking"] if e["id"] == "long")["passage"]
    assert passage["field"] == "body" and passage["length"] == len(LONG)
    row = next(r for r in first["data"]["docs"] if r["id"] == "long")
    assert row["body"] == LONG[passage["start"] : passage["end"]]
    again = json.loads(
        run_nautilus(*query, "--whole", passage["handle"], env=env, check=True).stdout
    )
    assert next(r for r in again["data"]["docs"] if r["id"] == "long")["body"] == LONG
    assert all("passage" not in e for e in again["ranking"])
    off = json.loads(
        run_nautilus(*query, env={**env, "NAUTILUS_RANKING_BUDGET_PASSAGES": "false"}).stdout
    )
    assert all("passage" not in e for e in off["ranking"])
    assert "long" in off["budget"]["too_large_ranks"] or all(
        r["id"] != "long" or r["body"] == LONG for r in off["data"]["docs"]
    )


def test_the_cli_text_says_which_part_was_handed_over(tmp_path: Path) -> None:
    env = {"NAUTILUS_CONFIG": str(write_sources(tmp_path)), "NAUTILUS_RANKING_TOP_K": "5"}
    out = run_nautilus(
        "query", "--max-tokens", "400", "restart payments service failover", env=env, check=True
    ).stdout
    assert f"of {len(LONG)} characters; the whole row: --whole row:" in out


def scored_rows(count: int) -> list[RankedRow]:
    """``count`` rows scored by a passage, each within the budget alone."""
    text = FILLER[:1200] + " " + ANSWER + " " + FILLER[:600]
    start = text.index(ANSWER)
    passage = {"field": "text", "start": start, "end": start + len(ANSWER), "length": len(text)}
    return [ranked(r, {"id": f"row{r}", "text": text}, passage) for r in range(1, count + 1)]


def test_rows_scored_by_a_passage_share_the_budget_as_passages() -> None:
    rows = scored_rows(6)
    budget = 3 * max(count_tokens([entry_text(r) for r in rows]))  # three rows whole
    _, kept, fitted = apply_budget({"docs": [r.row for r in rows]}, rows, budget, passages=True)
    assert [r.row["id"] for r in kept] == [f"row{r}" for r in range(1, 7)]
    assert all(r.row["text"] == ANSWER and r.passage is not None for r in kept)
    assert fitted.tokens_used <= budget


def test_a_budget_with_room_for_every_row_whole_hands_them_over_whole() -> None:
    rows = scored_rows(6)
    budget = 6 * max(count_tokens([entry_text(r) for r in rows]))
    _, kept, _ = apply_budget({"docs": [r.row for r in rows]}, rows, budget, passages=True)
    assert len(kept) == 6 and all(r.row == rows[0].row | {"id": r.row["id"]} for r in kept)
    assert all("passage" not in r.entry() for r in kept)


def test_a_pages_share_is_of_the_rows_the_page_holds() -> None:
    """Paged, the deeper ranking holds later pages' rows too: a row's share is the
    budget over the page's rows, so a page with room for its rows whole has them whole."""
    rows = scored_rows(6)
    budget = 2 * max(count_tokens([entry_text(r) for r in rows]))
    settings = NautilusSettings(ranking_top_k=2)
    pages = paging("q", settings, ["docs"], page=1)
    assert pages is not None
    response = BrokerResponse("r", {"docs": [r.row for r in rows]}, rows)
    page, _, fitted = pages.cut(response, max_tokens=budget, passages=True)
    assert [r.row["id"] for r in page.ranking] == ["row1", "row2"]
    assert all(r.row == rows[0].row | {"id": r.row["id"]} for r in page.ranking)
    assert fitted is not None and fitted.tokens_used <= budget
