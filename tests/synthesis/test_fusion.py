"""fusion.py: the fusion math by hand, and the sources' own word on their order."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import numpy as np
import pytest
from fakes import DOCS, write_jsonl
from hypothesis import given, settings
from hypothesis import strategies as st

from nautilus_ranking import AdapterResult, Broker, RankingSynthesizer
from nautilus_ranking.sources.sqlite.fts import SqliteFtsSource
from nautilus_ranking.sources.sqlite.table import SqliteTableSource
from nautilus_ranking.sources.sqlite.vector import SqliteVectorSource
from nautilus_ranking.synthesis import copies, detection, fusion

K = 60


def test_average_ranks_share_ties() -> None:
    np.testing.assert_allclose(
        detection.average_ranks(np.array([0.5, 0.1, 0.5, 0.9])), [2.5, 1.0, 2.5, 4.0]
    )


@settings(max_examples=60, deadline=None)
@given(
    sims=st.lists(st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.9, -0.3]), min_size=3, max_size=30),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_source_in_its_own_order_is_judged_as_in_any_order(sims: list[float], seed: int) -> None:
    # Rows handed over in source order take a shortcut (their order ranks are known);
    # the same rows shuffled take the general path: the same detected agreement.
    n = len(sims)
    ranks = np.arange(1, n + 1, dtype=np.int64) * 2  # gaps: rows left out by a cap
    similarity = np.array(sims)
    in_order = detection.source_weights(np.zeros(n, dtype=np.int64), ranks, similarity, [None])
    shuffle = np.random.default_rng(seed).permutation(n)
    shuffled = detection.source_weights(
        np.zeros(n, dtype=np.int64), ranks[shuffle], similarity[shuffle], [None]
    )
    assert in_order[1][0] == pytest.approx(shuffled[1][0], abs=1e-12)
    assert in_order[1][0] == pytest.approx(
        detection.spearman(-ranks.astype(float), similarity), abs=1e-12
    )


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(0, 3), st.sampled_from([0.0, 0.1, 0.25, 0.5, -0.3]), st.integers(1, 6)
        ),
        max_size=40,
    ),
    declared=st.lists(st.sampled_from([None, None, True, False]), min_size=4, max_size=4),
    in_order=st.booleans(),
)
def test_each_source_is_judged_on_its_own_rows_wherever_they_sit(
    rows: list[tuple[int, float, int]], declared: list[bool | None], in_order: bool
) -> None:
    """Rows given source by source (the flattened order: slices) or interleaved (masks):
    exactly the rho spearman gives on each source's rows alone. ``in_order``: each
    source's rows come in its own order, with gaps (as a cap leaves them)."""
    index = np.array([r[0] for r in rows], dtype=np.int64)
    similarity = np.array([r[1] for r in rows])
    rank = np.array([r[2] for r in rows], dtype=np.int64)
    if in_order:
        for j in range(4):
            mine = np.flatnonzero(index == j)
            rank[mine] = 3 * np.arange(1, len(mine) + 1)
    by_source = np.argsort(index, kind="stable")
    for order in (np.arange(len(rows)), by_source):
        weights, rho = detection.source_weights(
            index[order], rank[order], similarity[order], declared
        )
        for j, said in enumerate(declared):
            mine = index == j
            if said is not None:
                assert weights[j] == float(said) and math.isnan(rho[j])
            elif mine.sum() < detection.MIN_ROWS_TO_DETECT:
                assert weights[j] == 0.0 and rho[j] == 0.0
            else:
                assert rho[j] == detection.spearman(-rank[mine].astype(float), similarity[mine])


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(
        st.sampled_from([0.0, 0.1, 0.5, -0.3, 2.0]) | st.floats(-1, 1), min_size=1, max_size=300
    )
)
def test_average_ranks_have_the_mean_the_correlation_assumes(values: list[float]) -> None:
    """_rank_correlation centres ranks on (n + 1) / 2 instead of calling mean(): the same
    float, since the ranks are halves and their sum is exact."""
    ranks = detection.average_ranks(np.array(values))
    assert ranks.mean() == (len(values) + 1) / 2.0


