"""``eval`` sweeps time where the rows carry it: recency (its decays) and supersession as
knobs, and with dated judgments (``--as-of``: the time they hold at) the same ranking
without the request's ``as_of``. Real SQLite seeds, the command in-process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakes import DEMO, write_jsonl
from inprocess import run_cli

from nautilus_ranking.embedders import HashingEmbedder
from nautilus_ranking.evaluation.alternatives import RECENCY_SETTINGS, alternatives
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.source_settings import applied_settings

JUDGED = Path(__file__).resolve().parents[1] / "data" / "demo_judgments"


def _names(dated: bool, as_of: bool = False, **knobs: Any) -> dict[str, dict[str, str]]:
    current = applied_settings(NautilusSettings(ranking_idf=True, **knobs), ["a"])
    return {
        a.name: dict(a.env)
        for a in alternatives(current, ["a"], HashingEmbedder(), True, dated=dated, as_of=as_of)
    }


def test_the_time_knobs_are_swept_where_rows_carry_a_time() -> None:
    rows = _names(dated=True)
    for decay in RECENCY_SETTINGS:
        assert rows[f"recency {decay}"] == {"NAUTILUS_RANKING_RECENCY": decay}
    assert rows["supersede on"] == {"NAUTILUS_RANKING_SUPERSEDE": "true"}
    assert "recency off" not in rows  # the current settings already
    set_ = _names(dated=True, ranking_recency="half_life:30d", ranking_supersede=True)
    assert set_["recency off"] == {"NAUTILUS_RANKING_RECENCY": "off"}
    assert set_["supersede off"] == {"NAUTILUS_RANKING_SUPERSEDE": "false"}
    assert "recency half_life:30d" not in set_
    undated = _names(dated=False)
    assert not any(name.startswith(("recency", "supersede")) for name in undated)
    assert "without as_of" in _names(dated=True, as_of=True)


def test_the_demo_sweep_measures_recency_and_supersession(tmp_path: Path) -> None:
    # the demo's tickets and postmortems map a time (time_field in its sources file)
    done = run_cli(
        [
            "eval",
            "--config",
            str(DEMO / "nautilus.yaml"),
            "--queries",
            str(JUDGED / "queries.jsonl"),
            "--judgments",
            str(JUDGED / "qrels.tsv"),
            "--sweep",
            "--json",
        ],
        tmp_path,
        {"NAUTILUS_DATA_DIR": str(tmp_path / "data"), "NAUTILUS_RANKING_IDF": "true"},
    )
    assert done.returncode == 0, done.stderr
    results = {r["name"]: r for r in json.loads(done.stdout)["results"]}
    assert results["recency half_life:30d"]["kind"] == "time"
    assert results["recency half_life:30d"]["p_value"] is not None  # in the family
    assert results["supersede on"]["env"] == {"NAUTILUS_RANKING_SUPERSEDE": "true"}


def _revised(folder: Path) -> list[str]:
    """One document in two revisions, 2024 and 2025; judged as of mid-2024, when the
    2024 text was in force."""
    write_jsonl(
        folder / "sops.jsonl",
        [
            {
                "id": "sop-2024",
                "doc": "sop",
                "at": "2024-03-01",
                "title": "deploy approval procedure for the payments service",
            },
            {
                "id": "sop-2025",
                "doc": "sop",
                "at": "2025-09-01",
                "title": "deploy approval procedure for the payments service revised",
            },
            *(
                {
                    "id": f"n{i}",
                    "doc": f"n{i}",
                    "at": "2024-01-01",
                    "title": f"unrelated note {i} about deploy",
                }
                for i in range(6)
            ),
        ],
    )
    (folder / "s.yaml").write_text(
        "sources:\n"
        "  - {id: sops, type: sqlite_table, path: s.db, seed: sops.jsonl, table: sops, "
        "search_columns: [title], time_field: at, document_key: doc}\n"
    )
    (folder / "q.tsv").write_text("q1\tdeploy approval procedure payments\n")
    (folder / "j.tsv").write_text("q1\tsop-2024\t1\n")
    return ["eval", "--config", "s.yaml", "--queries", "q.tsv", "--judgments", "j.tsv"]


def test_dated_judgments_are_ranked_as_of_their_time(tmp_path: Path) -> None:
    variables = {"NAUTILUS_DATA_DIR": str(tmp_path / "data"), "NAUTILUS_RANKING_SUPERSEDE": "true"}
    args = _revised(tmp_path)
    done = run_cli([*args, "--as-of", "2024-06-01", "--sweep", "--json"], tmp_path, variables)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["as_of"] == "2024-06-01"
    results = {r["name"]: r for r in report["results"]}
    # as of mid-2024 the 2024 revision is in force; without as_of the 2025 one takes its place
    assert results["current"]["ndcg"] == 1.0
    assert results["without as_of"]["ndcg"] == 0.0
    assert results["without as_of"]["kind"] == "as_of"


def test_a_bad_as_of_is_an_error_naming_the_flag(tmp_path: Path) -> None:
    args = _revised(tmp_path)
    done = run_cli(
        [*args, "--as-of", "next tuesday"], tmp_path, {"NAUTILUS_DATA_DIR": str(tmp_path / "data")}
    )
    assert done.returncode == 1
    assert "--as-of 'next tuesday' is not a time" in done.stderr


def test_a_collection_served_dated_is_judged_by_version(tmp_path: Path) -> None:
    # tools/dated_collection: each row dated, revisions in the next source under the same
    # id, judgments by version (the revision keeps the grade, the old text loses one)
    from tools.dated_collection import MAY_REVISE, write

    dataset = tmp_path / "tiny"
    (dataset / "qrels").mkdir(parents=True)
    words = ["disk", "network", "memory", "kernel", "cache", "queue"]
    write_jsonl(
        dataset / "corpus.jsonl",
        [
            {"_id": f"d{i}", "title": w, "text": f"The {w} failed. Then the {w} was fixed."}
            for i, w in enumerate(words)
        ],
    )
    queries = [{"_id": f"q{i}", "text": f"{w} failed"} for i, w in enumerate(words)]
    write_jsonl(dataset / "queries.jsonl", queries)
    (dataset / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n" for i in range(len(words)))
    )
    variables = {"NAUTILUS_DATA_DIR": str(tmp_path / "data")}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NAUTILUS_DATA_DIR", variables["NAUTILUS_DATA_DIR"])
        config = write(dataset, tmp_path / "out")
    sources = ("fts", "sql", "vector")
    rows = [
        {
            r["vid"]: r
            for r in map(json.loads, (tmp_path / "out" / f"{name}.jsonl").read_text().splitlines())
        }
        for name in sources
    ]
    revised = [(i, vid) for i, part in enumerate(rows) for vid in part if vid.endswith("~rev")]
    assert len(revised) == 3  # half the judged-relevant documents
    for i, vid in revised:  # the same id, one source on, newer
        doc = vid.removesuffix("~rev")
        original = rows[(i - 1) % 3][doc]
        assert rows[i][vid]["id"] == doc and rows[i][vid]["modified"] > original["modified"]
    judged = set((tmp_path / "out" / "qrels-dated.tsv").read_text().splitlines()[1:])
    for _, vid in revised:
        doc = vid.removesuffix("~rev")
        q = "q" + doc.removeprefix("d")
        assert {f"{q}\t{doc}\t0", f"{q}\t{vid}\t1"} <= judged
    done = run_cli(
        [
            "eval",
            "--config",
            str(config),
            "--queries",
            str(dataset / "queries.jsonl"),
            "--judgments",
            str(tmp_path / "out" / "qrels-dated.tsv"),
            "--id-field",
            "vid",
            "--sweep",
            "--json",
        ],
        tmp_path,
        {**variables, "NAUTILUS_RANKING_TOP_K": "10", "NAUTILUS_RANKING_MAY_REVISE": MAY_REVISE},
    )
    assert done.returncode == 0, done.stderr
    results = {r["name"]: r for r in json.loads(done.stdout)["results"]}
    # the old text, which repeats the query's word, outranks its revision on words;
    # superseded by it, the judged version leads
    assert results["supersede on"]["ndcg"] == 1.0 > results["current"]["ndcg"]
