"""The config hash names the sources file's content and the ranking knobs, nothing else."""

from __future__ import annotations

from pathlib import Path

from nautilus_ranking.config_hash import config_hash, config_inputs
from nautilus_ranking.settings.model import NautilusSettings


def _sources(tmp_path: Path, text: str = "sources: []\n", name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_same_settings_and_sources_give_one_hash(tmp_path: Path) -> None:
    a = _sources(tmp_path)
    (tmp_path / "moved").mkdir()
    b = _sources(tmp_path / "moved")  # another path, the same bytes
    settings = NautilusSettings(embedder="hashing")
    assert config_hash(settings, a) == config_hash(settings, b)
    assert len(config_hash(settings, a)) == 16


def test_a_knob_the_embedder_or_the_sources_change_it(tmp_path: Path) -> None:
    path = _sources(tmp_path)
    base = config_hash(NautilusSettings(embedder="hashing"), path)
    assert config_hash(NautilusSettings(embedder="hashing", ranking_top_k=5), path) != base
    assert config_hash(NautilusSettings(embedder="noop"), path) != base
    other = _sources(tmp_path, "sources: [] # edited\n", "t.yaml")
    assert config_hash(NautilusSettings(embedder="hashing"), other) != base


def test_process_settings_do_not_change_it(tmp_path: Path) -> None:
    path = _sources(tmp_path)
    base = config_hash(NautilusSettings(embedder="hashing"), path)
    moved = NautilusSettings(embedder="hashing", serve_port=9999, log_level="DEBUG")
    assert config_hash(moved, path) == base
    assert "serve_port" not in config_inputs(moved, path)["knobs"]
