"""``eval`` names every ranking knob in force, with its value and where it came from;
its passthrough row unsets every ranking knob (``knobs.RANKING_KNOBS``), and whenever
ranking is on, whatever turned it on, the sweep prints both the passthrough row and the
reference (ranking on, every knob at its default). Real seeds, the command run in-process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fakes import write_jsonl
from inprocess import run_cli

from nautilus_ranking.embedders import HashingEmbedder
from nautilus_ranking.evaluation.alternatives import alternatives
from nautilus_ranking.settings.knobs import KNOBS, RANKING_KNOBS, knob_is_set
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.source_settings import applied_settings

WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
    "november oscar papa quebec romeo sierra tango"
).split()


def cli(folder: Path, *args: str, **variables: str) -> subprocess.CompletedProcess[str]:
    """The command in ``folder`` with only ``variables`` set (in-process: what is tested
    is what it prints, and a process a run would cost its imports and model load)."""
    return run_cli(args, folder, {"NAUTILUS_DATA_DIR": str(folder / "data"), **variables})


def notes(folder: Path) -> list[str]:
    """Two tables in id order; query i's one relevant row is notes' row i, and the other
    table holds a copy of every note under another id."""
    rows = [
        {"id": f"n{i:02d}", "title": f"disk note {w} on the orders host"}
        for i, w in enumerate(WORDS)
    ]
    write_jsonl(folder / "notes.jsonl", rows)
    write_jsonl(folder / "copies.jsonl", [{**r, "id": "c" + r["id"]} for r in rows])
    (folder / "q.tsv").write_text("".join(f"q{i}\tdisk {w}\n" for i, w in enumerate(WORDS)))
    (folder / "j.tsv").write_text("".join(f"q{i}\tn{i:02d}\t1\n" for i in range(len(WORDS))))
    (folder / "s.yaml").write_text(
        "sources:\n"
        "  - {id: notes, type: sqlite_table, path: n.db, seed: notes.jsonl, table: notes, "
        "search_columns: [title]}\n"
        "  - {id: copies, type: sqlite_table, path: c.db, seed: copies.jsonl, table: notes, "
        "search_columns: [title]}\n"
    )
    return ["eval", "--config", "s.yaml", "--queries", "q.tsv", "--judgments", "j.tsv"]


def sweep_json(folder: Path, **variables: str) -> dict[str, Any]:
    run = cli(folder, *notes(folder), "--sweep", "--json", **variables)
    assert run.returncode == 0, run.stderr
    report: dict[str, Any] = json.loads(run.stdout)
    return report


def test_the_header_names_every_knob_set_with_its_origin(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("NAUTILUS_RANKING_TOP_K=10\n")
    run = cli(
        tmp_path,
        *notes(tmp_path),
        "--sweep",
        NAUTILUS_RANKING_NEAR_DUPLICATES="on",
        NAUTILUS_RANKING_DIVERSITY="0.3",
    )
    assert run.returncode == 0, run.stderr
    header = next(x for x in run.stdout.splitlines() if x.startswith("sources:"))
    assert "NAUTILUS_RANKING_TOP_K=10 (.env)" in header, header
    assert "NAUTILUS_RANKING_NEAR_DUPLICATES=0.4 (environment)" in header, header
    assert "NAUTILUS_RANKING_DIVERSITY=0.3 (environment)" in header, header
    assert "NAUTILUS_EMBEDDER=hashing (environment)" in header, header  # the suite pins it


@pytest.fixture(scope="module")
def passthrough(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The sweep's current row with no knob set: one run, shared by the cases below."""
    row: dict[str, Any] = sweep_json(tmp_path_factory.mktemp("passthrough"))["results"][0]
    return row


@pytest.mark.parametrize(
    "variables",
    [
        {"NAUTILUS_RANKING_NEAR_DUPLICATES": "on"},
        {"NAUTILUS_RANKING_DIVERSITY": "0.3"},
        {"NAUTILUS_RANKING_MAX_PER_SOURCE": "4"},
        {"NAUTILUS_RANKING_NEAR_DUPLICATES": "on", "NAUTILUS_RANKING_TOP_K": "10"},
    ],
    ids=["near-duplicates", "diversity", "cap", "near-duplicates+top-k"],
)
def test_passthrough_and_the_reference_print_whatever_turned_ranking_on(
    tmp_path: Path, variables: dict[str, str], passthrough: dict[str, Any]
) -> None:
    assert passthrough["kind"] == "current" and passthrough["name"] == "current (passthrough)"
    report = sweep_json(tmp_path, **variables)
    assert report["ranking_enabled"] is True
    rows = {r["name"]: r for r in report["results"]}
    assert rows["passthrough"]["ndcg"] == passthrough["ndcg"]  # really every knob unset
    assert rows["passthrough"]["env"] == dict.fromkeys(variables, "")
    reference = [r for r in report["results"] if r["kind"] == "reference"]
    assert [r["name"] for r in reference] == ["reference (ranked, defaults)"]
    text = cli(tmp_path, *notes(tmp_path), "--sweep", **variables).stdout
    table = [line.split("  ")[0].strip() for line in text.splitlines()]
    assert "passthrough" in table and "reference (ranked, defaults)" in table


def test_the_json_names_every_knob_with_its_value_and_origin(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("NAUTILUS_RANKING_MAX_PER_SOURCE=4\n")
    report = sweep_json(
        tmp_path, NAUTILUS_RANKING_NEAR_DUPLICATES="on", NAUTILUS_RANKING_DIVERSITY="0.3"
    )
    assert report["version"] == 2
    current = report["current_settings"]
    assert set(current) == {k.variable for k in KNOBS}  # every knob, from the declaration
    assert current["NAUTILUS_RANKING_NEAR_DUPLICATES"] == {
        "value": 0.4,
        "origin": "environment",
        "set": True,
    }
    assert current["NAUTILUS_RANKING_DIVERSITY"]["origin"] == "environment"
    assert current["NAUTILUS_RANKING_MAX_PER_SOURCE"] == {"value": 4, "origin": ".env", "set": True}
    assert current["NAUTILUS_RANKING_TOP_K"] == {"value": None, "origin": "default", "set": False}


def test_the_sweeps_passthrough_unsets_every_ranking_knob() -> None:
    settings = NautilusSettings(
        ranking_top_k=5,
        ranking_near_duplicates="on",
        ranking_diversity=0.3,
        ranking_max_per_source=2,
        ranking_max_tokens=500,
        source_boosts="fts:high",
    )
    current = applied_settings(settings, ["fts", "sql"])
    alts = {a.name: a for a in alternatives(current, ["fts", "sql"], HashingEmbedder(), True)}
    passthrough = alts["passthrough"]
    assert passthrough.ranker is None
    assert passthrough.settings is not None
    defaults = NautilusSettings()
    assert not [
        k.variable
        for k in RANKING_KNOBS
        if knob_is_set(getattr(passthrough.settings, k.field), getattr(defaults, k.field))
    ]
    assert dict(passthrough.env) == {
        "NAUTILUS_RANKING_TOP_K": "",
        "NAUTILUS_SOURCE_BOOSTS": "",
        "NAUTILUS_RANKING_NEAR_DUPLICATES": "",
        "NAUTILUS_RANKING_DIVERSITY": "",
        "NAUTILUS_RANKING_MAX_PER_SOURCE": "",
        "NAUTILUS_RANKING_MAX_TOKENS": "",
    }