def test_spearman_worked_example() -> None:
    # ranks of x: 1 2 3 4, of y: 1 3 2 4 -> 1 - 6 * (0 + 1 + 1 + 0) / (4 * (16 - 1)) = 0.8
    assert detection.spearman(
        np.array([1.0, 2, 3, 4]), np.array([10.0, 30, 20, 40])
    ) == pytest.approx(0.8)
    assert detection.spearman(np.array([1.0, 2, 3]), np.array([5.0, 5, 5])) == 0.0


def test_source_weights_declared_then_detected() -> None:
    # source 0 declared unranked, 1 declared ranked, 2 undetected with 2 rows,
    # 3 lists 5 rows best first (rho = 1: z = 1 * sqrt(4) = 2 -> weight 1),
    # 4 lists them worst first (rho = -1 -> weight 0)
    index = np.array([0, 0, 0, 1, 2, 2] + [3] * 5 + [4] * 5)
    rank = np.array([1, 2, 3, 1, 1, 2] + [1, 2, 3, 4, 5] * 2)
    sim = np.array([0.1, 0.2, 0.3, 0.0, 0.5, 0.4, 0.9, 0.8, 0.7, 0.6, 0.5, 0.1, 0.2, 0.3, 0.4, 0.5])
    weights, rho = detection.source_weights(index, rank, sim, [False, True, None, None, None])
    np.testing.assert_allclose(weights, [0.0, 1.0, 0.0, 1.0, 0.0])
    assert math.isnan(rho[0]) and rho[3] == pytest.approx(1.0) and rho[4] == pytest.approx(-1.0)


def test_a_weak_agreement_weighs_its_z_score() -> None:
    # rho = 0.3 over 5 rows: z = 0.3 * 2 = 0.6, below one standard deviation: weight 0;
    # rho = 0.8 over 5 rows: z = 1.6, 60% of the way from z = 1 to z = 2
    index = np.zeros(5, dtype=np.int64)
    rank = np.arange(1, 6)
    sim = np.array([0.3, 0.5, 0.1, 0.4, 0.2])  # rho(-rank, sim) = 1 - 6 * 14 / 120 = 0.3
    weights, rho = detection.source_weights(index, rank, sim, [None])
    assert rho[0] == pytest.approx(0.3) and weights[0] == 0.0
    sim = np.array([0.5, 0.3, 0.4, 0.1, 0.2])  # rho = 1 - 6 * 4 / 120 = 0.8
    weights, rho = detection.source_weights(index, rank, sim, [None])
    assert rho[0] == pytest.approx(0.8) and weights[0] == pytest.approx(0.6)


def test_agreement_with_another_source_counts_where_content_says_nothing() -> None:
    # Two sources over one corpus return documents 0-4 in the same order; content is
    # flat (the test against it says nothing), but each source's order agrees with the
    # other's votes for its documents (rho = 1 over 5 rows: z = 2): both ranked. A third
    # lists documents 0-4 in the reverse order: against the first two's votes, rho = -1.
    doc = np.array([0, 1, 2, 3, 4] * 2 + [4, 3, 2, 1, 0])
    index = np.repeat(np.arange(3), 5)
    rank = np.tile(np.arange(1, 6), 3)
    flat = np.full(15, 0.5)
    two = detection.source_weights(index[:10], rank[:10], flat[:10], [None, None], doc[:10])[0]
    np.testing.assert_allclose(two, [1.0, 1.0])
    three = detection.source_weights(index, rank, flat, [None, None, True], doc)[0]
    assert three[2] == 1.0 and three[0] == three[1] == 0.0  # the declared one's votes cancel
    reverse = detection.source_weights(index, rank, flat, [True, True, None], doc)[0]
    assert reverse[2] == 0.0
    # without the documents (no sharing known), nothing to go on
    np.testing.assert_allclose(detection.source_weights(index, rank, flat, [None] * 3)[0], 0.0)


def test_a_source_declared_unranked_gives_no_votes_to_the_agreement_test() -> None:
    # Source 1 lists source 0's documents in source 0's order: undeclared, each agrees
    # with the other (z = 2). Declared unranked, source 1's order is no evidence for 0's.
    doc = np.array([0, 1, 2, 3, 4] * 2)
    index = np.repeat(np.arange(2), 5)
    rank = np.tile(np.arange(1, 6), 2)
    flat = np.full(10, 0.5)
    counted = detection.source_weights(index, rank, flat, [None, None], doc)[0]
    left_out = detection.source_weights(index, rank, flat, [None, False], doc)[0]
    assert counted[0] == 1.0 and left_out[0] == 0.0


