"""The lexical scorer: BM25 over the batch's rows, IDF shrunk toward the word prior."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from nautilus_ranking import AdapterResult, RankingSynthesizer
from nautilus_ranking.synthesis.lexical import K1, PRIOR_DOCUMENTS, B, bm25_scores
from nautilus_ranking.text.tokens import TokenBatch, tokenize
from nautilus_ranking.text.word_prior import UNKNOWN_SHARE, prior_shares, table
from tools.reference import bm25_reference


def _scores(texts: list[str], query: str, idf: bool = True) -> np.ndarray:
    batch = TokenBatch.from_texts(texts)
    return bm25_scores(batch, tokenize(query), np.arange(len(texts)), idf)


def test_a_worked_example() -> None:
    # Three rows of made-up words (no prior entry: each takes UNKNOWN_SHARE = p).
    # "zorbex" is in 2 of the 3 rows, "quillon" in 1; lengths 2, 1 and 3, avgdl = 2.
    texts = ["zorbex quillon", "zorbex", "plim plam plum"]
    p = UNKNOWN_SHARE
    m = PRIOR_DOCUMENTS

    def idf(df: int) -> float:
        return math.log(1 + (3 + m - (df + m * p) + 0.5) / (df + m * p + 0.5))

    def saturation(tf: int, length: int) -> float:
        return tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / 2))

    expected = [
        idf(2) * saturation(1, 2) + idf(1) * saturation(1, 2),
        idf(2) * saturation(1, 1),
        0.0,
    ]
    np.testing.assert_allclose(_scores(texts, "zorbex quillon"), expected, rtol=1e-12)


def test_a_repeated_query_word_weighs_one_plus_its_log_count() -> None:
    texts = ["zorbex quillon", "zorbex"]
    once = _scores(texts, "zorbex")
    twice = _scores(texts, "zorbex zorbex")
    np.testing.assert_allclose(twice, once * (1 + math.log(2)), rtol=1e-12)


def test_without_idf_the_batch_counts_are_left_out() -> None:
    # the prior alone: a word's weight is the same whether 1 or 3 rows hold it
    few = _scores(["zorbex", "plim", "plam"], "zorbex", idf=False)
    many = _scores(["zorbex", "zorbex", "zorbex"], "zorbex", idf=False)
    assert few[0] == pytest.approx(many[0])
    p = UNKNOWN_SHARE * PRIOR_DOCUMENTS
    assert few[0] == pytest.approx(math.log(1 + (PRIOR_DOCUMENTS - p + 0.5) / (p + 0.5)))


def test_the_prior_knows_common_words_from_rare_ones() -> None:
    common, rare = prior_shares([tokenize("people")[0], tokenize("aeroelastic")[0]])
    assert len(table()) > 10_000
    assert common > 100 * rare > 0
    # a common word counts for less than a rare one in the same batch position
    scores = _scores(["people aeroelastic", "people", "aeroelastic"], "people aeroelastic")
    assert scores[2] > scores[1]


WORDS = st.sampled_from(["disk", "full", "orders", "database", "lag", "zorbex", "the", "é"])


@given(
    texts=st.lists(st.lists(WORDS, max_size=8).map(" ".join), max_size=8),
    query=st.lists(WORDS, max_size=5).map(" ".join),
    idf=st.booleans(),
)
@example(texts=[], query="disk", idf=True)
@example(texts=["", ""], query="", idf=False)
def test_matches_the_plain_python_reference(texts: list[str], query: str, idf: bool) -> None:
    scores = _scores(texts, query, idf)
    tokens = [tokenize(t) for t in texts]
    expected = [bm25_reference(t, tokenize(query), tokens, idf) for t in tokens]
    np.testing.assert_allclose(scores, expected, rtol=1e-10, atol=1e-12)
    assert np.isfinite(scores).all() and (scores >= 0).all()


def test_statistics_come_from_the_given_rows_only() -> None:
    texts = ["disk full", "disk", "disk lag", "orders"]
    batch = TokenBatch.from_texts(texts)
    some = bm25_scores(batch, ["disk"], np.array([0, 3]), True)
    tokens = [tokenize(t) for t in texts]
    expected = [bm25_reference(t, ["disk"], [tokens[0], tokens[3]], True) for t in tokens]
    np.testing.assert_allclose(some, expected, rtol=1e-12)


def test_the_default_scorer_and_the_opt_in_one() -> None:
    rows = [{"id": "a", "text": "disk full on orders-db"}, {"id": "b", "text": "kafka lag"}]
    results = [AdapterResult("s", rows)]
    for lexical in ("bm25", "cosine"):
        ranked = RankingSynthesizer(idf=True, lexical=lexical).rank(results, {"query": "disk"})
        assert ranked[0].row["id"] == "a"
    assert RankingSynthesizer().lexical == "bm25"  # the default; cosine stays selectable
    with pytest.raises(ValueError, match="lexical scorer"):
        RankingSynthesizer(lexical="tfidf")


def test_same_input_same_scores_across_calls() -> None:
    rows = [{"text": f"disk {'full ' * i}orders"} for i in range(6)]
    ranker = RankingSynthesizer(idf=True, lexical="bm25")
    first = [r.score for r in ranker.rank([AdapterResult("s", rows)], {"query": "disk full"})]
    ranker.rank([AdapterResult("s", rows[:2])], {"query": "orders"})  # nothing carried over
    again = [r.score for r in ranker.rank([AdapterResult("s", rows)], {"query": "disk full"})]
    assert first == again
