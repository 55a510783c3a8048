"""The boost level table and the two stage functions."""

from __future__ import annotations

import dataclasses
import itertools
import random

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from nautilus_ranking import AdapterResult, HashingEmbedder, RankedRow, RankingSynthesizer
from nautilus_ranking.synthesis.ranking_boost import (
    BOOST_LEVELS,
    MAX_SPREAD,
    RANK_DECAY,
    RRF_K,
    SPREAD_DEPTH,
    rank_decay,
    relevance_spread,
    stage1_key,
    stage1_reach,
    stage2_bumps,
    unboosted_places,
    weights_for,
)

BOOSTS = ["low", "medium", "high"]
LEVELS = ["-high", "-medium", "-low", *BOOSTS]  # lowest first, as VALID_LEVELS
VOTE = 1 / (RRF_K + 1)  # one source's rank-1 vote


def test_table_is_frozen() -> None:
    with pytest.raises(TypeError):
        BOOST_LEVELS["extreme"] = BOOST_LEVELS["high"]  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        BOOST_LEVELS["high"].bump = 0.5  # type: ignore[misc]


def test_levels_are_ordered_in_both_stages() -> None:
    assert list(BOOST_LEVELS) == LEVELS
    multipliers = [weights_for(level).multiplier for level in [*LEVELS[:3], None, *BOOSTS]]
    bumps = [weights_for(level).bump for level in [*LEVELS[:3], None, *BOOSTS]]
    assert multipliers == sorted(set(multipliers)) and multipliers[3] == 1.0
    assert bumps == sorted(set(bumps)) and bumps[3] == 0.0


@pytest.mark.parametrize("level", BOOSTS)
def test_a_demotion_mirrors_its_boost(level: str) -> None:
    up, down = BOOST_LEVELS[level], BOOST_LEVELS[f"-{level}"]
    assert down.bump == -up.bump
    assert down.multiplier == pytest.approx(1 / up.multiplier)


def test_no_boost_is_the_identity() -> None:
    none = weights_for(None)
    assert stage1_key(7.0, none.multiplier) == 1.0 / (RRF_K + 7)
    relevance = np.array([0.03, 0.02, 0.01])
    bumps = stage2_bumps(relevance, np.array([0, 1, 0]), np.arange(3), np.arange(3), np.zeros(2))
    assert bumps.tolist() == [0.0, 0.0, 0.0]


def _spread_batch() -> tuple[np.ndarray, np.ndarray]:
    """20 documents, relevance 0.0020 down to 0.0001 in steps of 0.0001 (a spread well
    under the quarter-vote cap); even rows from source 0, odd ones from source 1."""
    relevance = np.array([0.0001 * (20 - i) for i in range(20)])
    return relevance, np.arange(20) % 2


def test_spread_worked_example() -> None:
    relevance, _ = _spread_batch()
    doc = np.arange(20)
    # the 15 best: 0.0020 ... 0.0006; a third of the depth is the 5th best (0.0016)
    assert SPREAD_DEPTH == 15
    assert relevance_spread(relevance, doc) == pytest.approx(0.0016 - 0.0006)
    # fewer documents: the depth is all of them (7: the 3rd best minus the 7th)
    assert relevance_spread(relevance[:7], doc[:7]) == pytest.approx(0.0018 - 0.0014)
    # documents with no relevance do not compete: left out
    with_zeros = np.concatenate((relevance[:7], np.zeros(10)))
    assert relevance_spread(with_zeros, np.arange(17)) == pytest.approx(0.0018 - 0.0014)
    # copies count once, at their best copy
    assert relevance_spread(np.array([0.002, 0.002, 0.001]), np.array([0, 0, 1])) == pytest.approx(
        0.001
    )
    assert relevance_spread(np.array([0.02]), np.array([0])) == 0.0
    # never more than a quarter of one vote
    assert relevance_spread(np.array([1.0, 0.5, 0.1]), np.arange(3)) == MAX_SPREAD
    assert pytest.approx(0.25 * VOTE) == MAX_SPREAD


