"""`nautilus-ranking eval` end to end: a real subprocess on adi (82 documents, 35 queries) served by
three SQLite sources that `python -m nautilus_ranking.evaluation.collection` prepares."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_process import cli_environment, run_nautilus
from eval_support import dataset, qrels

#: The databases' folder, shared by this module's runs (set by the ``adi`` fixture).
DATA_DIR: list[Path] = []


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """No NAUTILUS_* from the caller: the current settings are passthrough; the databases
    live in this module's data folder."""
    return run_nautilus(*args, env={"NAUTILUS_DATA_DIR": str(DATA_DIR[0])}, timeout=300)


@pytest.fixture(scope="module")
def adi(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = dataset("adi")
    out = tmp_path_factory.mktemp("adi")
    DATA_DIR[:] = [out / "data"]
    made = subprocess.run(
        [sys.executable, "-m", "nautilus_ranking.evaluation.collection", str(folder), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=cli_environment({"NAUTILUS_DATA_DIR": str(DATA_DIR[0])}),
    )
    assert made.returncode == 0, made.stderr
    config = Path(made.stdout.strip())
    assert config == out / "nautilus.yaml"
    assert (out / "data" / "eval" / "adi-partitioned" / "vector.db").is_file()
    trec = out / "qrels.trec"
    trec.write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, per in qrels(folder).items() for d, g in per.items()),
        encoding="utf-8",
    )
    return {
        "config": config,
        "queries": folder / "queries.jsonl",
        "judgments": folder / "qrels" / "test.tsv",
        "trec": trec,
        "out": out,
    }


def eval_args(adi: dict[str, Path], judgments: str = "judgments") -> list[str]:
    return [
        "eval",
        "--config",
        str(adi["config"]),
        "--queries",
        str(adi["queries"]),
        "--judgments",
        str(adi[judgments]),
    ]


@pytest.fixture(scope="module")
def sweep_json(adi: dict[str, Path]) -> dict[str, object]:
    result = run(*eval_args(adi), "--sweep", "--json")
    assert result.returncode == 0, result.stderr
    out: dict[str, object] = json.loads(result.stdout)
    return out


def test_sweep_prints_the_table_and_a_recommendation(adi: dict[str, Path]) -> None:
    result = run(*eval_args(adi), "--sweep")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "35 judged queries" in out and "sources: fts, sql, vector" in out
    assert "returned 154 of 170 judged-relevant" in out  # the ceiling
    header = next(line for line in out.splitlines() if line.startswith("setting"))
    for column in ("nDCG@10", "recall@10", "MRR", "repeats", "Δ nDCG@10 [95% CI]", "kept (worst)"):
        assert column in header
    shares = out.splitlines()[out.splitlines().index("share of the top 10, per source:") + 1]
    assert shares.split() == ["setting", "fts", "sql", "vector"]
    names = [
        line.split("  ")[0].strip()
        for line in out.splitlines()[out.splitlines().index(header) + 1 :]
        if line and not line.startswith(("shares", "#"))
    ]
    for name in (
        "current (passthrough)",
        "reference (ranked, defaults)",
        "IDF on",
        "near duplicates on",
        "fts:low",
        "sql:medium",
        "vector:high",
    ):
        assert name in names
    assert "# recommendation:" in out
    assert "Traceback" not in result.stderr


def test_json_agrees_with_the_text_and_the_recommendation_is_supported(
    sweep_json: dict[str, object],
) -> None:
    coverage = sweep_json["coverage"]
    assert isinstance(coverage, dict)
    assert coverage["evaluated"] == 35 and coverage["relevant_total"] == 170
    assert coverage["relevant_returned"] == 154 and coverage["never_seen"] == []
    results = sweep_json["results"]
    assert isinstance(results, list)
    assert results[0]["name"] == "current (passthrough)" and results[0]["delta_ndcg"] is None
    boosts = [r for r in results if r["kind"] == "boost"]
    assert len(boosts) == 18  # three sources at six levels, demotions included
    references = sweep_json["hijack_references"]
    assert isinstance(references, dict)
    for entry in boosts:  # the hijack check: every other source, never the boosted one
        assert set(entry["recall_kept"]) == {"fts", "sql", "vector"} - {entry["source"]}
        base = references[entry["source"]]["source_recall"]
        for sid, kept in entry["recall_kept"].items():
            assert kept == (
                pytest.approx(entry["source_recall"][sid] / base[sid]) if base[sid] else None
            )
    rec = sweep_json["recommendation"]
    assert isinstance(rec, dict)
    if rec["name"] is not None:
        best = next(r for r in results if r["name"] == rec["name"])
        assert best["delta_ndcg"]["ci_low"] > 0
        assert all(v is None or v >= 0.8 for v in best["recall_kept"].values())
        assert all(k.startswith("NAUTILUS_") for k in rec["env"])
    else:
        assert rec["reason"]


def test_trec_qrels_give_the_same_numbers_as_beir(
    adi: dict[str, Path], sweep_json: dict[str, object]
) -> None:
    result = run(*eval_args(adi, "trec"), "--json")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["formats"] == {"queries": "beir-jsonl", "judgments": "trec"}
    results = sweep_json["results"]
    assert isinstance(results, list)
    current = {k: v for k, v in results[0].items() if k != "safe"}
    assert {k: v for k, v in out["results"][0].items() if k != "safe"} == current


