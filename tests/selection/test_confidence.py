"""The ranking's confidence and the opt-in abstain: the signals, the shipped fits, what
the broker does below the minimum, and when it fails open."""

from __future__ import annotations

import math

import numpy as np
import pytest
from fakes import DOCS, FakeSource

from nautilus_ranking import AdapterResult, Broker, RankingSynthesizer, compute_response_hash
from nautilus_ranking.selection import confidence

ROWS = [{"id": d["id"], "text": f"{d['title']}. {d['body']}"} for d in DOCS]
QUERY = "the disk is full of WAL files"


def ranked_confidence(
    ranker: RankingSynthesizer, results: list[AdapterResult], query: str = QUERY
) -> confidence.Confidence:
    found = ranker.merge_ranked(results, {"query": query}).confidence
    assert found is not None
    return found


def test_signals_are_read_from_the_batch_as_the_docstring_says() -> None:
    # two documents of three rows (row 2 copies document 0); relevance in votes of 1/61
    similarity = np.array([0.8, 0.2, 0.8, 0.5])
    relevance = np.array([3.0, 1.0, 3.0, 2.0]) / 61
    voters = np.array([2, 1, 2, 0])
    doc = np.array([0, 1, 0, 2])
    found = confidence.signals(similarity, None, relevance, voters, doc, 4)
    sims = np.array([0.8, 0.2, 0.5])  # each document once
    assert found.top_similarity == 0.8
    assert found.similarity_z == pytest.approx((0.8 - sims.mean()) / sims.std())
    assert found.top_relevance == pytest.approx(3.0)
    assert found.margin == pytest.approx(3.0 - 2.0)
    assert found.agreement == pytest.approx(1 / 3)  # of the 3 documents, one has 2 voters
    assert found.vector(("query_words",))[0] == pytest.approx(math.log(5))


@pytest.mark.parametrize(
    ("embedder", "lexical", "idf", "key"),
    [
        ("hashing", "bm25", False, "hashing/bm25/idf-off"),
        ("hashing", "cosine", True, "hashing/cosine/idf-on"),
        ("onnx", "bm25", True, "onnx/-/idf-on"),
        ("onnx", "cosine", False, "onnx/-/idf-off"),  # a model has no lexical scorer
        (None, "bm25", False, "unknown/bm25/idf-off"),
    ],
)
def test_a_setup_is_its_embedder_lexical_scorer_and_idf(
    embedder: str | None, lexical: str, idf: bool, key: str
) -> None:
    assert confidence.setup_key(embedder, lexical, idf) == key


def test_the_shipped_fits_cover_the_default_setups_and_are_probabilities() -> None:
    fits = confidence.shipped_fits()
    assert {
        "hashing/bm25/idf-off",
        "hashing/bm25/idf-on",
        "onnx/-/idf-off",
        "onnx/-/idf-on",
    } <= set(fits)
    for fit in fits.values():
        knots_x, knots_y = fit.knots
        assert np.all(np.diff(knots_x) >= 0) and np.all(np.diff(knots_y) >= 0)
        assert knots_y[0] >= 0 and knots_y[-1] <= 1


def test_every_ranked_batch_has_a_confidence_and_a_setup_without_a_fit_has_none() -> None:
    results = [AdapterResult("a", ROWS)]
    fitted = ranked_confidence(RankingSynthesizer(top_k=3), results)
    assert fitted.setup == "hashing/bm25/idf-off"
    assert fitted.value is not None and 0 <= fitted.value <= 1
    unfitted = ranked_confidence(RankingSynthesizer(top_k=3, lexical="cosine"), results)
    assert unfitted.setup == "hashing/cosine/idf-off" and unfitted.value is None
    # a query vector the caller brought has no known scale
    brought = (
        RankingSynthesizer(top_k=3)
        .merge_ranked(results, {"query": QUERY, "embedding": [0.1] * 8})
        .confidence
    )
    assert brought is not None and brought.setup.startswith("unknown/") and brought.value is None


def test_a_boost_never_moves_the_confidence() -> None:
    results = [AdapterResult("a", ROWS[:2], ranked=True), AdapterResult("b", ROWS[2:])]
    plain = ranked_confidence(RankingSynthesizer(top_k=2), results)
    for boosts in ({"b": "high"}, {"a": "-high"}, {"b": "low"}):
        boosted = ranked_confidence(RankingSynthesizer(top_k=2, source_boosts=boosts), results)
        assert boosted == plain


