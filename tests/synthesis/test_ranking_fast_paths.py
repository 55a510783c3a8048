"""The fast paths give the same ranking as the plain ones: the sparse query vector,
vectors handed over as one matrix, the batch tokenizer's word lookup."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from nautilus_ranking import AdapterResult, HashingEmbedder, NoopEmbedder, RankingSynthesizer
from nautilus_ranking.embedders import SparseVector, TokenEmbedder, is_token_embedder
from nautilus_ranking.text.tokens import TokenBatch, tokenize

TEXTS = [
    "Disk full on the orders database",
    "orders replication lag after failover",
    "login page slow",
    "disk disk full again",
    "the and of",
    "",
]


def rows_of(texts: list[str]) -> list[dict[str, Any]]:
    return [{"id": f"r{i}", "text": t} for i, t in enumerate(texts)]


def triples(ranked: list[Any]) -> list[tuple[str, int, float]]:
    return [(r.source_id, r.source_rank, r.score) for r in ranked]


@pytest.mark.parametrize("idf", [False, True])
def test_sparse_query_ranks_as_the_dense_query(idf: bool) -> None:
    """A query embedded by the ranker (sparse) ranks as the same vector passed dense
    (under the cosine scorer: BM25 scores the query's words, not a vector)."""
    results = [AdapterResult("a", rows_of(TEXTS[:3])), AdapterResult("b", rows_of(TEXTS[3:]))]
    ranker = RankingSynthesizer(idf=False, lexical="cosine")
    sparse = ranker.rank(results, {"query": "disk full orders"})
    dense_query = HashingEmbedder().embed("disk full orders")
    dense = RankingSynthesizer(idf=False).rank(results, {"embedding": dense_query})
    assert [t[:2] for t in triples(sparse)] == [t[:2] for t in triples(dense)]
    np.testing.assert_allclose(
        [t[2] for t in triples(sparse)], [t[2] for t in triples(dense)], atol=1e-12
    )
    assert RankingSynthesizer(idf=idf).rank(results, {"query": "disk full orders"})[0].score > 0


def test_sparse_vector_matches_its_dense_form() -> None:
    embedder = HashingEmbedder()
    tokens = tokenize("disk full on the orders database disk")
    sparse = embedder.embed_query(tokens, {"disk": 0.5})
    assert isinstance(sparse, SparseVector) and sparse.shape == (embedder.dim,)
    np.testing.assert_array_equal(sparse.dense(), embedder.embed_weighted(tokens, {"disk": 0.5}))
    assert list(sparse.columns) == sorted(set(sparse.columns.tolist()))
    rows = embedder.embed_tokens(TokenBatch.from_texts(TEXTS))
    np.testing.assert_allclose(rows.dot_sparse(sparse), rows.dot(sparse.dense()), atol=1e-15)


def test_token_embedder_check_agrees_with_the_protocol() -> None:
    for embedder in (HashingEmbedder(), NoopEmbedder(), object()):
        assert is_token_embedder(embedder) == isinstance(embedder, TokenEmbedder)


def _matrix_results(
    matrix: np.ndarray, split_at: int
) -> tuple[list[AdapterResult], list[AdapterResult]]:
    rows = [{"id": f"v{i}"} for i in range(len(matrix))]
    as_matrix = [
        AdapterResult("a", rows[:split_at], embeddings=matrix[:split_at]),
        AdapterResult("b", rows[split_at:], embeddings=matrix[split_at:]),
    ]
    per_row = [
        AdapterResult(
            r.source_id,
            [{**row, "embedding": v.tolist()} for row, v in zip(r.rows, r.embeddings, strict=True)],
        )
        for r in as_matrix
    ]
    return as_matrix, per_row


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(1, 30),
    split=st.integers(0, 30),
    dtype=st.sampled_from(["f4", "f8"]),
    top_k=st.one_of(st.none(), st.integers(1, 10)),
    seed=st.integers(0, 2**16),
)
def test_matrix_ranks_as_the_same_vectors_row_by_row(
    n: int, split: int, dtype: str, top_k: int | None, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    matrix = rng.normal(size=(n, 8)).astype(dtype)
    matrix[rng.random(n) < 0.1] = 0.0  # zero vectors score 0 either way
    as_matrix, per_row = _matrix_results(matrix, min(split, n))
    context = {"embedding": rng.normal(size=8).tolist()}
    fast = RankingSynthesizer(top_k=top_k).rank(as_matrix, context)
    plain = RankingSynthesizer(top_k=top_k).rank(per_row, context)
    assert [t[:2] for t in triples(fast)] == [t[:2] for t in triples(plain)]
    np.testing.assert_allclose(
        [t[2] for t in triples(fast)], [t[2] for t in triples(plain)], atol=1e-12
    )
    assert all("embedding" not in r.row for r in fast)  # rows are never given keys


def test_matrix_rows_survive_the_candidate_cap_in_step() -> None:
    matrix = np.eye(6)
    as_matrix, per_row = _matrix_results(matrix, 3)
    context = {"embedding": [1.0, 0.5, 0.0, 0.0, 0.9, 0.0]}
    fast = RankingSynthesizer(max_candidates=4).rank(as_matrix, context)
    plain = RankingSynthesizer(max_candidates=4).rank(per_row, context)
    assert triples(fast) == triples(plain)


@pytest.mark.parametrize(
    ("embeddings", "reason"),
    [
        (np.zeros((3, 5)), "shape"),
        (np.zeros((2, 4)), "shape"),
        (np.array([["a"] * 4] * 3), "not numeric"),
        ([[1.0] * 4] * 3, "not a numpy array"),
    ],
)
def test_bad_matrix_falls_back_to_the_rows_own_vectors(embeddings: Any, reason: str) -> None:
    rows = [{"id": f"v{i}", "embedding": [float(i == j) for j in range(4)]} for i in range(3)]
    context = {"embedding": [0.0, 1.0, 0.0, 0.0]}
    with capture_logs() as logs:
        ranked = RankingSynthesizer().rank(
            [AdapterResult("a", rows, embeddings=embeddings)], context
        )
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert [e["event"] for e in warnings] == ["rank_embeddings_invalid"]
    assert reason in warnings[0]["reason"]
    assert ranked[0].row["id"] == "v1" and ranked[0].similarity == pytest.approx(1.0)


def test_non_finite_matrix_row_falls_back_to_its_text() -> None:
    matrix = np.array([[np.nan, 1.0], [0.0, 1.0]])
    rows = [{"id": "nan", "text": "disk"}, {"id": "ok"}]
    with capture_logs() as logs:
        ranked = RankingSynthesizer().rank(
            [AdapterResult("a", rows, embeddings=matrix)], {"embedding": [0.0, 1.0]}
        )
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == [
        "rank_row_vector_invalid",
        "rank_row_vector_missing",
    ]
    assert [r.row["id"] for r in ranked] == ["ok", "nan"]


def test_matrix_of_another_model_is_not_compared_with_an_embedded_query() -> None:
    hashing = HashingEmbedder(dim=64)
    rows = [
        {"id": "other", "text": "login page", "embedding_model": "someone-else"},
        {"id": "disk", "text": "disk full"},
    ]
    matrix = np.ones((2, 64))
    ranked = RankingSynthesizer(embedder=hashing).rank(
        [AdapterResult("a", rows, embeddings=matrix)], {"query": "disk full"}
    )
    by_id = {r.row["id"]: r.similarity for r in ranked}
    query = np.array(hashing.embed("disk full"))
    # "other" was scored on its text, "disk" on its matrix row (all ones, norm 8)
    assert by_id["other"] == pytest.approx(float(np.array(hashing.embed("login page")) @ query))
    assert by_id["disk"] == pytest.approx(float(np.ones(64) @ query) / 8.0)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from("ab cD,\x02é_-1 \n"), max_size=30), max_size=12))
