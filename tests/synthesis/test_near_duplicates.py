"""Near copies: the resemblance of two texts (against a plain-Python reference), the greedy
collapse, and what the ranking does with it."""

from __future__ import annotations

import re
from itertools import pairwise
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from nautilus_ranking import AdapterResult, RankingSynthesizer
from nautilus_ranking.records import Copy
from nautilus_ranking.settings.parsing import NEAR_DUPLICATES_ON
from nautilus_ranking.synthesis.facts import FACT_WORDS
from nautilus_ranking.synthesis.near_duplicates import (
    SHINGLE,
    collapse,
    resemblance,
    shingles,
)
from nautilus_ranking.text.tokens import TokenBatch, tokenize

WORDS = ["disk", "full", "orders", "db", "primary", "replica", "lag", "restore", "backup"]
FACTFUL = ["due", "within", "hours", "24", "48", "48h", "june", "july", "eur", "k1", "notice"]


def reference_resemblance(texts: list[str]) -> dict[tuple[int, int], float]:
    """Jaccard of word 3-shingle sets, one text at a time, in plain Python; 0 (left out)
    when each text states a fact the other does not."""
    sets, stated = [], []
    for text in texts:
        tokens = tokenize(text)
        stated.append({t for t in tokens if re.fullmatch("[0-9]+[a-z]{0,3}", t) or t in FACT_WORDS})
        if 0 < len(tokens) < SHINGLE:
            sets.append({tuple(tokens)})
        else:
            sets.append({tuple(tokens[i : i + SHINGLE]) for i in range(len(tokens) - SHINGLE + 1)})
    out = {}
    for a in range(len(texts)):
        for b in range(a + 1, len(texts)):
            shared = len(sets[a] & sets[b])
            conflict = stated[a] - stated[b] and stated[b] - stated[a]
            if shared and not conflict:
                out[(a, b)] = shared / len(sets[a] | sets[b])
    return out


def fast(texts: list[str]) -> dict[tuple[int, int], float]:
    pairs = resemblance(shingles(TokenBatch.from_texts(texts))).expanded()
    return {
        (a, b): v
        for a, b, v in zip(pairs.a.tolist(), pairs.b.tolist(), pairs.value.tolist(), strict=True)
    }


@given(st.lists(st.lists(st.sampled_from(WORDS), max_size=12).map(" ".join), max_size=12))
@example(["disk", "disk full", "disk full orders", "DISK  Full,  orders!"])
@example(["", "the a of", "disk"])  # no tokens: near nothing
def test_resemblance_is_the_jaccard_of_word_shingles(texts: list[str]) -> None:
    got, want = fast(texts), reference_resemblance(texts)
    assert got.keys() == want.keys()
    np.testing.assert_allclose([got[k] for k in want], list(want.values()))


@given(st.lists(st.lists(st.sampled_from(FACTFUL), max_size=10).map(" ".join), max_size=10))
@example(["due within 24 hours", "due within 48 hours", "due within 24 hours june"])
def test_resemblance_leaves_out_texts_whose_facts_conflict(texts: list[str]) -> None:
    got, want = fast(texts), reference_resemblance(texts)
    assert got.keys() == want.keys()
    np.testing.assert_allclose([got[k] for k in want], list(want.values()))


def test_a_worked_example() -> None:
    # "a b c d" has shingles abc, bcd; "a b c e" has abc, bce: 1 shared of 3 -> 1/3
    texts = ["disk full orders primary", "disk full orders replica", "Disk FULL orders primary."]
    got = fast(texts)
    assert got[(0, 1)] == pytest.approx(1 / 3)
    assert got[(0, 2)] == 1.0  # case, whitespace and punctuation are not words
    assert got[(1, 2)] == pytest.approx(1 / 3)


def reference_collapse(near: dict[tuple[int, int], float], n: int, threshold: float) -> list[int]:
    into = [-1] * n
    for below in range(n):
        for above in range(below):
            if into[above] == -1 and near.get((above, below), 0.0) >= threshold:
                into[below] = above
                break
    return into


@given(st.lists(st.lists(st.sampled_from(WORDS[:5]), max_size=6).map(" ".join), max_size=14))
@example(["disk full orders", "disk full orders", "disk full orders"])  # a chain joins the first
def test_the_collapse_is_greedy_from_the_top(texts: list[str]) -> None:
    pairs = resemblance(shingles(TokenBatch.from_texts(texts)))
    for threshold in (0.3, 0.5, 1.0):
        got = collapse(pairs, len(texts), threshold).tolist()
        assert got == reference_collapse(fast(texts), len(texts), threshold)
        assert all(got[t] == -1 for t in got if t != -1)  # a row joins a kept row


def rank(results: list[AdapterResult], **settings: Any) -> list[Any]:
    return RankingSynthesizer(**settings).rank(results, {"query": "orders database disk full"})