def test_the_words_recognise_a_keyword_index_that_content_does_not() -> None:
    # content (a model's vectors) disagrees with the index's order; its match with the
    # query's words agrees exactly: z = 1 * sqrt(4) = 2, full weight.
    index = np.zeros(5, dtype=np.int64)
    rank = np.arange(1, 6)
    semantic = np.array([0.1, 0.5, 0.2, 0.4, 0.3])
    words = np.array([1.0, 0.8, 0.6, 0.4, 0.2])
    assert detection.source_weights(index, rank, semantic, [None])[0][0] == 0.0
    assert detection.source_weights(index, rank, semantic, [None], lexical=words)[0][0] == 1.0
    # words that cannot tell the rows apart say nothing
    flat = np.full(5, 0.6)
    assert detection.source_weights(index, rank, semantic, [None], lexical=flat)[0][0] == 0.0


def test_rows_sorted_by_an_identifier_are_a_table_in_key_order() -> None:
    def rows(ids: list[object], **more: list[object]) -> list[dict[str, object]]:
        return [
            {"id": v, "text": f"words {i * 5 % 8}", **{k: vs[i] for k, vs in more.items()}}
            for i, v in enumerate(ids)
        ]

    assert detection.key_ordered(rows([2, 7, 8, 9, 12, 13, 14, 19]))
    assert detection.key_ordered(rows(["2", "7", "8", "9", "12", "13", "14", "19"]))  # as numbers
    assert detection.key_ordered(rows(["z", "y", "x", "w", "v", "u", "t", "s"]))  # descending too
    assert not detection.key_ordered(rows([2, 7, 8, 9, 12, 13, 14]))  # too few rows to tell
    assert not detection.key_ordered(rows([486, 51, 12, 184, 573, 878, 665, 746]))  # relevance
    assert not detection.key_ordered(rows([1, 2, 3, 4, 5, 6, 7, 8]))  # positions: a rank field
    assert not detection.key_ordered(rows([0, 1, 2, 3, 4, 5, 6, 7]))
    assert not detection.key_ordered(
        rows(
            [3, 1, 2, 8, 5, 4, 7, 6],  # a score is a float
            score=[0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2],
        )
    )
    assert not detection.key_ordered(rows([1, 3, 3, 4, 5, 6, 7, 8]))  # a tie: not a key
    assert not detection.key_ordered(rows([1, "3", 4, 5, 6, 7, 8, 9.5]))  # mixed kinds
    assert not detection.key_ordered([{"id": 1}] * 7 + [["not", "a", "row"]])
    assert not detection.key_ordered(rows([True, False] * 4))
    declared = detection.orders_from_fields(
        [None, None, True],
        rows(list(range(10, 18))) + rows([5, 3, 9, 1, 7, 2, 8, 4]) + rows(list(range(20, 28))),
        np.repeat(np.arange(3), 8),
    )
    assert declared == [False, None, True]  # a declared source keeps its word


def test_rows_in_the_order_of_a_score_they_carry_are_ranked() -> None:
    def rows(scores: list[object]) -> list[dict[str, object]]:
        ids = [486, 51, 12, 184, 573, 878, 665, 746, 93, 310]
        return [{"id": ids[i], "text": "words", "score": v} for i, v in enumerate(scores)]

    falling = [0.91, 0.88, 0.8, 0.8, 0.74, 0.6, 0.52, 0.5, 0.41, 0.3]
    assert detection.score_ordered(rows(falling))  # a cosine, ties allowed
    assert detection.score_ordered(rows([-12.5, -11.0, -9.25, -9.0, -8.5, -7.0, -6.5, -6.0]))
    assert not detection.score_ordered(rows(falling[:7]))  # too few rows to tell
    assert not detection.score_ordered(rows([0.9, 0.8, 0.85, 0.7, 0.6, 0.5, 0.4, 0.3]))
    assert not detection.score_ordered(rows([0.9] * 4 + [0.5] * 6))  # 2 values prove nothing
    assert not detection.score_ordered(rows([9, 8, 7, 6, 5, 4, 3, 2]))  # integers: a key
    assert not detection.score_ordered(rows([0.9, float("nan"), 0.7, 0.6, 0.5, 0.4, 0.3, 0.2]))
    # key order first: a table in id order whose rows carry a rising float is unranked
    table = [{"id": 3 * i + 10, "text": "words", "created": 1.0e9 + i} for i in range(8)]
    scored = rows(falling)
    said = detection.orders_from_fields(
        [None, None, False], table + scored + scored, np.repeat(np.arange(3), [8, 10, 10])
    )
    assert said == [False, True, False]  # and a declared source keeps its word
    # content that is not lexical (a model's) judges the order by its own tests
    assert detection.orders_from_fields(
        [None, None, False],
        table + scored + scored,
        np.repeat(np.arange(3), [8, 10, 10]),
        scores=False,
    ) == [False, None, False]


