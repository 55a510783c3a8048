"""A row past the model's window is scored by its best passage: an answer late in a long
row counts, on the scale of a short row's score; rows within the window score as before;
the model embeds the passages of the rows it embeds only, within the deadline."""

from __future__ import annotations

import hashlib
import itertools
import re

import numpy as np
import pytest

from nautilus_ranking import AdapterResult, RankingSynthesizer
from nautilus_ranking.embedders.onnx import OnnxEmbedder
from nautilus_ranking.synthesis.passages import PASSAGES_A_ROW, WINDOWS_A_ROW
from nautilus_ranking.text.passage_windows import (
    OVERLAP_UNITS,
    PASSAGE_WORDS,
    WINDOW_UNITS,
    WINDOW_WORDS,
    ascii_words,
    past_window,
    windows,
)
from nautilus_ranking.text.tokens import TokenBatch, idf_factors, query_token_weights, tokenize

UNIT = re.compile(r"\w+|[^\w\s]")


class WindowModel:
    """A dense embedder that, like a sentence model, reads a text's first 128 words
    only (a bag of hashed words), and records each text it embeds."""

    dim = 64
    model_id = "window-test"

    def __init__(self) -> None:
        self.embedded: list[str] = []

    def embed(self, text: str) -> list[float]:
        self.embedded.append(text)
        vector = np.zeros(self.dim)
        for word in re.findall(r"\w+", text.lower())[:128]:
            vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % self.dim] += 1.0
        return vector.tolist()


def filler(n: int, seed: str = "f") -> str:
    """``n`` sentences about nothing the queries ask, eleven words each."""
    return " ".join(
        f"The {seed} committee reviewed quarterly figures number {i} and staffing plans again."
        for i in range(n)
    )


ANSWER = "To restart the payments service drain the queue then run the failover script."
QUERY = "restart payments service failover"


def test_past_window_counts_words() -> None:
    assert not past_window(" ".join(["word"] * WINDOW_WORDS))
    assert past_window(" ".join(["word"] * (WINDOW_WORDS + 1)))
    assert not past_window(" ".join(["word"] * PASSAGE_WORDS), PASSAGE_WORDS)


def test_windows_cover_the_text_on_sentence_bounds_and_overlap() -> None:
    text = filler(60) + "\n\n" + ANSWER + " " + filler(30, "g")
    spans = windows(text)
    assert len(spans) > 5
    for start, end in spans:
        assert len(UNIT.findall(text[start:end])) <= WINDOW_UNITS
        assert start == 0 or text[start - 1].isspace()  # a window starts a sentence
        assert text[end - 1] == "."  # and ends one
    covered = np.zeros(len(text), dtype=bool)
    for start, end in spans:
        covered[start:end] = True
    assert all(covered[i] or text[i].isspace() for i in range(len(text)))
    assert all(b[0] < a[1] for a, b in itertools.pairwise(spans))  # overlap
    overlap = [len(UNIT.findall(text[b[0] : a[1]])) for a, b in itertools.pairwise(spans)]
    assert max(overlap) <= OVERLAP_UNITS


def test_a_sentence_longer_than_a_window_is_cut_between_words() -> None:
    text = " ".join(f"w{i}" for i in range(500))
    spans = windows(text)
    assert all(len(UNIT.findall(text[a:b])) <= WINDOW_UNITS for a, b in spans)
    assert text[spans[-1][0] : spans[-1][1]].endswith("w499")


def rank(rows: list[dict[str, str]], model: WindowModel, **options: object) -> list:
    ranker = RankingSynthesizer(idf=True, embedder=model, **options)  # type: ignore[arg-type]
    return ranker.rank([AdapterResult("docs", rows)], {"query": QUERY})


@pytest.mark.parametrize("where", ["middle", "last"])
def test_a_late_answer_in_a_long_row_counts(where: str) -> None:
    long_text = (
        filler(30) + " " + ANSWER + " " + filler(30, "g")
        if where == "middle"
        else filler(60) + " " + ANSWER
    )
    rows = [
        {"id": "long", "text": long_text},
        {"id": "other", "text": "Office plants need watering twice a week in summer."},
        {"id": "near", "text": "The service desk answers questions about payroll."},
    ]
    ranked = rank(rows, WindowModel())
    assert ranked[0].row["id"] == "long"
    passage = ranked[0].passage
    assert passage["field"] == "text" and passage["length"] == len(long_text)
    assert ANSWER in long_text[passage["start"] : passage["end"]]
    assert "passage" in ranked[0].explain()
    assert all(r.passage is None for r in ranked[1:])


