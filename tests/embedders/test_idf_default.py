"""``NAUTILUS_RANKING_IDF`` unset follows the embedder resolved: on with the model, off
with words (the order ``hashing`` always gave); unset is never a setting, so it never
turns ranking on, and everything that reports IDF says the value resolved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_process import run_nautilus

from nautilus_ranking import NautilusSettings, RankingSynthesizer
from nautilus_ranking.embedders.default import model_installed
from nautilus_ranking.request.pages import ranking_key

needs_model = pytest.mark.skipif(not model_installed(), reason="needs the embed extra")


def test_unset_idf_is_off_with_words_and_never_a_setting() -> None:
    words = NautilusSettings(embedder="hashing")
    assert words.ranking_idf is None and words.resolved_idf is False
    assert not words.ranking_enabled  # IDF unset turns nothing on
    assert (
        RankingSynthesizer.from_settings(words.model_copy(update={"ranking_top_k": 3})).idf is False
    )


@needs_model
def test_unset_idf_is_on_with_the_model_and_said_as_resolved() -> None:
    model = NautilusSettings(embedder="onnx")
    assert model.ranking_idf is None and model.resolved_idf is True
    assert not model.ranking_enabled
    assert model.effective()["NAUTILUS_RANKING_IDF"] is True
    ranked = model.model_copy(update={"ranking_top_k": 3})
    assert RankingSynthesizer.from_settings(ranked).idf is True
    # a cursor made with IDF resolved on is the one made with IDF set on
    explicit = ranked.model_copy(update={"ranking_idf": True})
    assert ranking_key("q", ranked, ["a"]) == ranking_key("q", explicit, ["a"])
    assert ranking_key("q", ranked, ["a"]) != ranking_key(
        "q", ranked.model_copy(update={"ranking_idf": False}), ["a"]
    )


def test_idf_set_off_is_a_setting_that_turns_nothing_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NAUTILUS_RANKING_IDF", "false")
    off = NautilusSettings(embedder="onnx")
    assert off.ranking_idf is False and off.resolved_idf is False
    assert not off.ranking_enabled
    monkeypatch.setenv("NAUTILUS_RANKING_IDF", "auto")
    assert NautilusSettings().ranking_idf is None
    monkeypatch.setenv("NAUTILUS_RANKING_IDF", "true")
    assert NautilusSettings().ranking_enabled


@needs_model
def test_query_explains_the_idf_resolved(tmp_path: Path) -> None:
    env = {"NAUTILUS_EMBEDDER": None, "NAUTILUS_DATA_DIR": str(tmp_path / "data")}
    out = run_nautilus(
        "query", "orders-db disk full", "--top-k", "3", "--json", "--explain", env=env, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    explain = json.loads(out.stdout)["explain"]
    assert (explain["embedder"], explain["idf"]) == ("onnx", True)
