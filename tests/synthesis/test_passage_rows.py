"""What a long row's passages are whatever the query is kept per row: a new query on a
long row seen before splits, tokenises and looks up nothing of it a passage at a time,
scores as if it did, to the byte, and the records kept stay within their bound."""

from __future__ import annotations

import numpy as np
import pytest

from nautilus_ranking import AdapterResult, RankingSynthesizer
from nautilus_ranking.embedders.onnx import OnnxEmbedder
from nautilus_ranking.synthesis import passage_rows, passages
from nautilus_ranking.synthesis.passages import long_rows, passage_lexical
from nautilus_ranking.synthesis.similarity import lexical_similarities
from nautilus_ranking.text import passage_windows
from nautilus_ranking.text.passage_windows import PASSAGE_WORDS, past_window
from nautilus_ranking.text.tokens import (
    IDF_FLOOR,
    TokenBatch,
    idf_factors,
    query_token_weights,
    tokenize,
)

ANSWER = "To restart the payments service drain the queue then run the failover script."
QUERY = "restart payments service failover"


def filler(n: int, seed: str) -> str:
    """``n`` sentences about nothing the queries ask (``seed``: texts no other test ranks,
    so that none of their rows is kept already)."""
    return " ".join(
        f"The {seed} committee reviewed quarterly figures number {i} and staffing plans again."
        for i in range(n)
    )


def long_row(seed: str) -> dict[str, str]:
    return {"id": seed, "text": f"{filler(30, seed)} {ANSWER} {filler(30, seed + 'b')}"}


