"""The boost level table and the two stage functions."""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from nautilus import AdapterResult, HashingEmbedder, RankedRow, RankingSynthesizer
from nautilus.synthesis.boosts import (
    BOOST_LEVELS,
    RRF_K,
    stage1_key,
    stage1_reach,
    stage2_score,
    weights_for,
)

LEVELS = ["low", "medium", "high"]


def test_table_is_frozen() -> None:
    with pytest.raises(TypeError):
        BOOST_LEVELS["extreme"] = BOOST_LEVELS["high"]  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        BOOST_LEVELS["high"].bump = 0.5  # type: ignore[misc]


def test_levels_are_ordered_in_both_stages() -> None:
    multipliers = [BOOST_LEVELS[level].multiplier for level in LEVELS]
    bumps = [BOOST_LEVELS[level].bump for level in LEVELS]
    assert 1.0 < multipliers[0] < multipliers[1] < multipliers[2]
    assert 0.0 < bumps[0] < bumps[1] < bumps[2]


def test_no_boost_is_the_identity() -> None:
    none = weights_for(None)
    assert stage1_key(7.0, none.multiplier) == 1.0 / (RRF_K + 7)
    assert stage2_score(0.25, none.bump) == 0.25


def test_stage2_worked_example() -> None:
    # high adds 2% of the row's own relevance; nothing to an irrelevant row.
    assert stage2_score(0.5, BOOST_LEVELS["high"].bump) == pytest.approx(0.5 + 0.02 * 0.5)
    assert stage2_score(0.0, BOOST_LEVELS["high"].bump) == 0.0
    assert stage2_score(-0.2, BOOST_LEVELS["high"].bump) == pytest.approx(-0.2 + 0.02 * 0.2)


def test_stage1_key_worked_example() -> None:
    # high: rank 9 counts as rank 9 / 1.5 = 6, so its key is 1 / (60 + 6).
    assert stage1_key(9.0, BOOST_LEVELS["high"].multiplier) == pytest.approx(1 / 66)
    # ...which ties an unboosted rank-6 row, and beats rank 7.
    assert stage1_key(9.0, 1.5) == pytest.approx(stage1_key(6.0))
    assert stage1_key(9.0, 1.5) > stage1_key(7.0)


def test_stage1_is_rank_aware_not_source_first() -> None:
    """Unlike a score multiplier of 6 (Hindsight), a boosted deep row never beats
    another source's top rows: the boost is bounded in rank space."""
    high = BOOST_LEVELS["high"].multiplier
    assert stage1_key(40.0, high) < stage1_key(5.0)
    # A boosted list still interleaves with the others instead of coming first.
    boosted = [stage1_key(float(r), high) for r in range(1, 31)]
    plain = [stage1_key(float(r)) for r in range(1, 31)]
    merged = sorted([(k, "boosted") for k in boosted] + [(k, "plain") for k in plain],
                    reverse=True)
    top_30 = [label for _, label in merged[:30]]
    assert 15 <= top_30.count("boosted") <= 21
    assert top_30.count("plain") >= 9


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("other_rank", [1, 2, 3, 5, 10, 17])
def test_stage1_reach_matches_the_keys(level: str, other_rank: int) -> None:
    """The documented reach is exact: rank `reach` overtakes, rank `reach + 1` does not."""
    multiplier = BOOST_LEVELS[level].multiplier
    reach = stage1_reach(level, other_rank)
    other = stage1_key(float(other_rank))
    if reach >= 1:
        assert stage1_key(float(reach), multiplier) > other
    assert stage1_key(float(reach + 1), multiplier) <= other


def test_stage1_reach_documented_values() -> None:
    # docs/configuration.md: at high, another source's rank-5 row can be overtaken
    # by boosted ranks 1-7, never 8; nothing but rank 1 reaches a rank-1 row.
    assert stage1_reach("high", 5) == 7
    assert stage1_reach("high", 1) == 1
    assert stage1_reach("medium", 5) == 6
    assert stage1_reach("low", 5) == 5
    assert stage1_reach("low", 10) == 10
    assert all(stage1_reach(level, 1) == 1 for level in LEVELS)


@given(relevance=st.floats(-1, 1), rank=st.integers(1, 10_000))
def test_both_stages_are_monotonic_in_level(relevance: float, rank: int) -> None:
    keys = [stage1_key(float(rank), weights_for(lvl).multiplier) for lvl in [None, *LEVELS]]
    scores = [stage2_score(relevance, weights_for(lvl).bump) for lvl in [None, *LEVELS]]
    assert keys == sorted(keys)
    assert scores == sorted(scores)


@given(boosted=st.floats(0, 1), other=st.floats(0, 1))
def test_stage2_is_bounded_by_the_bump(boosted: float, other: float) -> None:
    """A boosted row overtakes an unboosted one only if that one was less than
    `bump` (relative to the boosted row's relevance) above it."""
    bump = BOOST_LEVELS["high"].bump
    if stage2_score(boosted, bump) > stage2_score(other) and boosted < other:
        assert other - boosted < bump * boosted


# --- the strong-match guarantee (docs/configuration.md, "Boost levels") ---------------------

