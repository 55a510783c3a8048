"""A long row scored by its passage is, for the confidence and for time, the passage:
with the sentence model, a batch holding a long row whose answering window is P reads
the same confidence signals, and ages the row the same, as the batch holding P alone
as a row."""

from __future__ import annotations

import pytest

from nautilus_ranking import AdapterResult, RankingSynthesizer
from nautilus_ranking.records import RankedRow
from nautilus_ranking.synthesis.ranking_result import RankingResult
from nautilus_ranking.text.passage_windows import past_window, windows

pytest.importorskip("onnxruntime")
from nautilus_ranking.embedders.onnx import OnnxEmbedder

ANSWER = "To restart the payments service drain the queue then run the failover script."
QUERY = "restart payments service failover"
#: One window's worth: the answer, then words of its own.
PARAGRAPH = ANSWER[:-1] + " " + " ".join(f"detail{i}" for i in range(70)) + "."
FILLERS = [
    f"The s{i} committee reviewed quarterly figures number {i} and staffing plans again "
    + " ".join(f"x{i}y{j}" for j in range(70))
    + "."
    for i in range(4)
]
#: The paragraph in the middle of a row far past the model's window.
LONG = "\n\n".join([FILLERS[0], FILLERS[1], PARAGRAPH, FILLERS[2], FILLERS[3]])
#: Times as epoch seconds, not text: a row's string values are its text, so a date
#: string would be words of the paragraph row and not of the long row's passage.
OTHERS = [
    {"id": 2, "text": "Office plants need watering twice a week.", "at": 1767225600},
    {"id": 3, "text": "The payments team meets on Tuesdays.", "at": 1748736000},
]
TWO_YEARS_OLD = 1704067200  # 2024-01-01, two years before the newest row


@pytest.fixture(scope="module")
def model() -> OnnxEmbedder:
    return OnnxEmbedder()


def ranked(
    text: str, model: OnnxEmbedder, **knobs: object
) -> tuple[RankingResult, dict[int, RankedRow]]:
    rows = [{"id": 1, "text": text, "at": TWO_YEARS_OLD}, *OTHERS]
    ranker = RankingSynthesizer(idf=True, embedder=model, time_fields={"docs": "at"}, **knobs)
    found = ranker.merge_ranked([AdapterResult("docs", rows)], {"query": QUERY})
    return found, {r.row["id"]: r for r in found.ranking}


def test_the_long_row_is_its_passage_window() -> None:
    assert past_window(LONG) and not past_window(PARAGRAPH)
    assert PARAGRAPH in [LONG[a:b] for a, b in windows(LONG)]


def test_the_confidence_reads_a_long_rows_best_passage(model: OnnxEmbedder) -> None:
    inside, rows = ranked(LONG, model)
    alone, _ = ranked(PARAGRAPH, model)
    assert rows[1].passage is not None and rows[1].passage["start"] == LONG.index(PARAGRAPH)
    assert inside.confidence is not None and alone.confidence is not None
    got, want = inside.confidence.signals, alone.confidence.signals
    for name in ("top_similarity", "similarity_z", "top_lexical", "top_relevance", "margin"):
        assert getattr(got, name) == pytest.approx(getattr(want, name), abs=1e-9), name
    assert inside.confidence.value is not None
    assert inside.confidence.value == pytest.approx(alone.confidence.value, abs=1e-9)


def test_recency_ages_a_long_row_scored_by_its_passage_as_the_passage(
    model: OnnxEmbedder,
) -> None:
    _, inside = ranked(LONG, model, recency="half_life:365d")
    _, alone = ranked(PARAGRAPH, model, recency="half_life:365d")
    long_row, paragraph = inside[1], alone[1]
    assert long_row.passage is not None
    assert long_row.time is not None and long_row.time["recency"] < 0  # aged: two years old
    assert long_row.time == pytest.approx(paragraph.time)
    assert long_row.relevance == pytest.approx(paragraph.relevance, abs=1e-12)
    assert long_row.score == pytest.approx(paragraph.score, abs=1e-12)
    assert long_row.score == pytest.approx(
        long_row.relevance + long_row.boost_bump + long_row.time["recency"]
    )
    assert [r.row["id"] for r in inside.values()] == [r.row["id"] for r in alone.values()]