def test_a_semantic_index_without_shared_words_is_ranked_by_its_scores() -> None:
    # A vector index's rows share no word with the query: content cannot tell its order
    # from an unrelated one, its similarity field can.
    rows = [
        {"id": f"v{i * 7 % 10}", "text": f"paraphrase {i * 3 % 10}", "similarity": 0.9 - i / 50}
        for i in range(10)
    ]
    ranked = RankingSynthesizer().rank([AdapterResult("vector", rows)], {"query": "disk full"})
    assert {r.source_weight for r in ranked} == {1.0}


def test_an_undeclared_table_in_id_order_gets_no_vote() -> None:
    # 8 rows in id order; their content order happens to agree with it, which alone would
    # make the table look ranked: its key order says it is not.
    table = [{"id": i, "title": "disk full " * (9 - i)} for i in range(2, 10)]
    ranked = RankingSynthesizer().rank([AdapterResult("table", table)], {"query": "disk full"})
    assert {r.source_weight for r in ranked} == {0.0}


def test_source_evidence_counts_each_source_once_at_its_best_rank() -> None:
    doc = np.array([0, 1, 0, 0, 2])  # document 0 twice in source 0, once in 1
    index = np.array([0, 0, 0, 1, 1])
    rank = np.array([1, 2, 3, 4, 5])
    evidence, voters = fusion.source_evidence(doc, index, rank, np.array([1.0, 0.5]))
    d0 = 1 / (K + 1) + 0.5 / (K + 4)
    np.testing.assert_allclose(evidence, [d0, 1 / (K + 2), d0, d0, 0.5 / (K + 5)])
    assert voters.tolist() == [2, 1, 2, 2, 1]


def test_content_ranks_count_documents_and_insert_outsiders() -> None:
    sim = np.array([0.9, 0.9, 0.5, 0.7, 0.95])
    doc = np.array([0, 0, 1, 2, 3])
    reference = np.array([0, 1, 2, 3])  # row 4 is outside the reference
    ranks = fusion.content_ranks(sim, doc, reference)
    # documents in the reference by similarity: 0 (0.9), 2 (0.7), 1 (0.5)
    assert ranks.tolist() == [1, 1, 3, 2, 1]


def test_normalised_similarity_by_the_reference_documents_distribution() -> None:
    # reference documents' positive similarities 0.9 (two copies: once), 0.5, 0.7: mean 0.7,
    # sd 0.163; row 4 (0.95, outside the reference) is scaled by them and clipped at 1;
    # row 5 is not positive: 0
    sim = np.array([0.9, 0.9, 0.5, 0.7, 0.95, -0.2])
    doc = np.array([0, 0, 1, 2, 3, 4])
    reference = np.array([0, 1, 2, 3, 5])
    sd = math.sqrt(0.08 / 3)
    low = 0.7 - 3 * sd
    expected = [(0.9 - low) / (6 * sd)] * 2 + [
        (0.5 - low) / (6 * sd),
        0.5,
        (0.95 - low) / (6 * sd),
        0.0,
    ]
    got = fusion.normalised_similarity(sim, doc, reference)
    np.testing.assert_allclose(got, expected)
    np.testing.assert_allclose(fusion.content_vote(got, weight=0.5), 0.5 * got / (K + 1))
    # one positive document, or no spread: every positive row counts fully
    np.testing.assert_allclose(
        fusion.normalised_similarity(np.array([0.3, 0.0]), np.array([0, 1]), np.array([0, 1])),
        [1.0, 0.0],
    )


