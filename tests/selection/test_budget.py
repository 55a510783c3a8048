"""The token budget: rows in rank order while they fit, a row that does not fit skipped,
the first row always handed over (flagged when it alone is over)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import toktok
from hypothesis import example, given
from hypothesis import strategies as st

from nautilus_ranking.records import RankedRow
from nautilus_ranking.selection import (
    BudgetResult,
    apply_budget,
    entry_text,
    fit_budget,
    fit_counts,
    ranking_entry,
)
from nautilus_ranking.selection.tokens import count_tokens


def reference(counts: list[int], max_tokens: int) -> tuple[list[int], int]:
    """The rule in plain words: take each row in rank order when it still fits; the first
    row whatever it costs."""
    kept: list[int] = []
    used = 0
    for i, cost in enumerate(counts):
        if i == 0 or used + cost <= max_tokens:
            kept.append(i)
            used += cost
    return kept, used


def test_a_worked_example() -> None:
    # budget 10: 4 fits (4), 7 does not (4 + 7 = 11), 3 fits (7), 5 does not (12), 3 fits (10)
    result = fit_counts([4, 7, 3, 5, 3, 1], 10)
    assert result == BudgetResult(10, (0, 2, 4), 4 + 3 + 3, 3, False)


def test_the_first_row_alone_over_the_budget_is_handed_over_flagged() -> None:
    result = fit_counts([12, 1, 1], 10)
    assert result == BudgetResult(10, (0,), 12, 2, True)
    assert result.as_dict() == {
        "max_tokens": 10,
        "tokens_used": 12,
        "rows_left_out": 2,
        "first_row_over_budget": True,
        "tokenizer": "estimate",  # fit_counts is handed counts: it cannot vouch for them
    }


def test_no_rows_and_a_budget_that_fits_everything() -> None:
    assert fit_counts([], 5) == BudgetResult(5, (), 0, 0, False)
    assert fit_counts([1, 2, 3], 6) == BudgetResult(6, (0, 1, 2), 6, 0, False)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "10", None])
def test_a_budget_that_is_not_a_positive_integer_is_refused(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_tokens must be an integer >= 1"):
        fit_counts([1], bad)


@given(st.lists(st.integers(0, 60), max_size=40), st.integers(1, 200))
@example([0, 5, 0], 1)
def test_the_budgeted_list_is_a_subsequence_and_no_skipped_row_would_have_fitted(
    counts: list[int], max_tokens: int
) -> None:
    result = fit_counts(counts, max_tokens)
    kept = list(result.kept)
    assert kept == sorted(set(kept))  # a subsequence, in rank order
    assert (kept[:1] == [0]) == bool(counts)  # the first row always
    assert result.tokens_used == sum(counts[i] for i in kept)
    assert result.left_out == len(counts) - len(kept)
    if result.over_budget_first:
        assert kept == [0] and counts[0] > max_tokens
    else:
        assert result.tokens_used <= max_tokens
        skipped = [i for i in range(len(counts)) if i not in kept]
        assert all(result.tokens_used + counts[i] > max_tokens for i in skipped)
    assert (kept, result.tokens_used) == reference(counts, max_tokens)


def _ranked(i: int, text: str, **extra: Any) -> RankedRow:
    return RankedRow(
        "docs",
        {"id": f"d{i}", "text": text, **extra},
        1.0 / (i + 1),
        i + 1,
        i + 1,
        relevance=1.0 / (i + 1),
    )


def test_rows_are_counted_as_serialised_and_never_exceed_the_budget() -> None:
    """Counted independently here with the same tokenizer on the same texts."""
    rows = [_ranked(i, "word " * (3 + 17 * (i % 4))) for i in range(30)]
    texts = [entry_text(r) for r in rows]
    own = toktok.batch_count(texts, "o200k_base")
    for max_tokens in (50, 200, 500, 1000, 5000):
        result = fit_budget(texts, max_tokens)
        assert sum(own[i] for i in result.kept) == result.tokens_used
        if not result.over_budget_first:
            assert result.tokens_used <= max_tokens
    assert fit_budget(texts, 10**6).kept == tuple(range(30))


def test_a_row_without_relevance_never_takes_a_skipped_relevant_rows_place() -> None:
    # budget 10: row 0 (4) fits; row 1 (7, relevant) does not (11); row 2 (3, relevant)
    # fits (7); row 3 (3) would fit (10) but has no relevance and row 1 was skipped
    result = fit_counts([4, 7, 3, 3], 10, [True, True, True, False])
    assert result == BudgetResult(10, (0, 2), 4 + 3, 2, False)
    # nothing relevant skipped: a row without relevance is handed over when it fits
    assert fit_counts([4, 3, 3], 10, [True, True, False]).kept == (0, 1, 2)
    # a row without relevance that did not fit takes no one's place either
    assert fit_counts([4, 9, 3], 10, [True, False, False]).kept == (0, 2)


def test_the_budget_of_a_ranking_leaves_out_a_row_of_no_relevance_after_a_skip() -> None:
    # The reproduction: the best answer (rank 2) is long; rank 3 has no content match
    # and no source vote (relevance 0) and is short. Before, it was handed over in rank
    # 2's place.
    answer = RankedRow(
        "wiki", {"id": "w1", "text": "count short " * 60}, 0.03, 2, 1, relevance=0.03
    )
    nothing = RankedRow("tickets", {"id": "t9", "text": "x"}, 0.0, 3, 7)
    first = _ranked(0, "oxycodone count short at handover")
    ranking = [first, answer, nothing]
    data = {"docs": [first.row], "wiki": [answer.row], "tickets": [nothing.row]}
    costs = count_tokens([entry_text(r) for r in ranking], exact=False)
    budget = costs[0] + costs[2]  # the first and the short one fit, not w1
    assert costs[1] > costs[2]
    out, kept, result = apply_budget(data, ranking, budget, exact=False)
    assert [r.row["id"] for r in kept] == ["d0"]
    assert out == {"docs": [first.row], "wiki": [], "tickets": []}
    assert result.left_out == 2
    # a passthrough (no row has relevance) keeps skip-and-continue as it was
    plain = [RankedRow(r.source_id, r.row, 0.0, r.rank, r.source_rank) for r in ranking]
    assert [r.row["id"] for r in apply_budget(data, plain, budget, exact=False)[1]] == [
        "d0",
        "t9",
    ]


def test_the_estimate_is_used_when_asked() -> None:
    result = fit_budget(["hello world", "hello"], 5, exact=False)  # 4 and 2 estimated
    assert result == BudgetResult(5, (0,), 4, 1, False)
    assert fit_budget(["hello world", "hello"], 5, exact=True).kept == (0, 1)  # 2 + 1


def test_an_entry_is_the_ranking_entry_with_its_row_as_canonical_json() -> None:
    ranked = _ranked(0, "Ünïcode", embedding=[0.5, 0.25])
    text = entry_text(ranked)
    entry = json.loads(text)
    # without explain: which row, its place, its score, its copies — no components
    assert entry == {
        "source_id": ranked.source_id,
        "id": "d0",
        "rank": ranked.rank,
        "score": ranked.score,
        "also_from": [],
        "row": {"id": "d0", "text": "Ünïcode"},
    }
    assert text == json.dumps(entry, sort_keys=True, separators=(",", ":"))
    explained = json.loads(entry_text(ranked, explain=True))
    assert explained == {"id": "d0", **ranked.explain(), "row": entry["row"]}
    assert len(entry_text(ranked)) < len(entry_text(ranked, explain=True)) / 2
    assert "embedding" in ranked.row  # the row itself is untouched
    assert ranking_entry(ranked, vectors=True)["row"]["embedding"] == [0.5, 0.25]


@given(st.lists(st.text(max_size=80), max_size=20), st.integers(1, 120))
def test_texts_under_a_budget_fit_as_o200k_base_counts_them(
    texts: list[str], max_tokens: int
) -> None:
    result = fit_budget(texts, max_tokens, exact=True)
    own = toktok.batch_count(texts, "o200k_base")
    assert result.tokens_used == sum(own[i] for i in result.kept)
    assert result.over_budget_first or result.tokens_used <= max_tokens
    skipped = set(range(len(texts))) - set(result.kept)
    assert result.over_budget_first or all(
        result.tokens_used + own[i] > max_tokens for i in skipped
    )


def test_the_budget_of_a_ranking_says_what_counted_its_rows() -> None:
    """Exact counts (the ``tokens`` extra, installed here) are labelled ``o200k_base``;
    the estimate, asked for, ``estimate``: the label is what counted the rows."""
    ranking = [_ranked(i, "disk full on the orders database") for i in range(3)]
    data = {"docs": [r.row for r in ranking]}
    assert apply_budget(data, ranking, 1000)[2].tokenizer == "o200k_base"
    assert apply_budget(data, ranking, 1000, exact=True)[2].tokenizer == "o200k_base"
    assert apply_budget(data, ranking, 1000, exact=False)[2].tokenizer == "estimate"
    assert apply_budget(data, ranking, 1000)[2].as_dict()["tokenizer"] == "o200k_base"