def test_a_worse_match_is_less_confident() -> None:
    results = [AdapterResult("a", ROWS)]
    ranker = RankingSynthesizer(top_k=3)
    on_topic = ranked_confidence(ranker, results).value
    off_topic = ranked_confidence(ranker, results, "sourdough starter hydration").value
    assert on_topic is not None and off_topic is not None and off_topic < on_topic


@pytest.mark.parametrize(
    ("value", "errored", "lexical", "abstained", "reason"),
    [
        (0.01, 0, 0, True, "confidence 0.010 below min_confidence 0.5"),
        (0.9, 0, 0, False, None),
        (None, 0, 0, False, "fail open: no confidence (no fit for this scoring setup)"),
        (0.01, 1, 0, False, "fail open: 1 source(s) failed"),
        (0.01, 0, 3, False, "fail open: 3 row(s) scored by words past the embedding deadline"),
    ],
)
def test_decide_abstains_below_the_minimum_and_fails_open(
    value: float | None, errored: int, lexical: int, abstained: bool, reason: str | None
) -> None:
    found = confidence.Confidence(value, "s", confidence.Signals(0, 0, 0, 0, 0, 0, 1))
    said = confidence.decide(found, 0.5, errored, lexical)
    assert said is not None and said["abstained"] is abstained
    assert said.get("reason") == reason
    assert confidence.decide(found, None, errored, lexical) is None  # unset: nothing
    zero = confidence.decide(found, 0.0, errored, lexical)
    assert zero is not None and zero["abstained"] is False  # p = 0 never abstains


def test_nothing_ranked_has_no_confidence_and_never_abstains() -> None:
    said = confidence.decide(None, 0.5, 0, 0)
    assert said == {
        "min_confidence": 0.5,
        "abstained": False,
        "reason": "fail open: no confidence (nothing ranked)",
    }


def test_the_confidence_changes_no_row_and_no_hash() -> None:
    sources = [FakeSource("a", ROWS)]
    ranker = RankingSynthesizer(top_k=3)
    plain = Broker(sources, ranker).request(QUERY)
    judged = Broker(sources, ranker, min_confidence=0.0).request(QUERY)
    assert plain.confidence is not None and plain.confidence["value"] is not None
    assert judged.data == plain.data and judged.response_hash == plain.response_hash
    assert judged.abstain == {"min_confidence": 0.0, "abstained": False}
    assert "abstained" not in plain.to_dict() and "abstained" in judged.to_dict()
    assert plain.to_dict()["confidence"] == plain.confidence["value"]


def test_an_abstained_answer_has_empty_data_its_own_hash_and_the_nearest_rows() -> None:
    sources = [FakeSource("a", ROWS), FakeSource("b", [])]
    ranker = RankingSynthesizer(top_k=3)
    plain = Broker(sources, ranker).request(QUERY)
    out = Broker(sources, ranker, min_confidence=1.0).request(QUERY)
    assert out.data == {"a": [], "b": []} and out.ranking == []
    assert out.response_hash == compute_response_hash({"a": [], "b": []})
    assert [r.row for r in out.nearest] == [r.row for r in plain.ranking]
    assert out.abstain is not None and out.abstain["abstained"] is True
    shown = out.to_dict()
    assert shown["abstained"] is True and shown["data"] == {"a": [], "b": []}
    assert [(n["source_id"], n["id"], n["score"]) for n in shown["abstain"]["nearest"]] == [
        ("a", r.row["id"], r.score) for r in plain.ranking
    ]
    assert shown["abstain"]["reason"].startswith("confidence ")


def test_a_failing_source_never_causes_an_abstain() -> None:
    sources = [FakeSource("a", ROWS), FakeSource("b", raises=RuntimeError("down"))]
    out = Broker(sources, RankingSynthesizer(top_k=3), min_confidence=1.0).request(QUERY)
    assert out.abstain == {
        "min_confidence": 1.0,
        "abstained": False,
        "reason": "fail open: 1 source(s) failed",
    }
    assert sum(map(len, out.data.values())) == 3


def test_a_budget_counts_nothing_on_an_abstained_answer() -> None:
    sources = [FakeSource("a", ROWS)]
    broker = Broker(sources, RankingSynthesizer(top_k=3), max_tokens=500, min_confidence=1.0)
    out = broker.request(QUERY)
    assert out.budget is not None and out.budget["tokens_used"] == 0
    assert out.data == {"a": []} and len(out.nearest) == 3


@pytest.mark.parametrize("bad", [-0.1, 1.5, True, "0.5"])
def test_a_bad_minimum_is_refused_by_the_broker(bad: object) -> None:
    with pytest.raises(ValueError, match="min_confidence"):
        Broker([], RankingSynthesizer(), min_confidence=bad)  # type: ignore[arg-type]
