"""The sweep tries the knobs that matter: near copies on and off (with a repeats column),
diversity and the per-source cap at their documented settings, the other lexical scorer
and, with the ``embed`` extra, the other embedder (rows re-embedded, the cost printed, and
a word on sources whose own retrieval depends on the embedder). A progress line names
what is being tried. Real seeds, the command run in-process."""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path
from typing import Any

import pytest
from fakes import write_jsonl
from test_eval_knobs_in_force import cli, notes

from nautilus_ranking.embedders import HashingEmbedder
from nautilus_ranking.evaluation.alternatives import alternatives
from nautilus_ranking.evaluation.progress import Progress
from nautilus_ranking.evaluation.repeats import repeats_in_top
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.settings.parsing import LEXICAL_SCORERS
from nautilus_ranking.source_settings import applied_settings

SOURCES = ["fts", "sql"]
HAS_ONNX = importlib.util.find_spec("onnxruntime") is not None


def names(settings: NautilusSettings, embed: bool = False) -> dict[str, dict[str, str]]:
    current = applied_settings(settings, SOURCES)
    return {
        a.name: dict(a.env)
        for a in alternatives(current, SOURCES, HashingEmbedder(), sweep=True, embed=embed)
    }


def test_the_sweep_offers_every_knob_at_its_documented_setting() -> None:
    rows = names(NautilusSettings(ranking_idf=True))
    assert rows["near duplicates on"] == {"NAUTILUS_RANKING_NEAR_DUPLICATES": "on"}
    assert rows["diversity 0.3"] == {"NAUTILUS_RANKING_DIVERSITY": "0.3"}
    assert rows["at most 4 per source"] == {"NAUTILUS_RANKING_MAX_PER_SOURCE": "4"}
    default = NautilusSettings().ranking_lexical
    (other,) = [s for s in LEXICAL_SCORERS if s != default]
    assert rows[f"lexical {other}"] == {"NAUTILUS_RANKING_LEXICAL": other}
    assert "near duplicates off" not in rows  # the current settings already
    assert not any(name.startswith("embedder") for name in rows)  # not asked for
    on = names(NautilusSettings(ranking_near_duplicates="on", ranking_diversity=0.3))
    assert on["near duplicates off"] == {"NAUTILUS_RANKING_NEAR_DUPLICATES": "off"}
    assert on["diversity off"] == {"NAUTILUS_RANKING_DIVERSITY": "off"}


def test_from_passthrough_a_scorer_is_tried_with_ranking_on() -> None:
    # The lexical scorer and the embedder do not turn ranking on: from passthrough they
    # are tried ranked, with the top K of the evaluated depth that turns it on.
    rows = names(NautilusSettings(), embed=True)
    default = NautilusSettings().ranking_lexical
    (other,) = [s for s in LEXICAL_SCORERS if s != default]
    assert rows[f"lexical {other}"] == {
        "NAUTILUS_RANKING_LEXICAL": other,
        "NAUTILUS_RANKING_TOP_K": "10",
    }
    assert rows["embedder onnx"] == {"NAUTILUS_EMBEDDER": "onnx", "NAUTILUS_RANKING_TOP_K": "10"}


def test_a_repeat_is_a_top_slot_spent_on_a_copy_of_a_row_above() -> None:
    rows = [
        {"id": "a", "text": "orders db disk full on the primary host"},
        {"id": "b", "text": "login loop after the password reset"},
        {"id": "a2", "text": "ORDERS db disk full on the primary host"},  # a copy of a
        {"id": "c", "text": "checkout payment timeout at the proxy"},
        {"id": "b2", "text": "login loop after the password reset"},  # a copy of b
    ]
    assert repeats_in_top(rows, "id", 10) == 2
    assert repeats_in_top(rows, "id", 3) == 1  # only a2 is in the top 3
    assert repeats_in_top(rows[:2] + rows[3:4], "id", 10) == 0


def sweep(folder: Path, *more: str, **variables: str) -> dict[str, Any]:
    run = cli(folder, *notes(folder), "--sweep", "--json", *more, **variables)
    assert run.returncode == 0, run.stderr
    report: dict[str, Any] = json.loads(run.stdout)
    return report


def test_the_repeats_column_counts_the_copies_the_collapse_removes(tmp_path: Path) -> None:
    report = sweep(tmp_path, NAUTILUS_RANKING_IDF="true")
    rows = {r["name"]: r for r in report["results"]}
    # each query's union holds its note twice (notes and copies): IDF on ranks both
    assert rows["current"]["repeats"] > 0.9
    assert rows["near duplicates on"]["repeats"] == 0.0
    text = cli(tmp_path, *notes(tmp_path), "--sweep", NAUTILUS_RANKING_IDF="true").stdout
    head = next(x for x in text.splitlines() if x.startswith("setting"))
    assert "repeats" in head


@pytest.mark.skipif(not HAS_ONNX, reason="needs the embed extra")
def test_the_embedder_is_tried_and_its_cost_printed(tmp_path: Path) -> None:
    args = notes(tmp_path)
    write_jsonl(tmp_path / "vec.jsonl", [{"id": f"v{i}", "text": f"disk {i}"} for i in range(5)])
    with (tmp_path / "s.yaml").open("a") as handle:
        handle.write(
            "  - {id: vec, type: sqlite_vector, path: v.db, seed: vec.jsonl, text_fields: [text]}\n"
        )
    run = cli(tmp_path, *args, "--sweep", NAUTILUS_RANKING_IDF="true")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert any(line.startswith("embedder onnx") for line in lines), run.stdout
    note = next(x for x in lines if x.startswith("embedder onnx: the rows re-embedded"))
    assert " s ranking (" in note and "hashing" in note
    assert (
        "vec retrieves by the embedder itself: only the ranking was re-run with onnx, "
        "not its retrieval" in run.stdout
    )


def test_the_progress_line_names_what_is_being_tried() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    shown = Terminal()
    with Progress(4, "ranking", stream=shown) as bar:
        bar.trying("near duplicates on")
        bar.step(4)
    assert "ranking: near duplicates on [" in shown.getvalue()