INCIDENT = (
    "The orders database primary ran out of disk. WAL segments filled the volume overnight. "
    "Writes failed for twelve minutes until the volume was grown."
)
NEAR = (
    "Imported from the wiki. writes failed for twelve minutes until the volume was grown. "
    "the ORDERS database primary ran out of  disk."
)


def sources() -> list[AdapterResult]:
    return [
        AdapterResult("tickets", [{"id": "INC-1", "text": INCIDENT}, {"id": "INC-2", "text": "x"}]),
        AdapterResult(
            "postmortems",
            [{"id": "PM-7", "text": NEAR}, {"id": "PM-8", "text": "Disk full on orders replica"}],
        ),
        AdapterResult("archive", [{"id": "PM-7", "text": NEAR + " "}]),  # an exact copy of PM-7
        AdapterResult("wiki", [{"text": "Imported. " + INCIDENT}]),  # a near copy without an id
    ]


#: The resemblance of INCIDENT and NEAR (their ids left out) is 0.39: a sentence dropped, the
#: others shuffled, a boilerplate prefix, case and whitespace changed.
THRESHOLD = 0.3


def test_off_changes_nothing() -> None:
    assert rank(sources(), top_k=3) == rank(sources(), top_k=3, near_duplicates=None)


def test_a_near_copy_joins_the_row_above_it_and_says_where_it_was() -> None:
    plain = rank(sources())
    assert len(plain) == 5  # the archive's row is an exact copy of PM-7 already
    # PM-7 (two votes: the archive's exact copy pooled its vote) leads its near copies
    assert [r.row.get("id") for r in plain] == ["PM-8", "PM-7", None, "INC-1", "INC-2"]
    ranked = rank(sources(), near_duplicates=THRESHOLD)
    assert [r.row.get("id") for r in ranked] == ["PM-8", "PM-7", "INC-2"]
    kept = ranked[1]
    wiki = kept.also_from[1]
    assert kept.also_from == (
        Copy("archive", "PM-7", 1, "exact"),
        Copy("wiki", wiki.id, 1, "near"),
        Copy("tickets", "INC-1", 1, "near"),
    )
    assert str(wiki.id).startswith("sha256-")  # a row without an id is named by its content
    # near copies pool no votes: the kept row's score is what it was
    assert kept.score == plain[1].score


def test_a_collapsed_row_takes_no_top_k_slot() -> None:
    ranked = rank(sources(), near_duplicates=THRESHOLD, top_k=2)
    assert [r.row.get("id") for r in ranked] == ["PM-8", "PM-7"]


def test_near_copies_within_one_source_collapse() -> None:
    page = INCIDENT.split()
    chunks = [
        {"n": 0, "text": " ".join(page[:20])},
        {"n": 1, "text": " ".join(page[2:22])},  # overlaps chunk 0 by 18 words
        {"n": 2, "text": "Unrelated: the checkout service returns 502 behind the proxy."},
    ]
    ranked = rank([AdapterResult("wiki", chunks)], near_duplicates=0.6)
    assert sorted(r.row["n"] for r in ranked) == [0, 2] or sorted(r.row["n"] for r in ranked) == [
        1,
        2,
    ]
    [joined] = [c for r in ranked for c in r.also_from]
    assert joined.source_id == "wiki" and joined.copy == "near"


def test_a_threshold_of_one_collapses_only_the_same_words() -> None:
    ranked = rank(sources(), near_duplicates=1.0)
    assert len(ranked) == 5


@pytest.mark.parametrize("bad", [2, -0.1, float("nan"), "yes", 0, True])
def test_a_bad_threshold_is_refused_by_the_class(bad: Any) -> None:
    with pytest.raises(ValueError, match="near_duplicates"):
        RankingSynthesizer(near_duplicates=bad)


def test_the_dedup_key_collapse_runs_first() -> None:
    rows = [
        AdapterResult("a", [{"key": "k1", "text": INCIDENT}]),
        AdapterResult("b", [{"key": "k1", "text": "a different text altogether"}]),
        AdapterResult("c", [{"key": "k2", "text": NEAR}]),
    ]
    ranked = rank(rows, dedup_key="key", near_duplicates=THRESHOLD)
    assert len(ranked) == 1
    kinds = {c.source_id: c.copy for c in ranked[0].also_from}
    # a and b share a key (one document, exact); c is near a's text
    if ranked[0].source_id == "c":
        assert kinds == {"a": "near", "b": "near"}
    else:
        assert ranked[0].source_id == "a" and kinds == {"b": "exact", "c": "near"}


def test_ranks_stay_a_run() -> None:
    ranked = rank(sources(), near_duplicates=THRESHOLD)
    assert [r.rank for r in ranked] == list(range(1, len(ranked) + 1))
    assert all(a.score >= b.score for a, b in pairwise(ranked))