def test_batch_tokens_equal_tokenize_per_text(texts: list[str]) -> None:
    batch = TokenBatch.from_texts(texts)
    words = {i: w for w, i in batch.vocab.items()}
    for i, text in enumerate(texts):
        got = [words[t] for t in batch.terms[batch.rows == i].tolist()]
        assert got == tokenize(text.replace("\x02", " "))


def _cosines(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    rows = matrix.astype(np.float64)
    return np.array([float(r @ query) / float(np.sqrt(r @ r)) for r in rows])


@pytest.mark.parametrize("dtype", ["f4", "f8", "i4"])
def test_vectors_over_several_blocks_score_their_exact_cosines(dtype: str) -> None:
    """More rows than one conversion block (and a last, partial block), as a matrix and
    as per-row arrays of mixed dtypes: each row's similarity is its float64 cosine."""
    rng = np.random.default_rng(5)
    matrix = (rng.normal(size=(700, 12)) * 10).astype(dtype)
    matrix[0] = matrix[1]  # equal vectors score exactly equal
    query = rng.normal(size=12)
    expected = _cosines(matrix, query / np.sqrt(query @ query))
    rows = [{"id": f"v{i}"} for i in range(len(matrix))]
    as_matrix = [AdapterResult("a", rows, embeddings=matrix)]
    exact = {"f4": ["f4", "f8"], "f8": ["f8"], "i4": ["i4", "i8", "f8"]}[dtype]  # same values
    per_row = [
        AdapterResult(
            "a",
            [
                {**row, "embedding": vector.astype(exact[i % len(exact)])}
                for i, (row, vector) in enumerate(zip(rows, matrix, strict=True))
            ],
        )
    ]
    for results in (as_matrix, per_row):
        ranked = RankingSynthesizer().rank(results, {"embedding": query})
        got = {r.row["id"]: r.similarity for r in ranked}
        np.testing.assert_allclose(
            [got[f"v{i}"] for i in range(len(matrix))], expected, rtol=0, atol=1e-12
        )
        assert got["v0"] == got["v1"]


def test_non_finite_vector_in_a_later_block_falls_back_alone() -> None:
    matrix = np.ones((600, 4))
    matrix[450, 2] = np.inf
    rows = [{"id": f"v{i}"} for i in range(600)]
    with capture_logs() as logs:
        ranked = RankingSynthesizer().rank(
            [
                AdapterResult(
                    "a", [{**r, "embedding": v} for r, v in zip(rows, matrix, strict=True)]
                )
            ],
            {"embedding": [1.0, 0.0, 0.0, 0.0]},
        )
    assert [e["count"] for e in logs if e["event"] == "rank_row_vector_invalid"] == [1]
    assert {r.row["id"] for r in ranked if r.similarity == 0.0} == {"v450"}


@pytest.mark.parametrize("flat", [0, 1])
def test_column_shaped_vector_is_never_a_rows_vector(flat: int) -> None:
    """A (dim, 1) array is not a flat vector, whatever the batch's other vectors are
    (040d521's one-copy stack took it whenever every numpy vector was that shape).
    Found by a random differential run against 040d521."""
    rng = np.random.default_rng(7)
    vectors = [rng.normal(size=(4, 1)) for _ in range(3)]
    vectors += [rng.normal(size=4) for _ in range(flat)]
    rows = [{"id": f"v{i}", "text": "disk", "embedding": v} for i, v in enumerate(vectors)]
    with capture_logs() as logs:
        ranked = RankingSynthesizer().rank(
            [AdapterResult("a", rows)], {"embedding": [1.0, 0.0, 0.0, 0.0]}
        )
    assert [e["count"] for e in logs if e["event"] == "rank_row_vector_invalid"] == [3]
    assert {r.row["id"] for r in ranked if r.similarity == 0.0} == {"v0", "v1", "v2"}


def test_sparse_query_against_a_matrix_of_several_blocks() -> None:
    hashing = HashingEmbedder(dim=64)
    rng = np.random.default_rng(6)
    matrix = rng.normal(size=(600, 64)).astype(np.float32)
    rows = [{"id": f"v{i}"} for i in range(600)]
    ranked = RankingSynthesizer(embedder=hashing).rank(
        [AdapterResult("a", rows, embeddings=matrix)], {"query": "disk full"}
    )
    query = np.array(hashing.embed("disk full"))
    got = {r.row["id"]: r.similarity for r in ranked}
    np.testing.assert_allclose(
        [got[f"v{i}"] for i in range(600)],
        _cosines(matrix, query / np.sqrt(query @ query)),
        atol=1e-12,
    )


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 40), top_k=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_top_k_of_distinct_rows_is_the_head_of_the_full_order(
    n: int, top_k: int, seed: int
) -> None:
    """The top K taken from a partition (no copies) is the full ranking's head, ties at
    the cut included (few distinct vectors: many equal scores)."""
    rng = np.random.default_rng(seed)
    choices = rng.normal(size=(3, 4))
    rows = [{"id": f"v{i}", "embedding": choices[rng.integers(0, 3)]} for i in range(n)]
    results = [AdapterResult(s, rows[i::3]) for i, s in enumerate("abc")]
    context = {"embedding": rng.normal(size=4)}
    full = RankingSynthesizer().rank(results, context)
    head = RankingSynthesizer(top_k=top_k).rank(results, context)
    assert triples(head) == triples(full)[:top_k]
    assert [r.rank for r in head] == list(range(1, len(head) + 1))
