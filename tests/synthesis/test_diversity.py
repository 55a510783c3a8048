"""Diversity: MMR over the whole ranking (against a plain-Python MMR), the per-source cap,
and pages cut from them that never overlap or skip."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from nautilus_ranking import AdapterResult, RankingSynthesizer
from nautilus_ranking.request.pages import Paging, ranking_key
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.synthesis.diversity import cap_per_source, mmr_order
from nautilus_ranking.synthesis.near_duplicates import Resemblance, resemblance, shingles
from nautilus_ranking.text.tokens import TokenBatch

WORDS = ["disk", "full", "orders", "db", "primary", "replica", "lag", "restore", "backup"]


def reference_mmr(score: list[float], sim: dict[tuple[int, int], float], w: float) -> list[int]:
    """MMR as written: each next row maximises (1-w)·scaled score − w·max sim to those placed
    (ties: the higher-ranked row)."""
    n = len(score)
    low, high = min(score), max(score)
    scaled = [(s - low) / (high - low) if high > low else 1.0 for s in score]
    placed: list[int] = []
    while len(placed) < n:
        best, best_key = -1, -np.inf
        for i in range(n):
            if i in placed:
                continue
            redundancy = max((sim.get((min(i, j), max(i, j)), 0.0) for j in placed), default=0.0)
            key = (1 - w) * scaled[i] - w * redundancy
            if key > best_key:
                best, best_key = i, key
        placed.append(best)
    return placed


@given(
    st.lists(st.integers(0, 20), min_size=1, max_size=14).map(lambda s: sorted(s, reverse=True)),
    st.dictionaries(
        st.tuples(st.integers(0, 13), st.integers(0, 13)).filter(lambda p: p[0] < p[1]),
        st.sampled_from([0.25, 0.5, 0.75, 1.0]),
        max_size=20,
    ),
    st.sampled_from([0.25, 0.5, 1.0]),
)
@example([3, 2, 1], {(0, 1): 1.0}, 0.5)  # the copy of the first drops below the third
def test_mmr_is_greedy_marginal_relevance(
    scores: list[int], sim: dict[tuple[int, int], float], weight: float
) -> None:
    n = len(scores)
    sim = {k: v for k, v in sim.items() if k[1] < n}
    pairs = Resemblance(
        np.array([a for a, _ in sim], dtype=np.int64),
        np.array([b for _, b in sim], dtype=np.int64),
        np.array(list(sim.values()), dtype=np.float64),
    )
    score = np.array(scores, dtype=np.float64) / 8  # exact in binary: no tie is lost
    got = mmr_order(score, pairs, weight).tolist()
    assert got == reference_mmr(score.tolist(), sim, weight)
    assert got[:1] == [0]  # the first row stays first


def test_a_worked_example() -> None:
    # scores 1, 0.9, 0.5 scale to 1, 0.8, 0; rows 0 and 1 resemble each other by 1.
    # w 0.5: after row 0, row 1 scores 0.5·0.8 − 0.5·1 = −0.1, row 2 0.5·0 − 0 = 0.
    pairs = Resemblance(np.array([0]), np.array([1]), np.array([1.0]))
    assert mmr_order(np.array([1.0, 0.9, 0.5]), pairs, 0.5).tolist() == [0, 2, 1]
    assert mmr_order(np.array([1.0, 0.9, 0.5]), pairs, 0.1).tolist() == [0, 1, 2]


@given(
    st.lists(
        st.lists(st.sampled_from(WORDS[:4]), min_size=1, max_size=5).map(" ".join), max_size=14
    ),
    st.sampled_from([0.3, 0.7, 1.0]),
)
@example(["disk full orders"] * 3 + ["disk full orders db", "disk full orders"], 0.7)
def test_copies_paired_once_give_the_mmr_of_every_pair(texts: list[str], w: float) -> None:
    """A later copy is paired with its first copy only (near_duplicates.Resemblance); MMR
    over those pairs is MMR over every pair spelled out."""
    compact = resemblance(shingles(TokenBatch.from_texts(texts)))
    score = np.linspace(1.0, 0.0, len(texts))
    got = mmr_order(score, compact, w).tolist()
    assert got == mmr_order(score, compact.expanded(), w).tolist()


def test_the_cap_holds_in_every_page_while_other_rows_remain() -> None:
    # source 0 floods: with a cap of 1 a page of 3 takes one of its rows and two others
    sources = [0, 0, 0, 1, 0, 2, 0, 1]
    order = cap_per_source(sources, 1, 3).tolist()
    assert order == [0, 3, 5, 1, 2, 7, 4, 6]
    pages = [[sources[i] for i in order[k : k + 3]] for k in range(0, 8, 3)]
    # page 2: one row of source 0 and one of source 1, then only source 0's rows are left,
    # and the first of them fills the page (in ranking order)
    assert pages[0] == [0, 1, 2] and pages[1] == [0, 0, 1]


@given(st.lists(st.integers(0, 3), max_size=30), st.integers(1, 4), st.integers(1, 6))
def test_the_cap_is_a_permutation_and_holds_when_it_can(
    sources: list[int], cap: int, block: int
) -> None:
    order = cap_per_source(sources, cap, block).tolist()
    assert sorted(order) == list(range(len(sources)))
    for start in range(0, len(order), block):
        page = [sources[i] for i in order[start : start + block]]
        later = {sources[i] for i in order[start + block :]}
        for source in set(page):
            over = page.count(source) > cap
            # over the cap only when every row left was of a source full in this page
            assert not over or all(page.count(s) >= cap for s in later)


def ranker(**settings: Any) -> RankingSynthesizer:
    return RankingSynthesizer.from_settings(NautilusSettings(**settings))


def batch() -> list[AdapterResult]:
    text = [" ".join(WORDS[i % 9 :] + WORDS[: i % 5]) + f" row{i}" for i in range(40)]
    return [
        AdapterResult("flood", [{"id": f"f{i}", "text": text[i]} for i in range(0, 40, 2)]),
        AdapterResult("tickets", [{"id": f"t{i}", "text": text[i]} for i in range(1, 40, 4)]),
        AdapterResult(
            "wiki", [{"id": f"w{i}", "text": text[i] + " wiki"} for i in range(3, 40, 4)]
        ),
    ]


QUERY = {"query": "orders db disk full lag"}
SPREAD = {
    "ranking_near_duplicates": 0.5,
    "ranking_diversity": 0.4,
    "ranking_max_per_source": 2,
}


def test_pages_chain_disjoint_and_complete() -> None:
    """Page n is cut from a ranking of the top n·K+1, as request/pages.py does: with
    collapse, diversity and a cap on, the pages follow one another with no row twice and
    none skipped, and end where the whole ranking ends."""
    size = 4
    settings = NautilusSettings(ranking_top_k=size, **SPREAD)
    whole = ranker(**SPREAD).rank(batch(), QUERY)
    key = ranking_key(QUERY["query"], settings, ["flood", "tickets", "wiki"])
    seen: list[tuple[str, str]] = []
    number = 1
    while True:
        paging = Paging(number, size, key)
        deeper = paging.synthesizer(settings, None).rank(batch(), QUERY)
        page = deeper[(number - 1) * size : number * size]
        seen.extend((r.source_id, r.row["id"]) for r in page)
        if len(deeper) <= number * size:
            break
        number += 1
    assert len(seen) == len(set(seen))
    # the whole ranking's rows, page by page, each page held to the cap
    assert sorted(seen) == sorted((r.source_id, r.row["id"]) for r in whole)
    for start in range(0, len(seen) - size, size):
        sources = [s for s, _ in seen[start : start + size]]
        assert max(sources.count(s) for s in set(sources)) <= 2
    assert number > 3  # the chain ran over several pages


def test_the_first_row_stays_first() -> None:
    plain = ranker(ranking_top_k=5).rank(batch(), QUERY)
    spread = ranker(ranking_top_k=5, **SPREAD).rank(batch(), QUERY)
    assert spread[0].row == plain[0].row


def test_a_cap_beats_a_boost() -> None:
    boosted = ranker(ranking_top_k=6, source_boosts={"flood": "high"}).rank(batch(), QUERY)
    assert [r.source_id for r in boosted].count("flood") > 2
    ranked = ranker(
        ranking_top_k=6, ranking_max_per_source=2, source_boosts={"flood": "high"}
    ).rank(batch(), QUERY)
    assert [r.source_id for r in ranked].count("flood") == 2
    # a cap of 1 leaves each source one more row at a time when the page cannot be full
    capped = ranker(ranking_top_k=6, ranking_max_per_source=1).rank(batch(), QUERY)
    assert sorted(r.source_id for r in capped) == sorted(["flood", "tickets", "wiki"] * 2)


def test_diversity_zero_is_off() -> None:
    assert ranker(ranking_top_k=5, ranking_diversity=0).rank(batch(), QUERY) == ranker(
        ranking_top_k=5
    ).rank(batch(), QUERY)


@given(
    st.lists(
        st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=8), max_size=6),
        min_size=1,
        max_size=3,
    ),
    st.sampled_from([None, "low", "high", "-high"]),
    st.sampled_from([0.0, 0.3, 1.0]),
    st.sampled_from([None, 1, 2]),
)
@example([[["disk"]], [["disk", "full"], ["disk"]]], "high", 1.0, 1)
def test_the_first_place_is_the_fused_rankings_first(
    sources: list[list[list[str]]], level: str | None, weight: float, cap: int | None
) -> None:
    results = [
        AdapterResult(f"s{i}", [{"id": f"s{i}-{j}", "text": " ".join(w)} for j, w in enumerate(r)])
        for i, r in enumerate(sources)
    ]
    boosts = {"s0": level} if level else {}
    plain = RankingSynthesizer(top_k=5, source_boosts=boosts).rank(results, QUERY)
    spread = RankingSynthesizer(
        top_k=5, source_boosts=boosts, diversity=weight, max_per_source=cap
    ).rank(results, QUERY)
    assert [r.row for r in spread[:1]] == [r.row for r in plain[:1]]


def reference_cap(sources: list[int], cap: int, block: int | None, limit: int | None) -> list[int]:
    """The cap as its rule is written: fill each block in ranking order at the cap, then
    one more row of each source a pass while the block has room (quadratic)."""
    n = len(sources)
    size = n if block is None else block
    wanted = n if limit is None else min(limit, n)
    pending, out = list(range(n)), []
    while pending and len(out) < wanted:
        counts: dict[int, int] = {}
        taken: list[int] = []
        level = cap
        while len(taken) < size and pending:
            rest: list[int] = []
            for at, i in enumerate(pending):
                if len(taken) == size:
                    rest.extend(pending[at:])
                    break
                if counts.get(sources[i], 0) < level:
                    counts[sources[i]] = counts.get(sources[i], 0) + 1
                    taken.append(i)
                else:
                    rest.append(i)
            pending = rest
            level += 1
        out.extend(sorted(taken))
    return out + pending


@given(
    st.lists(st.integers(0, 5), max_size=60),
    st.integers(1, 4),
    st.one_of(st.none(), st.integers(1, 9)),
    st.one_of(st.none(), st.integers(0, 70)),
)
@example([0, 0, 0, 1, 0, 2, 0, 1], 1, 3, None)
@example(list(range(30)) + [0] * 30, 1, 4, 25)  # as many sources as rows, small blocks
def test_the_cap_is_its_rule_as_written(
    sources: list[int], cap: int, block: int | None, limit: int | None
) -> None:
    got = cap_per_source(sources, cap, block, limit).tolist()
    assert got == reference_cap(sources, cap, block, limit)
