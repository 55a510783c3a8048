"""Precedence: constructor arguments > environment > .env > defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from nautilus_ranking import NautilusSettings


def write_dotenv(text: str) -> None:
    Path(".env").write_text(text, encoding="utf-8")  # the test's own working directory


def test_dotenv_is_read() -> None:
    write_dotenv("NAUTILUS_RANKING_TOP_K=7\nNAUTILUS_SOURCE_BOOSTS=graph:high\n")
    s = NautilusSettings()
    assert s.ranking_top_k == 7
    assert s.source_boosts == {"graph": "high"}


def test_environment_beats_dotenv(monkeypatch: pytest.MonkeyPatch) -> None:
    write_dotenv("NAUTILUS_RANKING_TOP_K=7\n")
    monkeypatch.setenv("NAUTILUS_RANKING_TOP_K", "3")
    assert NautilusSettings().ranking_top_k == 3


def test_arguments_beat_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    write_dotenv("NAUTILUS_RANKING_TOP_K=7\n")
    monkeypatch.setenv("NAUTILUS_RANKING_TOP_K", "3")
    assert NautilusSettings(ranking_top_k=1).ranking_top_k == 1


def test_bad_dotenv_value_is_skipped_not_fatal() -> None:
    write_dotenv("NAUTILUS_RANKING_IDF=perhaps\nNAUTILUS_RANKING_TOP_K=4\n")
    s = NautilusSettings()
    assert (s.ranking_idf, s.ranking_top_k) == (None, 4)
    assert [p.variable for p in s.problems] == ["NAUTILUS_RANKING_IDF"]


def test_unrelated_dotenv_lines_are_ignored() -> None:
    write_dotenv("DATABASE_URL=postgres://secret@db/x\nNAUTILUS_RANKING_TOP_K=2\n")
    s = NautilusSettings()
    assert s.ranking_top_k == 2
    assert s.problems == ()