def test_unranked_votes_rank_within_the_source_and_copies_share_the_reference_vote() -> None:
    # Sources: 0 and 1 unranked (w 0), 2 half-ranked (w 0.5), 3 ranked (w 1).
    # Rows 3 and 8 are outside the reference (only a boost let them past the cap).
    sim = np.array([0.9, 0.5, 0.7, 0.5, 0.8, 0.6, 0.3, 0.3, 0.5])
    doc = np.array([0, 1, 2, 1, 3, 4, 5, 5, 0])
    index = np.array([0, 0, 0, 1, 1, 2, 0, 3, 1])
    reference = np.array([0, 1, 2, 4, 5, 6, 7])
    weights = np.array([0.0, 0.0, 0.5, 1.0])
    voters = np.array([0, 0, 0, 0, 0, 1, 1, 1, 0])  # doc 4 by source 2, doc 5 by source 3
    votes = fusion.unranked_votes(sim, doc, index, reference, weights, voters, weight=1.0)
    np.testing.assert_allclose(
        votes,
        [
            1 / (K + 1),  # source 0's reference by similarity: doc 0 (0.9), 2, 1, 5
            1 / (K + 3),  # doc 1: not lifted by row 3, outside the reference
            1 / (K + 2),
            1 / (K + 2),  # its own: inserted into source 1's reference (row 4, 0.8): rank 2
            1 / (K + 1),
            0.5 / (K + 1),  # half-ranked and alone: the other half of a vote
            0.0,  # doc 5: a ranked source (3) returned it, its vote stands
            0.0,
            1 / (K + 1),  # its own would be 1/62; its copy row 0 in the reference gives 1/61
        ],
    )
    # the content weight scales every vote; at 0 there are none
    np.testing.assert_allclose(
        fusion.unranked_votes(sim, doc, index, reference, weights, voters, weight=0.25),
        votes * 0.25,
    )
    assert not fusion.unranked_votes(sim, doc, index, reference, weights, voters, 0.0).any()


def test_document_numbers_by_text_or_by_key() -> None:
    rows = [
        {"id": "a", "title": "Disk  Full"},
        {"id": "a", "title": "disk full", "embedding": [1.0]},
        {"id": "b", "title": "disk full"},
        {"n": 3},
        {"n": 3},
    ]
    skip = frozenset({"embedding", "embedding_model"})
    by_text = copies.document_numbers_by_key(rows, None, skip).tolist()
    assert by_text[0] == by_text[1] and len(set(by_text)) == 4  # no text: never a copy
    by_key = copies.document_numbers_by_key(rows, "n", skip).tolist()
    assert by_key[3] == by_key[4] and len(set(by_key)) == 4


def test_copies_by_text_ignore_the_whitespace_around_values_and_the_case_of_names() -> None:
    skip = frozenset({"embedding", "embedding_model"})
    rows = [
        {"title": "Disk full", "body": "db"},
        {"title": " disk\tfull ", "body": "db\n"},
        {"Title": "disk full", "BODY": " DB"},
        {"title": "disk full", "body": "d b"},
    ]
    assert copies.canonical_text(rows[0], skip) == "body\0db\0title\0disk full"
    assert copies.canonical_text(rows[1], skip) == "body\0db\0title\0disk full"
    numbers = copies.document_numbers_by_key(rows, None, skip).tolist()
    assert numbers[0] == numbers[1] == numbers[2] != numbers[3]


def test_sources_declare_their_order_through_the_broker(tmp_path: Path) -> None:
    seed = write_jsonl(tmp_path / "docs.jsonl", DOCS)
    broker = Broker(
        [
            SqliteFtsSource("fts", tmp_path / "fts.db", seed, ["title", "body"]),
            SqliteTableSource("sql", tmp_path / "sql.db", seed, "docs", ["title", "body"]),
            SqliteVectorSource("vec", tmp_path / "vec.db", seed, ["title", "body"]),
        ]
    )
    results = asyncio.run(broker.fetch("disk full"))
    assert {r.source_id: r.ranked for r in results} == {"fts": True, "sql": False, "vec": True}
    ranked = RankingSynthesizer().rank(results, {"query": "disk full"})
    expected = {"fts": 1.0, "sql": 0.0, "vec": 1.0}
    assert all(r.source_weight == expected[r.source_id] for r in ranked)
    vec_rows = next(r.rows for r in results if r.source_id == "vec")
    assert [r["similarity"] for r in vec_rows] == sorted(
        (r["similarity"] for r in vec_rows), reverse=True
    )