@pytest.mark.parametrize(
    "flags", [["--recommend"], ["--sweep", "--recommend"]], ids=["recommend", "sweep-recommend"]
)
def test_recommend_prints_only_env_file_lines(
    adi: dict[str, Path], tmp_path: Path, flags: list[str]
) -> None:
    """``--recommend`` is for ``>> .env``: nothing but its lines, with --sweep or not."""
    subset = tmp_path / "queries.jsonl"  # 12 queries keep this sweep short
    subset.write_text(
        "".join(adi["queries"].read_text(encoding="utf-8").splitlines(True)[:12]), encoding="utf-8"
    )
    args = eval_args(adi)
    args[args.index(str(adi["queries"]))] = str(subset)
    result = run(*args, *flags)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("# warning: 12 judged queries, fewer than docs/eval.md asks for")
    assert lines[1].startswith("# recommendation:")
    assert all(line.startswith(("#", "NAUTILUS_")) for line in lines)  # a .env fragment
    assert "recall@10  " not in result.stdout  # no table


def test_judgments_no_row_carries_are_reported_not_dropped(
    adi: dict[str, Path], tmp_path: Path
) -> None:
    judgments = tmp_path / "qrels.tsv"
    judgments.write_text(
        adi["judgments"].read_text(encoding="utf-8") + "1\tnot-in-any-source\t1\n", encoding="utf-8"
    )
    args = eval_args(adi)
    args[args.index(str(adi["judgments"]))] = str(judgments)
    result = run(*args)
    assert result.returncode == 0, result.stderr
    assert "never seen: 1 of" in result.stdout and "'not-in-any-source'" in result.stdout
    assert "returned 154 of 171 judged-relevant" in result.stdout

    wrong = run(*eval_args(adi), "--id-field", "title")
    assert wrong.returncode == 0, wrong.stderr
    assert "in field 'title', but field 'id' does: pass --id-field id" in wrong.stdout


def test_input_errors_are_one_line_and_exit_1(adi: dict[str, Path], tmp_path: Path) -> None:
    result = run(
        "eval",
        "--config",
        str(adi["config"]),
        "--queries",
        str(tmp_path / "missing.jsonl"),
        "--judgments",
        str(adi["judgments"]),
    )
    assert result.returncode == 1
    assert "missing.jsonl: no such file" in result.stderr and "Traceback" not in result.stderr
    usage = run("eval", "--queries", str(adi["queries"]))
    assert usage.returncode == 2 and "--judgments" in usage.stderr


def test_a_huge_grade_is_one_line_naming_the_file_the_line_and_the_bound(
    adi: dict[str, Path], tmp_path: Path
) -> None:
    judgments = tmp_path / "huge.tsv"
    judgments.write_text(f"1\t17\t1\n1\t46\t{'9' * 400}\n", encoding="utf-8")
    result = run(*eval_args({**adi, "judgments": judgments}))
    assert result.returncode == 1
    assert f"{judgments}:2: grade '999999999999'… (400 characters) is out of range" in (
        result.stderr
    )
    assert "from -100 to 100" in result.stderr and "OverflowError" not in result.stderr


def test_plot_without_matplotlib_names_the_extra(adi: dict[str, Path], tmp_path: Path) -> None:
    # matplotlib blocked in the child (the make test install has it, for the report)
    code = (
        "import sys; sys.modules['matplotlib'] = None; from nautilus_ranking.cli import main; "
        "sys.exit(main(sys.argv[1:]))"
    )
    plot = ["--plot", str(tmp_path / "p.png")]
    result = subprocess.run(
        [sys.executable, "-c", code, *eval_args(adi), *plot],
        capture_output=True,
        text=True,
        env=cli_environment({"NAUTILUS_DATA_DIR": str(DATA_DIR[0])}),
        timeout=300,
    )
    assert result.returncode == 1
    assert "pip install 'nautilus-ranking[bench]'" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.skipif(
    importlib.util.find_spec("matplotlib") is None, reason="needs nautilus-ranking[bench]"
)
def test_plot_writes_a_png(adi: dict[str, Path], tmp_path: Path) -> None:
    result = run(*eval_args(adi), "--plot", str(tmp_path / "p.png"), "--markdown")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| setting |" in result.stdout


def test_the_sweep_reports_each_relevance_cut_setting(sweep_json: dict[str, object]) -> None:
    cuts = sweep_json["relevance_cut"]
    assert isinstance(cuts, list)
    assert [c["setting"] for c in cuts][:3] == ["off", "relative:0.5", "relative:0.6"]
    off = cuts[0]
    assert off["current"] is True  # no cut is set
    for entry in cuts:
        assert set(entry) == {
            "setting",
            "current",
            "rows_handed_over",
            "irrelevant_rows",
            "recall",
            "ndcg",
        }
        assert 1 <= entry["rows_handed_over"] <= off["rows_handed_over"]
        assert entry["irrelevant_rows"] <= entry["rows_handed_over"]
        assert entry["recall"] <= off["recall"] + 1e-12  # a cut only ever removes rows