def test_the_row_id_is_not_part_of_the_compared_text() -> None:
    """Two rows with the same text and different ids are one text at threshold 1 ("1:
    identical text"); before, the id was compared too and kept them apart."""
    rows = [{"id": f"r{i}", "text": "Disk full on the orders primary"} for i in range(3)]
    rows.append({"id": "other", "text": "Checkout returns 502 behind the proxy"})
    ranked = rank([AdapterResult("mirror", rows)], near_duplicates=1.0)
    assert [r.row["id"] for r in ranked] == ["r0", "other"]
    assert [(c.id, c.copy) for c in ranked[0].also_from] == [("r1", "near"), ("r2", "near")]


def test_only_the_id_is_left_out_of_the_compared_text() -> None:
    # another string field still tells two rows apart
    rows = [
        {"id": "a", "title": "orders", "text": "Disk full on the orders primary"},
        {"id": "b", "title": "billing", "text": "Disk full on the orders primary"},
    ]
    ranked = rank([AdapterResult("wiki", rows)], near_duplicates=1.0)
    assert [r.row["id"] for r in ranked] == ["a", "b"]


def kept_rows(texts: list[str], threshold: float) -> int:
    pairs = resemblance(shingles(TokenBatch.from_texts(texts)))
    return int((collapse(pairs, len(texts), threshold) == -1).sum())


@given(
    st.lists(
        st.lists(st.sampled_from(WORDS[:5]), max_size=6).map(" ".join), min_size=1, max_size=8
    ),
    st.integers(0, 7),
    st.integers(0, 150),
    st.sampled_from([0.3, 0.5, 1.0]),
)
@example(["disk full orders db primary"], 0, 65, 1.0)
@example(["disk full orders", "db primary disk full orders"], 1, 100, 0.5)
def test_more_copies_never_mean_less_collapsing(
    texts: list[str], which: int, copies: int, threshold: float
) -> None:
    """Copies of one row put right below it collapse with it, however many: the rows
    kept are the rows kept without them. Before, a shingle shared by more than 64 rows
    was never paired on, so 65 copies of one text were 65 rows."""
    at = which % len(texts)
    copied = texts[: at + 1] + [texts[at]] * copies + texts[at + 1 :]
    # (a text without words is near nothing, its copies included: each stays)
    extra = 0 if tokenize(texts[at]) else copies
    assert kept_rows(copied, threshold) == kept_rows(texts, threshold) + extra


def test_ten_thousand_copies_collapse_into_one() -> None:
    text = "The orders database primary ran out of disk overnight"
    rows = [{"id": f"m{i}", "text": text} for i in range(10_000)]
    ranked = rank([AdapterResult("mirror", rows)], near_duplicates=1.0)
    assert len(ranked) == 1
    assert len(ranked[0].also_from) == 9_999


#: Two processing agreements, one template: they differ only in the hours a breach notice
#: may take and the processor's liability cap. Two obligations, never one text.
DPA = (
    "Data processing agreement, clause 9. The processor notifies the controller of a "
    "personal data breach without undue delay and in any case within {hours} hours of "
    "becoming aware of it, and assists the controller with the notification to the "
    "supervisory authority. Liability is capped at EUR {cap} per year."
)


def test_texts_that_differ_in_a_number_are_never_near_copies() -> None:
    texts = [
        DPA.format(hours=24, cap="1,000,000"),
        DPA.format(hours=48, cap="1,000,000"),  # another deadline
        DPA.format(hours=24, cap="2,000,000"),  # another amount
        DPA.format(hours=24, cap="1,000,000") + " Signed on 3 June 2024.",  # more, nothing else
    ]
    got = fast(texts)
    assert (0, 1) not in got and (0, 2) not in got and (1, 2) not in got and (1, 3) not in got
    # a text that only adds a fact (a date) is still its near copy
    assert got[(0, 3)] > NEAR_DUPLICATES_ON
    ranked = rank(
        [AdapterResult("dpa", [{"id": f"C-{n}", "text": t} for n, t in enumerate(texts)])],
        near_duplicates=NEAR_DUPLICATES_ON,
    )
    assert sorted(r.row["id"] for r in ranked) == ["C-0", "C-1", "C-2"]


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("due on 3 June 2024", "due on 3 July 2024"),  # a date
        ("due on Monday 3 June", "due on Tuesday 3 June"),
        ("a fee of 500 USD a month", "a fee of 500 EUR a month"),  # an amount's currency
    ],
)
def test_dates_and_currencies_are_facts_too(a: str, b: str) -> None:
    base = "The supplier sends the quarterly invoice for the hosting services, {}, by post."
    assert fast([base.format(a), base.format(b)]) == {}