def test_stage2_worked_example() -> None:
    relevance, source = _spread_batch()
    spread = 0.0016 - 0.0006
    everyone = np.arange(20)
    level = np.array([BOOST_LEVELS["high"].bump, 0.0])  # source 0 at high
    bumps = stage2_bumps(relevance, source, everyone, everyone, level)
    # source 0's rows are its places 1, 2, 3, ...: the whole spread, then decaying
    places = np.arange(1, 11)
    assert bumps[::2] == pytest.approx(spread / (1 + (places - 1) / RANK_DECAY))
    assert bumps[1::2].tolist() == [0.0] * 10
    # source 0's rows at places 1-5 gain 0.0010, 0.00091, 0.00083, 0.00077, 0.00071:
    # its 5th row (0.0012) passes source 1's best (0.0019), its 6th (0.0010 + 0.00067)
    # not source 1's second (0.0017)
    score = relevance + bumps
    assert np.argsort(-score, kind="stable")[:7].tolist() == [0, 2, 4, 6, 8, 1, 3]
    # a demotion takes the whole spread from each of its rows, undecayed, so the
    # source's own order is kept: 0.0020 - 0.0010 stays above 0.0018 - 0.0010
    demoted = stage2_bumps(relevance, source, everyone, everyone, -level)
    assert demoted[::2] == pytest.approx([-spread] * 10)
    # a row with no relevance at all: nothing either way
    relevance[4] = 0.0
    for signed in (level, -level):
        assert stage2_bumps(relevance, source, everyone, everyone, signed)[4] == 0.0


def test_rank_decay() -> None:
    assert rank_decay(1.0) == 1.0
    assert rank_decay(1 + RANK_DECAY) == pytest.approx(0.5)


def test_unboosted_places_follow_the_final_sort() -> None:
    relevance = np.array([0.01, 0.03, 0.03, 0.02, 0.03])
    source = np.array([0, 1, 0, 0, 1])
    rank = np.array([1, 1, 2, 3, 2])
    doc = np.array([0, 1, 2, 3, 1])  # rows 1 and 4 are copies of one document
    places = unboosted_places(relevance, source, rank, doc, np.arange(5))
    # ties at 0.03: routing index, then source rank: row 2 (source 0) first, then the
    # document of rows 1 and 4 (source 1), then 0.02, then 0.01
    assert places.tolist() == [4, 2, 1, 3, 2]
    # a row outside the reference is placed as if inserted by its relevance
    places = unboosted_places(relevance, source, rank, doc, np.array([0, 1, 3]))
    assert places.tolist() == [3, 1, 1, 2, 1]


def test_stage1_key_worked_example() -> None:
    # high: rank 9 counts as rank 9 / 1.5 = 6, so its key is 1 / (60 + 6).
    assert stage1_key(9.0, BOOST_LEVELS["high"].multiplier) == pytest.approx(1 / 66)
    # ...which ties an unboosted rank-6 row, and beats rank 7.
    assert stage1_key(9.0, 1.5) == pytest.approx(stage1_key(6.0))
    assert stage1_key(9.0, 1.5) > stage1_key(7.0)
    # -high: rank 4 counts as rank 6
    assert stage1_key(4.0, BOOST_LEVELS["-high"].multiplier) == pytest.approx(1 / 66)


def test_stage1_is_rank_aware_not_source_first() -> None:
    """Unlike a score multiplier of 6 (Hindsight), a boosted deep row never beats
    another source's top rows: the boost is bounded in rank space."""
    high = BOOST_LEVELS["high"].multiplier
    assert stage1_key(40.0, high) < stage1_key(5.0)
    # A boosted list still interleaves with the others instead of coming first.
    boosted = [stage1_key(float(r), high) for r in range(1, 31)]
    plain = [stage1_key(float(r)) for r in range(1, 31)]
    merged = sorted([(k, "boosted") for k in boosted] + [(k, "plain") for k in plain], reverse=True)
    top_30 = [label for _, label in merged[:30]]
    assert 15 <= top_30.count("boosted") <= 21
    assert top_30.count("plain") >= 9


def test_stage1_rescues_most_of_a_high_source_at_half_the_candidates() -> None:
    """docs/configuration.md: three 30-row sources and a cap of 45 (half the union): at
    high the boosted source keeps most of its rows, each other source its head."""
    high = BOOST_LEVELS["high"].multiplier
    keys = sorted(
        [(stage1_key(float(r), high), 0, r) for r in range(1, 31)]
        + [(stage1_key(float(r)), j, r) for j in (1, 2) for r in range(1, 31)],
        key=lambda k: (-k[0], k[1], k[2]),
    )[:45]
    kept = {j: sorted(r for _, source, r in keys if source == j) for j in (0, 1, 2)}
    assert len(kept[0]) == 19  # of 30
    assert kept[1] == kept[2] == list(range(1, 14))  # each other source's best 13


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
    assert all(stage1_reach(level, 1) == 1 for level in BOOSTS)
    # a demoted row at rank r passes an unboosted rank r' only when r < r' / 1.5 (high)
    assert stage1_reach("-high", 5) == 3
    assert stage1_reach("-high", 1) == 0