def test_a_long_row_scores_as_its_passage_alone() -> None:
    """Same scale: a long row whose best passage is P scores what P alone scores."""
    paragraph = ANSWER[:-1] + " " + " ".join(f"detail{i}" for i in range(70)) + "."
    fillers = [
        filler(1, f"s{i}")[:-1] + " " + " ".join(f"x{i}y{j}" for j in range(70)) + "."
        for i in range(4)
    ]
    long_text = "\n\n".join([fillers[0], fillers[1], paragraph, fillers[2], fillers[3]])
    assert past_window(long_text) and not past_window(paragraph)
    assert paragraph in [long_text[a:b] for a, b in windows(long_text)]
    base = [{"id": 2, "text": "Office plants need watering twice a week."}]
    alone = {r.row["id"]: r for r in rank([{"id": 1, "text": paragraph}, *base], WindowModel())}
    inside = {r.row["id"]: r for r in rank([{"id": 1, "text": long_text}, *base], WindowModel())}
    assert inside[1].passage["start"] == long_text.index(paragraph)
    assert inside[1].similarity == pytest.approx(alone[1].similarity, abs=1e-12)
    assert inside[1].score == pytest.approx(alone[1].score, abs=1e-12)


def test_a_long_rows_idf_factor_is_its_passages() -> None:
    """Query words scattered over a long row's unrelated parts do not lift it: its IDF
    factor (its coverage of the query's words) is the passage's that scored, as if it
    were a short row, not the whole row's, which grows with its length."""
    paragraph = "Drain the payments service queue " + "ipsum " * 60 + "end."
    scattered = {0: "A restart of printers.", 3: "A failover drill."}  # one query word each
    fillers = [scattered.get(i, "Nothing here.") + " " + "lorem " * 70 + "end." for i in range(4)]
    long_text = "\n\n".join([fillers[0], fillers[1], paragraph, fillers[2], fillers[3]])
    rows = [
        {"id": 1, "text": long_text},
        {"id": 2, "text": "Office plants need watering twice a week."},
    ]
    ranked = {r.row["id"]: r for r in rank(rows, WindowModel())}
    scored = long_text[ranked[1].passage["start"] : ranked[1].passage["end"]]
    assert paragraph in scored
    texts = [r["text"] for r in rows]
    weights = query_token_weights(TokenBatch.from_texts(texts), tokenize(QUERY))
    whole, alone = idf_factors(TokenBatch.from_texts([long_text, scored]), weights)
    assert alone < whole  # restart and failover are in the row, not in its passage
    assert ranked[1].idf_factor == pytest.approx(alone, abs=1e-12)


def test_short_rows_are_read_as_before() -> None:
    """Rows within two windows' worth of words: their head only, as before passages."""
    model = WindowModel()
    rows = [{"id": f"r{i}", "text": f"note {i} about the payments service"} for i in range(5)]
    rows.append({"id": "r5", "text": filler(15) + " " + ANSWER})  # past one window only
    ranked = rank(rows, model)
    assert all(r.passage is None for r in ranked)
    assert sorted(model.embedded) == sorted([QUERY, *(f"{r['id']} {r['text']}" for r in rows)])


def test_only_the_best_passages_of_embedded_rows_are_embedded() -> None:
    model = WindowModel()
    long_rows = [
        {"id": f"long{i}", "text": filler(40, f"c{i}") + " " + ANSWER + " " + filler(20)}
        for i in range(3)
    ]
    shorts = [{"id": f"s{i}", "text": f"weather note {i}"} for i in range(6)]
    rank([*long_rows, *shorts], model, embedding_max_rows=2)
    # two rows embedded (the best by words: long rows), each its head and its best passages
    rows_and_passages = [t for t in model.embedded if t != QUERY]
    assert len(rows_and_passages) == 2 * (1 + PASSAGES_A_ROW)
    assert sum(ANSWER in t for t in rows_and_passages) >= 2  # in each row embedded


class SlowModel(WindowModel):
    """Keeps a deadline: the rows are embedded in time, their passages are past it."""

    keeps_deadline = True
    calls = 0

    def embed_batch(self, texts: list[str], deadline: float) -> list[list[float]]:
        self.calls += 1
        return [self.embed(t) if self.calls == 1 else [float("nan")] * self.dim for t in texts]


