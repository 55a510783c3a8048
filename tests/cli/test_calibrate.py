"""``nautilus-ranking calibrate`` as a real process on the bundled demo: the fit file and
its provenance, the fit read back per setting and labelled in the answer, and a fit
made for other sources or another embedder refused at start (never a silent fallback)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from cli_process import run_nautilus

from nautilus_ranking import __version__
from nautilus_ranking.config_hash import config_hash
from nautilus_ranking.settings.model import NautilusSettings
from nautilus_ranking.sources.factory import bundled_demo_config

JUDGMENTS = Path(__file__).resolve().parents[1] / "data" / "demo_judgments"
HASHING = {"NAUTILUS_EMBEDDER": "hashing", "NAUTILUS_RANKING_TOP_K": "10"}


@pytest.fixture(scope="module")
def judged_fit(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """One calibration of the demo with its judged queries (hashing: fast)."""
    out = tmp_path_factory.mktemp("fit") / "fit.json"
    done = run_nautilus(
        "calibrate",
        "--out",
        str(out),
        "--queries",
        str(JUDGMENTS / "queries.jsonl"),
        "--judgments",
        str(JUDGMENTS / "qrels.tsv"),
        "--alpha",
        "0.1",
        env=HASHING,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return out, done


def test_calibrate_writes_a_fit_with_its_provenance(judged_fit: tuple[Path, Any]) -> None:
    out, done = judged_fit
    document = json.loads(out.read_text(encoding="utf-8"))
    made, prov = document["made_for"], document["provenance"]
    demo = Path(bundled_demo_config())
    settings = NautilusSettings(embedder="hashing", ranking_top_k=10)
    assert made["config_hash"] == config_hash(settings, demo)
    assert (made["embedder"], made["setup"]) == ("hashing", "hashing/bm25/idf-off")
    assert prov["version"] == __version__ and prov["date"].startswith("20")
    assert prov["null_queries"] + prov["queries_skipped"] >= 300  # the shipped set
    assert prov["judged_queries"] == 20 and prov["probability_from"] == "local"
    assert list(document["setups"]) == ["hashing/bm25/idf-off"]
    chosen = document["threshold"]
    # 20 judged queries and alpha 0.1: the cap is the k = floor(0.1 * 21) = 2nd smallest
    # answerable score; the demo's off-topic target is reached below it
    assert chosen["chosen_on"] == "null" and chosen["false_abstain_guaranteed"]
    assert chosen["guarantee"] == 0.9 and chosen["null_confidence"] == 0.95
    assert chosen["false_abstain_bound"] <= 2 / 21
    assert chosen["false_abstain"]["abstained"] <= 1
    assert "recommended p: " in done.stdout and "| off-topic |" in done.stdout
    assert f"NAUTILUS_RANKING_CONFIDENCE_FIT={out}" in done.stdout


def test_too_few_judged_queries_say_what_is_promised(tmp_path: Path) -> None:
    out = tmp_path / "fit.json"
    done = run_nautilus(
        "calibrate",
        "--out",
        str(out),
        "--queries",
        str(JUDGMENTS / "queries.jsonl"),
        "--judgments",
        str(JUDGMENTS / "qrels.tsv"),
        env=HASHING,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    chosen = json.loads(out.read_text(encoding="utf-8"))["threshold"]
    # alpha 0.02 needs 49 answerable queries: p is set on the off-topic side alone
    assert chosen["chosen_on"] == "null" and chosen["guarantee"] >= 0.9
    assert "fewer than 1/alpha - 1 = 49" in chosen["promise"]
    assert chosen["off_topic_abstain"]["rate"] >= 0.9
    assert "| answerable (no guarantee) |" in done.stdout  # measured, not promised


def test_the_fit_is_read_and_the_answer_says_whose_number_it_is(
    judged_fit: tuple[Path, Any],
) -> None:
    out, _ = judged_fit
    query = ("query", "orders database disk almost full", "--json")
    local = json.loads(
        run_nautilus(
            *query, env={**HASHING, "NAUTILUS_RANKING_CONFIDENCE_FIT": str(out)}, check=True
        ).stdout
    )
    shipped = json.loads(run_nautilus(*query, env=HASHING, check=True).stdout)
    assert (local["confidence_fit"], shipped["confidence_fit"]) == ("local", "shipped")
    assert local["confidence"] != shipped["confidence"]
    assert local["response_hash"] == shipped["response_hash"]  # outside data and its hash


@pytest.mark.parametrize("change", ["sources", "embedder", "missing"])
def test_a_fit_made_for_something_else_is_refused_at_start(
    judged_fit: tuple[Path, Any], tmp_path: Path, change: str
) -> None:
    out, _ = judged_fit
    env = {**HASHING, "NAUTILUS_RANKING_CONFIDENCE_FIT": str(out)}
    if change == "sources":  # the demo's sources file, its bytes changed
        demo = Path(bundled_demo_config())
        for seed in demo.parent.glob("*.jsonl"):
            shutil.copy(seed, tmp_path / seed.name)
        text = demo.read_text(encoding="utf-8")
        (tmp_path / "nautilus.yaml").write_text(text + "\n# changed\n", encoding="utf-8")
        env["NAUTILUS_CONFIG"] = str(tmp_path / "nautilus.yaml")
    elif change == "embedder":
        env["NAUTILUS_EMBEDDER"] = "onnx"
    else:
        env["NAUTILUS_RANKING_CONFIDENCE_FIT"] = str(tmp_path / "gone.json")
        # a missing fit is refused too: never the shipped fit in its place
    ran = run_nautilus("query", "orders database disk almost full", env=env)
    strict = run_nautilus("config", "--strict", env=env)
    named = "gone.json" if change == "missing" else str(out)
    for done in (ran, strict):
        assert done.returncode == 1
        assert "NAUTILUS_RANKING_CONFIDENCE_FIT" in done.stderr and named in done.stderr
        assert "Traceback" not in done.stderr
    if change == "sources":  # a server stops before it serves, as query does
        served = run_nautilus("serve", env={**env, "NAUTILUS_SERVE_PORT": "0"}, timeout=120)
        assert served.returncode == 1 and "the fit" in served.stderr
    if change != "missing":
        assert "was made for sources file" in ran.stderr and "configured:" in ran.stderr
        assert {"sources": "the sources", "embedder": "the embedder"}[change] in ran.stderr
    else:
        assert "cannot read the fit file" in ran.stderr


def test_progress_is_drawn_on_stderr_when_asked(tmp_path: Path) -> None:
    nulls = tmp_path / "mine.txt"
    nulls.write_text("# mine\nhow to knit socks\nbest beaches in portugal\n", encoding="utf-8")
    done = run_nautilus(
        "calibrate",
        "--out",
        str(tmp_path / "fit.json"),
        "--no-shipped-null-queries",
        "--null-queries",
        str(nulls),
        "--null-rate",
        "0.5",
        "--progress",
        env=HASHING,
    )
    assert done.returncode == 0, done.stderr
    assert "calibrate: fetching" in done.stderr and "calibrate: ranking" in done.stderr
    prov = json.loads((tmp_path / "fit.json").read_text(encoding="utf-8"))["provenance"]
    assert prov["null_queries_asked"] == 2 and prov["shipped_null_queries"] is False


def test_bad_input_is_one_clear_line(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n", encoding="utf-8")
    done = run_nautilus(
        "calibrate", "--out", str(tmp_path / "f.json"), "--null-queries", str(empty), env=HASHING
    )
    assert done.returncode == 1 and "no query in it" in done.stderr
    assert "Traceback" not in done.stderr
    done = run_nautilus("calibrate", "--out", str(tmp_path / "f.json"), "--alpha", "2")
    assert done.returncode == 2 and "--alpha must be in (0, 1)" in done.stderr


def test_each_profile_reads_its_own_fit_and_a_bad_one_is_named(
    judged_fit: tuple[Path, Any], tmp_path: Path
) -> None:
    out, _ = judged_fit
    good = {**HASHING, "NAUTILUS_PROFILES__SUPPORT__RANKING_CONFIDENCE_FIT": str(out)}
    done = run_nautilus("query", "checkout 502", "--json", "--profile", "support", env=good)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["confidence_fit"] == "local"
    bad = {**HASHING, "NAUTILUS_PROFILES__SUPPORT__RANKING_CONFIDENCE_FIT": str(tmp_path / "x")}
    strict = run_nautilus("config", "--strict", env=bad)
    assert strict.returncode == 1
    assert "NAUTILUS_PROFILES__SUPPORT__RANKING_CONFIDENCE_FIT" in strict.stderr