class Spy:
    """Records what the splitter and the tokeniser are given (they run as they do)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.split: list[str] = []
        self.tokenised: list[str] = []
        windows, from_texts = passage_rows.windows, TokenBatch.from_texts

        def split(text: str) -> list[tuple[int, int]]:
            self.split.append(text)
            return windows(text)

        def tokenise(cls: type[TokenBatch], texts: list[str]) -> TokenBatch:
            self.tokenised.extend(texts)
            return from_texts(texts)

        monkeypatch.setattr(passage_rows, "windows", split)
        monkeypatch.setattr(TokenBatch, "from_texts", classmethod(tokenise))


class WordModel:
    """A dense embedder keeping no vectors (a bag of hashed words)."""

    dim = 32
    model_id = "word-test"

    def embed(self, text: str) -> list[float]:
        vector = np.zeros(self.dim)
        for word in text.lower().split():
            vector[sum(map(ord, word)) % self.dim] += 1.0
        return vector.tolist()


def rank(rows: list[dict[str, str]], embedder: object, query: str = QUERY) -> list:
    ranker = RankingSynthesizer(idf=True, embedder=embedder)  # type: ignore[arg-type]
    return ranker.rank([AdapterResult("docs", rows)], {"query": query})


def test_a_new_query_on_seen_long_rows_splits_and_tokenises_no_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = [long_row(f"seen{i}") for i in range(3)]
    spy = Spy(monkeypatch)
    rank(rows, WordModel())
    assert len(spy.split) == 3 and len(spy.tokenised) > 3 * 2  # rows' windows, once
    spy.split.clear()
    spy.tokenised.clear()
    ranked = rank(rows, WordModel(), "quarterly staffing figures")
    assert spy.split == []
    texts = {f"{r['id']} {r['text']}" for r in rows}
    assert set(spy.tokenised) <= texts  # the rows whole (their own score), no window
    assert all(r.passage is not None for r in ranked)


def test_the_lexical_scores_are_those_of_the_windows_tokenised_each_time() -> None:
    rows = [long_row(f"lex{i}") for i in range(4)]
    texts = [f"{r['id']} {r['text']}" for r in rows]
    query = tokenize("failover committee quarterly restart")
    weights = query_token_weights(TokenBatch.from_texts(texts), query)
    at = long_rows(texts)
    for _ in range(2):  # the rows new, then kept
        scored = passage_lexical(texts, at, query, weights)
        windows = [texts[at[k]][a:b] for k, (a, b) in zip(scored.row_of, scored.spans, strict=True)]
        each_time = lexical_similarities(TokenBatch.from_texts(windows), query, weights)
        assert each_time is not None
        assert scored.lexical.tobytes() == each_time.tobytes()


class Model(OnnxEmbedder):
    """The sentence model, recording each text asked of it (a cache hit too)."""

    def __init__(self) -> None:
        super().__init__(cache_size=10_000)
        self.asked: list[str] = []

    def embed_batch(self, texts: list[str], deadline: float | None = None) -> np.ndarray:
        self.asked.extend(texts)
        return super().embed_batch(texts, deadline)


def test_a_seen_rows_passage_vectors_are_read_from_the_row_to_the_byte(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = [long_row(f"vec{i}") for i in range(2)]
    model = Model()
    rank(rows, model)  # the rows seen: their passages embedded and kept
    query = "quarterly staffing figures committee"
    model.asked.clear()
    kept = rank(rows, model, query)
    texts = {f"{r['id']} {r['text']}" for r in rows}
    assert set(model.asked) <= {query, *texts}  # no passage looked up one by one
    monkeypatch.setattr(passages, "kept_vectors", lambda embedder, *_: embedder)
    each = rank(rows, model, query)  # every passage from the model's cache, as before
    assert any(text not in texts and text != query for text in model.asked)
    assert [(r.row["id"], r.score, r.similarity, r.passage) for r in kept] == [
        (r.row["id"], r.score, r.similarity, r.passage) for r in each
    ]


def test_the_rows_kept_stay_within_their_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [long_row(f"bound{i}") for i in range(6)]
    one = passage_rows.row_passages([f"{rows[0]['id']} {rows[0]['text']}"])[0].nbytes
    monkeypatch.setattr(passage_rows, "KEPT_BYTES", 3 * one)
    spy = Spy(monkeypatch)
    for row in rows[1:]:  # each new: kept, the least recently used out past the bound
        rank([row], WordModel())
        assert passage_rows.kept_rows()[1] <= 3 * one
    spy.split.clear()
    rank([rows[-1]], WordModel())  # the last seen: kept
    assert spy.split == []
    rank([rows[1]], WordModel())  # seen before the last three: out, split again
    assert len(spy.split) == 1


def test_a_long_ascii_row_is_counted_by_a_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    counted: list[int] = []
    count = passage_windows.ascii_words

    def spy(text: bytes, words: int) -> int:
        counted.append(len(text))
        return count(text, words)

    monkeypatch.setattr(passage_windows, "ascii_words", spy)
    text = filler(2_000, "prefix")
    assert past_window(text, PASSAGE_WORDS)
    assert max(counted) <= 8 * PASSAGE_WORDS < len(text)


def test_texts_that_differ_by_a_lone_surrogate_are_kept_apart() -> None:
    text = filler(40, "surrogate")
    first, second = passage_rows.row_passages([text + " \ud800", text + " ?"])
    assert first is not second


def test_a_windows_idf_factor_is_that_of_the_window_tokenised() -> None:
    rows = [long_row(f"factor{i}") for i in range(4)]
    texts = [f"{r['id']} {r['text']}" for r in rows]
    query = tokenize("failover committee quarterly restart payments")
    weights = query_token_weights(TokenBatch.from_texts(texts), query)
    at = long_rows(texts)
    for _ in range(2):  # the rows new, then kept
        scored = passage_lexical(texts, at, query, weights)
        spans = zip(scored.row_of, scored.spans, strict=True)
        windows = TokenBatch.from_texts([texts[at[k]][a:b] for k, (a, b) in spans])
        factors = passage_rows.passage_factors(scored.kept, weights, IDF_FLOOR)
        assert factors.tobytes() == idf_factors(windows, weights, IDF_FLOOR).tobytes()
        assert len(set(factors.tolist())) > 1  # windows with and without the words