@given(relevance=st.lists(st.floats(0, 0.1), min_size=1, max_size=40), row=st.integers(0, 39))
def test_both_stages_are_monotonic_in_level(relevance: list[float], row: int) -> None:
    row %= len(relevance)
    values = np.array(relevance)
    n = len(values)
    source = np.arange(n) % 2
    keys = [
        stage1_key(float(row + 1), weights_for(lvl).multiplier)
        for lvl in [*LEVELS[:3], None, *BOOSTS]
    ]
    bumps = [
        stage2_bumps(
            values, source, np.arange(n), np.arange(n), np.array([weights_for(lvl).bump, 0.0])
        )[row]
        for lvl in [*LEVELS[:3], None, *BOOSTS]
    ]
    assert keys == sorted(keys)
    assert bumps == sorted(bumps)


@given(
    relevance=st.lists(st.floats(0, 0.1), min_size=2, max_size=40), level=st.sampled_from(LEVELS)
)
def test_stage2_is_bounded_by_the_spread(relevance: list[float], level: str) -> None:
    """No bump exceeds the level's share of the batch's spread, itself at most a
    quarter of a vote."""
    values = np.array(relevance)
    n = len(values)
    share = BOOST_LEVELS[level].bump
    bumps = stage2_bumps(
        values, np.zeros(n, dtype=np.int64), np.arange(n), np.arange(n), np.array([share])
    )
    spread = relevance_spread(values, np.arange(n))
    assert spread <= MAX_SPREAD
    assert np.all(np.abs(bumps) <= abs(share) * spread + 1e-15)
    assert np.all(np.sign(bumps) * np.sign(share) >= 0)


# --- the strong-match guarantee (docs/configuration.md, "Boost levels") ---------------------

OPS_WORDS = [
    "disk",
    "full",
    "database",
    "replica",
    "lag",
    "checkout",
    "latency",
    "timeout",
    "payment",
    "card",
    "redis",
    "session",
    "kafka",
    "broker",
    "dns",
    "cert",
]


def _doc_key(ranked: RankedRow) -> object:
    """The document a ranked row stands for: its text (copies share it), else the row."""
    title = ranked.row.get("title", "")
    return title if isinstance(title, str) and title.strip() else id(ranked.row)


def _spread(plain: list[RankedRow]) -> float:
    """The batch's spread, from the unboosted ranking of every candidate (with a cap: of
    the rows it keeps without boosts, which that ranking returns, one row a document)."""
    return relevance_spread(np.array([r.relevance for r in plain]), np.arange(len(plain)))


def _share(levels: dict[str, str], source: str, sign: int) -> float:
    """The share of the spread ``source``'s level moves its rows by in direction ``sign``
    (+1: a boost lifts, -1: a demotion lowers); 0 otherwise."""
    return max(sign * weights_for(levels.get(source)).bump, 0.0)


def _sources(ranked: RankedRow) -> list[str]:
    """The sources that returned the row's document: its own and its copies'."""
    return [ranked.source_id, *(copy.source_id for copy in ranked.also_from)]


def _leads(a: RankedRow, b: RankedRow, spread: float, levels: dict[str, str]) -> bool:
    """The guarantee's condition: ``a``'s unboosted relevance leads ``b``'s by more than
    ``b``'s boost plus ``a``'s demotion, each its level's share of the spread. A document
    several sources returned is ranked by its best copy, so ``b``'s boost is the largest
    of its copies' sources' and ``a``'s demotion the smallest of its copies' sources'."""
    boost = max(_share(levels, sid, +1) for sid in _sources(b))
    demotion = min(_share(levels, sid, -1) for sid in _sources(a))
    return a.relevance - b.relevance > (boost + demotion) * spread + 1e-12