def test_ranking_never_mutates_rows_nor_adds_keys() -> None:
    rows = [{"id": "x", "title": "disk full"}, {"id": "x", "title": "disk full"}]
    before = [dict(r) for r in rows]
    RankingSynthesizer(top_k=1).rank(
        [AdapterResult("a", rows[:1], ranked=True), AdapterResult("b", rows[1:])], {"query": "disk"}
    )
    assert rows == before


def _unranked_votes_by_source(
    similarity: np.ndarray,
    doc: np.ndarray,
    source_index: np.ndarray,
    reference: np.ndarray,
    weights: np.ndarray,
    voters: np.ndarray,
    weight: float,
) -> np.ndarray:
    """unranked_votes source by source, through content_ranks (the plain statement)."""
    votes = np.zeros(len(similarity))
    alone = (voters - (weights[source_index] > 0)) <= 0
    for j in np.flatnonzero(weights < 1).tolist():
        mine = source_index == j
        rows = mine & alone & (similarity > 0)
        ranks = fusion.content_ranks(similarity, doc, reference[mine[reference]])
        votes[rows] = weight * (1.0 - weights[j]) / (K + ranks[rows].astype(np.float64))
    best = np.zeros(int(doc.max()) + 1)
    np.maximum.at(best, doc[reference], votes[reference])
    return np.maximum(votes, best[doc])


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 40), data=st.data())
def test_unranked_votes_rank_every_source_in_one_pass(n: int, data: st.DataObject) -> None:
    similarity = np.array(
        data.draw(
            st.lists(st.sampled_from([-0.2, 0.0, 0.1, 0.3, 0.3, 0.8]), min_size=n, max_size=n)
        )
    )
    doc = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=n, max_size=n)))
    source_index = np.array(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)))
    weights = np.array(
        data.draw(st.lists(st.sampled_from([0.0, 0.4, 1.0]), min_size=4, max_size=4))
    )
    voters = np.array(data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)))
    reference = np.array(sorted(data.draw(st.sets(st.integers(0, n - 1)))), dtype=np.int64)
    weight = data.draw(st.sampled_from([0.0, 0.5, 1.0]))
    got = fusion.unranked_votes(similarity, doc, source_index, reference, weights, voters, weight)
    expected = _unranked_votes_by_source(
        similarity, doc, source_index, reference, weights, voters, weight
    )
    assert got.tolist() == expected.tolist()


def test_an_unranked_row_outside_the_reference_ranks_first_among_none() -> None:
    # The cap's reference holds only the ranked source's rows (0, 1); the table's row 2
    # got in by a boost. With no reference row of its source to compare with, it ranks
    # 1 in its source (found by the fuzzing of the one-pass ranking: no rows, no crash).
    similarity = np.array([0.9, 0.5, 0.4])
    votes = fusion.unranked_votes(
        similarity,
        np.array([0, 1, 2]),
        np.array([0, 0, 1]),
        np.array([0, 1]),
        np.array([1.0, 0.0]),
        np.array([1, 1, 0]),
        1.0,
    )
    assert votes.tolist() == [0.0, 0.0, 1 / (K + 1)]


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 40), data=st.data())
def test_ranks_without_copies_equal_the_paired_ranks(n: int, data: st.DataObject) -> None:
    """Every row its own document, every row in the reference: the one-sort ranks equal
    the general path's (which the same documents numbered in another order take)."""
    similarity = np.array(
        data.draw(
            st.lists(st.sampled_from([-0.2, -0.0, 0.0, 0.1, 0.3, 0.8]), min_size=n, max_size=n)
        )
    )
    source_index = np.array(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)))
    weights = np.array(
        data.draw(st.lists(st.sampled_from([0.0, 0.4, 1.0]), min_size=4, max_size=4))
    )
    voters = (weights[source_index] > 0).astype(np.int64)
    every = np.arange(n, dtype=np.int64)
    renumbered = every[::-1].copy()  # distinct documents, not in row order: general path
    assert fusion.every_row_its_document(every, every)
    assert not fusion.every_row_its_document(renumbered, every) or n == 1
    assert (
        fusion.content_ranks(similarity, every, every).tolist()
        == fusion.content_ranks(similarity, renumbered, every).tolist()
    )
    for weight in (0.5, 1.0):
        fast = fusion.unranked_votes(
            similarity, every, source_index, every, weights, voters, weight
        )
        plain = _unranked_votes_by_source(
            similarity, renumbered, source_index, every, weights, voters, weight
        )
        assert fast.tolist() == plain.tolist()


