"""The embedding deadline: rows the model has not reached when it passes are scored by
words, the answer says so in ``embedding`` (never an error), and their vectors are not
kept (a later request with the time embeds them)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from cli_process import run_nautilus
from fakes import write_jsonl
from plain_environment import plain_environment

from nautilus_ranking.embedders.default import model_installed
from nautilus_ranking.synthesis.embedding_deadline import scored_by_words

needs_model = pytest.mark.skipif(not model_installed(), reason="needs the embed extra")


def test_late_rows_get_their_lexical_score_on_the_models_scale() -> None:
    similarity = np.array([0.6, 0.3, 0.0, 0.0])
    lexical = np.array([0.4, 0.2, 0.8, 0.0])
    out = scored_by_words(similarity, np.array([2, 3]), lexical)
    # the rows embedded in time say the model's scale is 1.5 times the lexical one
    assert out.tolist() == pytest.approx([0.6, 0.3, 1.2, 0.0])
    assert similarity.tolist() == [0.6, 0.3, 0.0, 0.0]  # not changed in place
    assert scored_by_words(similarity, np.array([0]), None).tolist() == [0.0, 0.3, 0.0, 0.0]


@needs_model
def test_texts_not_reached_are_nan_and_not_kept() -> None:
    from nautilus_ranking.embedders.onnx import OnnxEmbedder

    embedder = OnnxEmbedder(cache_size=100)
    texts = ["disk full on orders-db", "kafka consumer lag", "certificate expired"]
    late = embedder.embed_batch(texts, deadline=time.perf_counter() - 100)
    assert np.isnan(late).all()
    assert embedder.cache_hits == embedder.cache_misses == 0
    vectors = embedder.embed_batch(texts)  # no deadline: every text, none NaN
    assert np.isfinite(vectors).all() and embedder.cache_misses == 3


def flood(tmp: Path, n: int) -> Path:
    seed = write_jsonl(
        tmp / "flood.jsonl",
        [{"id": f"f{i}", "title": f"disk full on host {i}, error code {7 * i}"} for i in range(n)],
    )
    path = tmp / "flood.yaml"
    path.write_text(
        f"limit: {n}\nsources:\n  - id: flood\n    type: sqlite_fts\n    path: flood.db\n"
        f"    seed: {seed}\n    columns: [title]\n    timeout_s: 30\n",
        encoding="utf-8",
    )
    return path


def query(tmp: Path, deadline_ms: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **plain_environment(),
        "NAUTILUS_DATA_DIR": str(tmp / "data"),
        "NAUTILUS_CONFIG": str(flood(tmp, 300)),
        "NAUTILUS_RANKING_TOP_K": "300",
        "NAUTILUS_EMBEDDER": "onnx",
        "NAUTILUS_EMBEDDER_DISK_CACHE_MB": "0",  # every row to embed, each run
        "NAUTILUS_EMBEDDER_DEADLINE_MS": deadline_ms,
        "NAUTILUS_EMBEDDER_MAX_ROWS": "0",  # the deadline alone decides: every row may embed
    }
    return run_nautilus("query", "disk full", *args, env=env, cwd=tmp, timeout=300)


@pytest.mark.slow
@needs_model
def test_a_tiny_deadline_scores_the_rest_by_words_and_says_so(tmp_path: Path) -> None:
    done = query(tmp_path, "1", "--json", "--explain")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    embedding = answer["embedding"]
    assert embedding["deadline_ms"] == 1
    assert embedding["rows_lexical"] > 0  # at most one chunk of a few rows fits in 1 ms
    assert embedding["rows_lexical"] + embedding["rows_embedded"] == 300
    assert answer["explain"]["embedding"] == embedding
    assert "budget" not in answer  # the token budget's field is another thing
    assert len(answer["ranking"]) == 300
    assert all(np.isfinite(r["score"]) for r in answer["ranking"])
    text = query(tmp_path, "1")
    assert text.returncode == 0, text.stderr
    assert "row(s) scored by words" in text.stdout


@pytest.mark.slow
@needs_model
def test_rows_scored_by_words_never_make_an_answer_abstain(tmp_path: Path) -> None:
    done = query(tmp_path, "1", "--json", "--min-confidence", "1")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    lexical = answer["embedding"]["rows_lexical"]
    assert lexical > 0 and answer["confidence"] is not None
    assert answer["abstained"] is False and len(answer["ranking"]) == 300
    assert answer["abstain"]["reason"] == (
        f"fail open: {lexical} row(s) scored by words past the embedding deadline"
    )
    whole = query(tmp_path, "0", "--json", "--min-confidence", "1")  # every row embedded
    assert whole.returncode == 0, whole.stderr
    assert json.loads(whole.stdout)["abstained"] is True


@pytest.mark.slow
@needs_model
def test_without_a_deadline_every_row_is_embedded(tmp_path: Path) -> None:
    done = query(tmp_path, "0", "--json", "--explain")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert "embedding" not in answer and "embedding" not in answer["explain"]
    assert len(answer["ranking"]) == 300


def test_eval_measures_every_row_embedded_whatever_the_deadline() -> None:
    """eval's numbers never depend on how busy the machine was: its rankers keep no
    embedding deadline (the serving ranker built from the same settings does)."""
    from nautilus_ranking import NautilusSettings, RankingSynthesizer
    from nautilus_ranking.embedders import HashingEmbedder
    from nautilus_ranking.evaluation.alternatives import reference, synthesizer, unboosted

    settings = NautilusSettings(
        ranking_top_k=5, embedder_deadline_ms=1, source_boosts={"tickets": "high"}
    )
    embedder = HashingEmbedder()
    assert RankingSynthesizer.from_settings(settings, embedder).embedding_deadline_ms == 1
    current = synthesizer(settings, embedder)
    assert current is not None and current.embedding_deadline_ms == 0
    for alternative in (reference(settings, embedder), unboosted(settings, "tickets", embedder)):
        assert alternative.ranker is not None
        assert alternative.ranker.embedding_deadline_ms == 0