@given(
    sources=st.lists(
        st.lists(st.lists(st.sampled_from(OPS_WORDS), max_size=8), max_size=20),
        min_size=1,
        max_size=3,
    ),
    query=st.lists(st.sampled_from(OPS_WORDS), min_size=1, max_size=4),
    boosted=st.dictionaries(
        st.sampled_from(["s0", "s1", "s2"]), st.sampled_from(LEVELS), min_size=1
    ),
    cap=st.one_of(st.none(), st.integers(1, 20)),
    idf=st.booleans(),
    declared=st.lists(st.sampled_from([None, True, False]), min_size=3, max_size=3),
)
# Found by this property when the bump was a share of the whole relevance: the s1 row
# leads the boosted s2 row by 0.030 of a vote on content, with equal source votes; 2% of
# the s2 row's relevance (content included, 0.032) closed it, 2% of its votes (0.020) does not.
@example(
    sources=[
        [],
        [["disk", "disk", "disk", "full"]],
        [["disk", "full", "full"], ["disk", "disk", "full", "full", "full", "full", "database"]],
    ],
    query=["disk", "database"],
    boosted={"s2": "high"},
    cap=None,
    idf=False,
    declared=[None, None, None],
)
# Found when a boost's candidate cap could push rows out: s1's "disk" (rank 4, the only
# match) is among the 7 rows the cap keeps without boosts, and the boosts let 7 others in.
@example(
    sources=[[], [[], [], [], ["disk"]], [[], [], [], []]],
    query=["disk"],
    boosted={"s0": "low", "s1": "low", "s2": "medium"},
    cap=7,
    idf=False,
    declared=[None, None, None],
)
# Found exploring: "disk" is returned by s0 (at -high) and s2 (at low); unboosted its
# best copy is s0's, 0.00026 behind "disk disk". Boosted, s2's copy stands for it and
# its bump, 0.2 of the spread 0.0041 = 0.00082, passes that lead: a boost on any source
# that returned a document counts for it (the property once read s0's level only).
@example(
    sources=[[["disk"]], [["disk", "disk"]], [[], ["disk"]]],
    query=["disk"],
    boosted={"s0": "-high", "s2": "low"},
    cap=None,
    idf=False,
    declared=[None, None, True],
)
@settings(deadline=None, max_examples=200)  # two rankings an example, on a loaded machine
def test_a_boost_never_overturns_a_clear_content_lead(
    sources: list[list[list[str]]],
    query: list[str],
    boosted: dict[str, str],
    cap: int | None,
    idf: bool,
    declared: list[bool | None],
) -> None:
    results = [
        AdapterResult(f"s{j}", [{"title": " ".join(words)} for words in rows], ranked=declared[j])
        for j, rows in enumerate(sources)
    ]
    context = {"query": " ".join(query)}
    plain = RankingSynthesizer(idf=idf, max_candidates=cap).rank(results, context)
    boosted_rows = RankingSynthesizer(idf=idf, max_candidates=cap, source_boosts=boosted).rank(
        results, context
    )
    place = {_doc_key(r): i for i, r in enumerate(boosted_rows)}
    spread = _spread(plain)
    for a in plain:
        for b in plain:
            if _leads(a, b, spread, boosted) and _doc_key(b) in place:
                assert _doc_key(a) in place, (a, b)
                assert place[_doc_key(a)] < place[_doc_key(b)], (a, b)


def test_an_exact_match_stays_ahead_of_a_boosted_source_sharing_one_word() -> None:
    # One source returns a single row whose text is the query; another returns 40 rows
    # of 8 words drawn from a small ops vocabulary, a few sharing one word with it.
    # Content ranks alone made them ~1% apart, and graph:high put three graph rows
    # above the exact match; by normalised similarity it leads by most of a vote, more
    # than twice the batch's spread (so not even graph:high with sql:-high closes it).
    query = "disk latency spike on the storage node"
    vocabulary = [
        "cpu",
        "memory",
        "pager",
        "deploy",
        "rollback",
        "queue",
        "worker",
        "cache",
        "timeout",
        "restart",
        "alert",
        "ticket",
        "network",
        "dns",
        "config",
        "quota",
        "latency",
        "ingest",
    ]
    rng = random.Random(7)
    graph = [
        {"id": f"g{i}", "text": " ".join(rng.choice(vocabulary) for _ in range(8))}
        for i in range(40)
    ]
    assert sum("latency" in row["text"].split() for row in graph) >= 3
    results = [
        AdapterResult("sql", [{"id": "exact", "text": query}]),
        AdapterResult("graph", graph),
    ]
    for cap, lexical in itertools.product((None, 20), ("bm25", "cosine")):
        for boosts in (
            None,
            {"graph": "high"},
            {"sql": "-high"},
            {"graph": "high", "sql": "-high"},
        ):
            ranked = RankingSynthesizer(
                top_k=10,
                embedder=HashingEmbedder(),
                max_candidates=cap,
                source_boosts=boosts,
                lexical=lexical,
            ).rank(results, {"query": query})
            assert ranked[0].row["id"] == "exact", (cap, lexical, boosts)
            plain = RankingSynthesizer(max_candidates=cap, lexical=lexical).rank(
                results, {"query": query}
            )
            levels = boosts or {}
            assert all(_leads(plain[0], other, _spread(plain), levels) for other in plain[1:]), (
                cap,
                lexical,
                boosts,
            )
    for cap in (None, 20):
        # the boost is not inert: graph's matching rows gain, in their own order. Under
        # the cosine: BM25 gives these rows of one length that share one query word
        # exactly one score, and with the cap's 19 of them the batch has no spread for a
        # bump to be a share of (docs/tuning-lexical.md, "What the tests had to learn").
        boosted = RankingSynthesizer(
            top_k=10, max_candidates=cap, source_boosts={"graph": "high"}, lexical="cosine"
        ).rank(results, {"query": query})
        assert any(r.boost_bump > 0 for r in boosted[1:]), cap
        assert [r.unboosted_rank for r in boosted] == [r.rank for r in boosted], cap