def test_descending_ranks_share_ties_within_each_group() -> None:
    similarity = np.array([0.5, 0.9, 0.5, 0.1, 0.9, 0.5])
    assert fusion.descending_ranks(similarity).tolist() == [3, 1, 3, 6, 1, 3]
    groups = np.array([0, 1, 1, 0, 0, 1])
    assert fusion.descending_ranks(similarity, groups).tolist() == [2, 1, 2, 3, 1, 2]


def test_rank_floor_lifts_a_ranked_row_content_rates_below_its_place() -> None:
    # Source 0 (lexical) rows at ŝ 0.9, 0.8, 0.7; source 1 (semantic) 0.1, 0.6, 0.2;
    # source 2 unranked. Pooled ranked ŝ, best first: 0.9 0.8 0.7 0.6 0.2 0.1.
    normalised = np.array([0.9, 0.8, 0.7, 0.1, 0.6, 0.2, 0.05])
    source = np.array([0, 0, 0, 1, 1, 1, 2])
    rank = np.array([1, 2, 3, 1, 2, 3, 1])
    weights = np.array([1.0, 1.0, 0.0])
    every = np.arange(7)
    lifted = fusion.rank_floor(normalised, source, rank, weights, every)
    # source 1's rank 1 is at place 0/3 → pooled[0] = 0.9: halfway from 0.1 is 0.5; its
    # rank 2 (0.6) is implied 0.7 (place 1/3 → pooled[2]): 0.65; its rank 3 (0.2) is
    # implied 0.2 (place 2/3 → pooled[4]): kept
    assert np.allclose(lifted, [0.9, 0.8, 0.7, 0.5, 0.65, 0.2, 0.05])
    assert (lifted >= normalised).all()  # never lowered; the unranked row untouched
    half = fusion.rank_floor(normalised, source, rank, np.array([1.0, 0.5, 0.0]), every)
    assert np.isclose(half[3], 0.1 + 0.25 * 0.8)  # a half-weight source, a quarter of the way
    # the reference alone sets the places: a row outside it (a boost let it in) is placed
    # among the reference rows of its source and changes nobody else's lift
    ref = np.array([0, 1, 2, 3, 4, 6])
    extra = fusion.rank_floor(normalised, source, rank, weights, ref)
    assert np.allclose(
        extra[:5], fusion.rank_floor(normalised[:5], source[:5], rank[:5], weights, np.arange(5))
    )


def test_a_semantic_index_paraphrase_is_not_buried_by_lexical_content() -> None:
    # Disjoint shards: a keyword index's rows share the query's words, a vector index's
    # best rows are paraphrases sharing none. Lexical content alone put the vector
    # index's rank 1 below the keyword index's rank 10 ("full moon"); its rank now lifts
    # it above the weak word matches, and an exact match still leads.
    keyword = [
        {"id": f"k{i}", "text": t}
        for i, t in enumerate(
            [
                "disk full on the database host",
                "database disk full alarms",
                "disk full errors",
                "full disk warnings for database backups",
                "database host disk usage",
                "disk quotas",
                "full table scans in the database",
                "database indexes",
                "disk caches",
                "full moon",
            ]
        )
    ]
    semantic = [
        {"id": f"v{i}", "text": t}
        for i, t in enumerate(
            [
                "the db server has no storage space left",
                "storage volume exhausted on the sql machine",
                "out of space on the data node",
                "capacity planning for servers",
                "server memory",
                "backup schedules",
                "replication lag",
                "network partitions",
                "cpu throttling",
                "logs",
            ]
        )
    ]
    results = [
        AdapterResult("fts", keyword, ranked=True),
        AdapterResult("vector", semantic, ranked=True),
    ]
    ranked = RankingSynthesizer().rank(results, {"query": "disk full on the database host"})
    place = {r.row["id"]: r.rank for r in ranked}
    assert place["k0"] == 1
    assert place["v0"] < min(place[k] for k in ("k5", "k6", "k7", "k8", "k9"))
    assert ranked[place["v0"] - 1].content > 0  # lifted, though it shares no word