#: The largest stage-2 bump of any level: what the guarantee's margin is made of.
MAX_BUMP = max(w.bump for w in BOOST_LEVELS.values())
OPS_WORDS = ["disk", "full", "database", "replica", "lag", "checkout", "latency", "timeout",
             "payment", "card", "redis", "session", "kafka", "broker", "dns", "cert"]


def _doc_key(ranked: RankedRow) -> object:
    """The document a ranked row stands for: its text (copies share it), else the row."""
    title = ranked.row.get("title", "")
    return title if isinstance(title, str) and title.strip() else id(ranked.row)


def _leads(a: RankedRow, b: RankedRow) -> bool:
    """The guarantee's condition: ``a``'s source votes are at least ``b``'s and its content
    vote leads ``b``'s by more than the largest bump of ``b``'s source votes."""
    votes_a, votes_b = a.evidence + a.unranked_vote, b.evidence + b.unranked_vote
    return votes_a >= votes_b and a.content - b.content > MAX_BUMP * votes_b + 1e-12


@given(sources=st.lists(st.lists(st.lists(st.sampled_from(OPS_WORDS), max_size=8),
                                 max_size=20), min_size=1, max_size=3),
       query=st.lists(st.sampled_from(OPS_WORDS), min_size=1, max_size=4),
       boosted=st.dictionaries(st.sampled_from(["s0", "s1", "s2"]), st.sampled_from(LEVELS),
                               min_size=1),
       cap=st.one_of(st.none(), st.integers(1, 20)), idf=st.booleans(),
       declared=st.lists(st.sampled_from([None, True, False]), min_size=3, max_size=3))
# Found by this property when the bump was a share of the whole relevance: the s1 row
# leads the boosted s2 row by 0.030 of a vote on content, with equal source votes; 2% of
# the s2 row's relevance (content included, 0.032) closed it, 2% of its votes (0.020) does not.
@example(sources=[[], [["disk", "disk", "disk", "full"]],
                  [["disk", "full", "full"], ["disk", "disk", "full", "full", "full", "full",
                                              "database"]]],
         query=["disk", "database"], boosted={"s2": "high"}, cap=None, idf=False,
         declared=[None, None, None])
# Found when a boost's candidate cap could push rows out: s1's "disk" (rank 4, the only
# match) is among the 7 rows the cap keeps without boosts, and the boosts let 7 others in.
@example(sources=[[], [[], [], [], ["disk"]], [[], [], [], []]], query=["disk"],
         boosted={"s0": "low", "s1": "low", "s2": "medium"}, cap=7, idf=False,
         declared=[None, None, None])
@settings(deadline=None, max_examples=200)  # two rankings an example, on a loaded machine
def test_a_boost_never_overturns_a_clear_content_lead(
        sources: list[list[list[str]]], query: list[str], boosted: dict[str, str],
        cap: int | None, idf: bool, declared: list[bool | None]) -> None:
    results = [AdapterResult(f"s{j}", [{"title": " ".join(words)} for words in rows],
                             ranked=declared[j]) for j, rows in enumerate(sources)]
    context = {"query": " ".join(query)}
    plain = RankingSynthesizer(idf=idf, max_candidates=cap).rank(results, context)
    boosted_rows = RankingSynthesizer(idf=idf, max_candidates=cap,
                                      source_boosts=boosted).rank(results, context)
    place = {_doc_key(r): i for i, r in enumerate(boosted_rows)}
    for a in plain:
        for b in plain:
            if _leads(a, b) and _doc_key(b) in place:
                assert _doc_key(a) in place, (a, b)
                assert place[_doc_key(a)] < place[_doc_key(b)], (a, b)


def test_an_exact_match_stays_ahead_of_a_boosted_source_sharing_one_word() -> None:
    # One source returns a single row whose text is the query; another returns 40 rows
    # of 8 words drawn from a small ops vocabulary, a few sharing one word with it.
    # Content ranks alone made them ~1% apart, and graph:high put three graph rows
    # above the exact match; by normalised similarity it leads by most of a vote.
    query = "disk latency spike on the storage node"
    vocabulary = ["cpu", "memory", "pager", "deploy", "rollback", "queue", "worker", "cache",
                  "timeout", "restart", "alert", "ticket", "network", "dns", "config", "quota",
                  "latency", "ingest"]
    rng = random.Random(7)
    graph = [{"id": f"g{i}", "text": " ".join(rng.choice(vocabulary) for _ in range(8))}
             for i in range(40)]
    assert sum("latency" in row["text"].split() for row in graph) >= 3
    results = [AdapterResult("sql", [{"id": "exact", "text": query}]),
               AdapterResult("graph", graph)]
    for cap in (None, 20):
        for boosts in (None, {"graph": "high"}):
            ranked = RankingSynthesizer(top_k=10, embedder=HashingEmbedder(), max_candidates=cap,
                                        source_boosts=boosts).rank(results, {"query": query})
            assert ranked[0].row["id"] == "exact", (cap, boosts)
            plain = RankingSynthesizer(top_k=10, max_candidates=cap).rank(
                results, {"query": query})
            assert all(_leads(plain[0], other) for other in plain[1:]), cap
