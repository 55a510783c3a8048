"""Pages under a token budget: the next page starts at the first ranked row the budget
left out, pages never repeat a row, and together they hand over the whole ranking less
only the rows reported too large to fit a page alone."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from nautilus_ranking.selection.budget_pages import budget_page


def test_a_worked_example() -> None:
    # pages of 3, budget 10; costs by rank: 4 8 3 12 2 5 1
    counts = [4, 8, 3, 12, 2, 5, 1]
    relevant = [True] * len(counts)
    first = budget_page(counts, relevant, 3, 10, 1)
    # window ranks 1-3: 4 fits (4), 8 does not (12), 3 fits (7)
    assert (first.window, first.kept, first.too_large, first.more) == ((0, 1, 2), (0, 2), (), True)
    second = budget_page(counts, relevant, 3, 10, 2)
    # starts at rank 2, the row left out: 8 fits (8), 12 is over 10 alone, 2 fits (10)
    assert (second.window, second.kept, second.too_large) == ((1, 3, 4), (1, 4), (3,))
    third = budget_page(counts, relevant, 3, 10, 3)
    assert (third.window, third.kept, third.more) == ((5, 6), (5, 6), False)
    assert budget_page(counts, relevant, 3, 10, 4).kept == ()
    assert first.fitted.left_out == 1 and second.fitted.left_out == 1


def test_the_first_row_alone_over_the_budget_is_handed_over_flagged_once() -> None:
    first = budget_page([50, 3, 60, 4], [True] * 4, 2, 10, 1)
    assert first.kept == (0,) and first.fitted.over_budget_first
    second = budget_page([50, 3, 60, 4], [True] * 4, 2, 10, 2)
    assert (second.window, second.kept, second.too_large) == ((1, 2), (1,), (2,))
    assert not second.fitted.over_budget_first


def test_a_row_without_relevance_stays_behind_a_skipped_relevant_one_on_a_later_page() -> None:
    # page 2 starts at the too-large rank 3: it is skipped, so the irrelevant rank 4 does
    # not take its place; the page reports rank 3 and page 3 starts at rank 4
    counts, relevant = [1, 1, 30, 1, 1], [True, True, True, False, True]
    second = budget_page(counts, relevant, 2, 10, 2)
    assert (second.window, second.kept, second.too_large, second.more) == ((2, 3), (), (2,), True)
    third = budget_page(counts, relevant, 2, 10, 3)
    assert (third.window, third.kept, third.more) == ((3, 4), (3, 4), False)


RANKINGS = st.lists(st.tuples(st.integers(0, 40), st.booleans()), min_size=0, max_size=40)


@given(ranking=RANKINGS, size=st.integers(1, 6), max_tokens=st.integers(1, 60))
@example(ranking=[(5, True), (50, True), (5, True)], size=1, max_tokens=10)
@example(ranking=[(9, True), (2, False), (9, True), (2, True)], size=2, max_tokens=10)
def test_pages_never_repeat_and_hand_over_the_ranking_less_the_too_large(
    ranking: list[tuple[int, bool]], size: int, max_tokens: int
) -> None:
    counts = [c for c, _ in ranking]
    relevant = [r for _, r in ranking]
    handed: list[int] = []
    reported: list[int] = []
    number = 1
    while True:
        page = budget_page(counts, relevant, size, max_tokens, number)
        assert len(page.kept) <= size
        assert not set(page.kept) & set(handed)  # never a row twice
        assert not set(page.too_large) & set(reported)
        # the page starts at the first row no earlier page handed over or reported
        rest = [i for i in range(len(counts)) if i not in handed and i not in reported]
        assert list(page.window) == rest[:size]
        assert sorted(page.earlier) == sorted(handed + reported)  # what a cursor checks
        handed += page.kept
        reported += page.too_large
        # within the budget, except the ranking's first row alone, flagged
        used = sum(counts[i] for i in page.kept)
        assert used <= max_tokens or (page.kept == (0,) and page.fitted.over_budget_first)
        assert all(counts[i] > max_tokens for i in page.too_large)
        # every row above the next page's start is handed over or reported: a prefix
        following = [i for i in range(len(counts)) if i not in handed and i not in reported]
        if following:
            assert set(range(following[0])) <= set(handed) | set(reported)
        assert page.more == bool(following)
        if not page.more:
            break
        number += 1
        assert number <= len(counts) + 1  # each page hands over or reports a row
    assert sorted(handed + reported) == list(range(len(counts)))
    assert all(counts[i] > max_tokens and i != 0 for i in reported)
    assert budget_page(counts, relevant, size, max_tokens, number + 1).kept == ()