def test_passages_past_the_deadline_leave_the_row_its_head() -> None:
    rows = [{"id": "long", "text": filler(60) + " " + ANSWER}]
    ranked = RankingSynthesizer(idf=True, embedder=SlowModel(), embedding_deadline_ms=60_000).rank(
        [AdapterResult("docs", rows)], {"query": QUERY}
    )
    assert ranked[0].passage["start"] == 0  # its head scored, nothing was dropped


class CountingModel(OnnxEmbedder):
    """The sentence model, recording each text it runs (a cache hit runs none)."""

    def __init__(self) -> None:
        super().__init__(cache_size=10_000)
        self.encoded: list[str] = []

    def _encode(self, texts: list[str]) -> np.ndarray:
        self.encoded.extend(texts)
        return super()._encode(texts)


CAFETERIA = "The cafeteria serves a lentil soup of the day on Fridays in winter."


def rank_query(rows: list[dict[str, str]], model: OnnxEmbedder, query: str) -> list:
    ranker = RankingSynthesizer(idf=True, embedder=model)
    return ranker.rank([AdapterResult("docs", rows)], {"query": query})


def test_a_new_query_on_seen_long_rows_embeds_no_new_text() -> None:
    rows = [
        {
            "id": f"long{i}",
            "text": " ".join([filler(20, f"a{i}"), ANSWER, filler(20, f"b{i}"), CAFETERIA]),
        }
        for i in range(3)
    ]
    model = CountingModel()
    rank_query(rows, model, QUERY)  # the rows seen: every passage embedded once
    for query in ("cafeteria lentil soup fridays", "quarterly staffing figures committee"):
        model.encoded.clear()
        ranked = rank_query(rows, model, query)
        assert model.encoded == [query]  # the query only: every passage a cache hit
        assert all(r.passage is not None for r in ranked)
    best = rank_query(rows, model, "cafeteria lentil soup fridays")[0]
    text = best.row["text"]
    assert CAFETERIA in text[best.passage["start"] : best.passage["end"]]


def test_a_long_row_embeds_its_first_passages_once_up_to_the_bound() -> None:
    text = filler(WINDOWS_A_ROW * 8) + " " + ANSWER
    spans = windows(text)
    assert len(spans) > WINDOWS_A_ROW + 1
    model = CountingModel()
    rank_query([{"id": "long", "text": text}], model, QUERY)
    rows_and_passages = [t for t in model.encoded if t != QUERY]
    # its head, its first WINDOWS_A_ROW passages after the head, and its best by words
    assert 1 + WINDOWS_A_ROW <= len(rows_and_passages) <= 1 + WINDOWS_A_ROW + PASSAGES_A_ROW
    assert any(ANSWER in t for t in rows_and_passages)  # the best by words, past the bound


@pytest.mark.parametrize("words", [PASSAGE_WORDS - 1, PASSAGE_WORDS, PASSAGE_WORDS + 1, 5000])
@pytest.mark.parametrize("word", ["w", "word", "a-b", "crème", "wordlongerthanmost"])
def test_past_window_counts_every_word_of_a_long_text(words: int, word: str) -> None:
    text = " ".join([word] * words)
    exact = len(re.findall(r"\w+", text))
    assert past_window(text, PASSAGE_WORDS) == (exact > PASSAGE_WORDS)


@pytest.mark.parametrize(
    "text", ["a b c", "a-b-c  d_e, f.", "x = 0.5 , y = -1 ; (z)", "", "___ 12ab"]
)
def test_ascii_words_count_as_the_regex_does(text: str) -> None:
    exact = len(re.findall(r"\w+", text))
    assert ascii_words(text.encode("ascii"), 0) == exact  # no bound: the exact count
    assert ascii_words(text.encode("ascii"), 1000) <= 1000  # surely within: no count


def test_short_rows_are_never_split() -> None:
    """A batch of short rows (more characters than twice the words, fewer words) is
    decided without splitting any row or counting its words one by one."""
    rows = [{"id": f"r{i}", "text": filler(12, f"s{i}")} for i in range(20)]
    texts = [f"{r['id']} {r['text']}" for r in rows]
    assert all(len(t) > 2 * PASSAGE_WORDS for t in texts)
    assert all(ascii_words(t.encode("ascii"), PASSAGE_WORDS) <= PASSAGE_WORDS for t in texts)
    model = WindowModel()
    assert all(r.passage is None for r in rank(rows, model))
    assert len(model.embedded) == len(rows) + 1  # each row once, and the query
