"""``eval`` measures the abstain: given queries nothing answers (``--unanswerable``, no
judgments needed), each ``NAUTILUS_RANKING_MIN_CONFIDENCE`` threshold's off-topic abstain,
false abstain on the judged queries and nDCG@10 lost, with exact intervals; a threshold
is recommended under the sweep's Holm correction; the current threshold abstains in the
table as the broker abstains. The demo's sources and judgments, the command in-process."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fakes import DEMO, write_jsonl
from inprocess import run_cli

from nautilus_ranking.evaluation.abstain import AbstainScored, AbstainTable, choose
from nautilus_ranking.evaluation.familywise import holm, recommend
from nautilus_ranking.evaluation.intervals import at_most_p_value, clopper_pearson

JUDGED = Path(__file__).resolve().parents[1] / "data" / "demo_judgments"


def run(folder: Path, *args: str, **variables: str) -> Any:
    """``eval`` over the demo's judgments as JSON; its exit status must be 0."""
    for name in ("queries.jsonl", "qrels.tsv", "unanswerable.jsonl"):
        shutil.copy(JUDGED / name, folder / name)
    done = run_cli(
        [
            "eval",
            "--config",
            str(DEMO / "nautilus.yaml"),
            "--queries",
            "queries.jsonl",
            "--judgments",
            "qrels.tsv",
            "--json",
            *args,
        ],
        folder,
        {"NAUTILUS_DATA_DIR": str(folder / "data"), "NAUTILUS_EMBEDDER": "hashing", **variables},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return run(
        tmp_path_factory.mktemp("abstain"), "--unanswerable", "unanswerable.jsonl", "--sweep"
    )


def test_clopper_pearson_is_the_exact_interval() -> None:
    # the beta quantiles (scipy.stats.beta.ppf) of the exact interval
    assert clopper_pearson(3, 20) == pytest.approx((0.0320709371854637, 0.378926826545314))
    assert clopper_pearson(0, 20) == pytest.approx((0.0, 0.1684334709830853))
    assert clopper_pearson(20, 20) == pytest.approx((0.8315665290169146, 1.0))
    assert clopper_pearson(0, 0) == (0.0, 1.0)
    # 0 false abstains in 183 judged queries: a rate within 2% at the 2.5% level, not in 182
    assert at_most_p_value(0, 183, 0.02) <= 0.025 < at_most_p_value(0, 182, 0.02)


def test_each_threshold_abstains_on_the_queries_whose_confidence_is_below_it(report: Any) -> None:
    table = report["abstain"]
    unanswerable = table["confidence"]["unanswerable"]
    judged = table["confidence"]["judged"]
    assert len(unanswerable) == 20 and len(judged) == 20  # no query left out
    for row in table["thresholds"]:
        p = row["min_confidence"]
        assert row["off_topic_abstains"] == _below(unanswerable, p), p
        assert row["false_abstains"] == _below(judged, p), p
        assert row["unanswerable"] == 20 and row["judged"] == 20
        low, high = clopper_pearson(row["false_abstains"], 20)
        assert row["false_abstain"]["ci_low"] == pytest.approx(low)
        assert row["false_abstain"]["ci_high"] == pytest.approx(high)
    off = next(r for r in table["thresholds"] if r["min_confidence"] is None)
    assert off["off_topic_abstains"] == off["false_abstains"] == 0
    assert off["ndcg_lost"]["mean"] == 0.0
    # the demo's judged queries all read above 0.25 and most unanswerable ones below it
    at = next(r for r in table["thresholds"] if r["min_confidence"] == 0.25)
    assert at["false_abstains"] == 0 and at["off_topic_abstains"] >= 15
    top = next(r for r in table["thresholds"] if r["min_confidence"] == 0.5)
    assert top["false_abstains"] == 20
    assert top["ndcg_lost"]["mean"] == pytest.approx(off["ndcg"])


def _below(values: list[float | None], p: float | None) -> int:
    return sum(1 for c in values if c is not None and p is not None and c < p)


def test_the_thresholds_are_in_the_family_and_20_queries_cannot_establish_one(report: Any) -> None:
    # 10 thresholds join the Holm family beside the sweep's rows, the reference and the cuts
    rec = report["recommendation"]
    plain = run_demo_family(report)
    assert rec["alternatives"] == plain + 10
    assert report["abstain"]["recommended"] is None
    assert "judged queries with no false abstain" in report["abstain"]["reason"]
    assert any(line.startswith("# abstain: keep") for line in rec["lines"])


def run_demo_family(report: Any) -> int:
    """The family without the abstain: every listed row but the current settings (and
    rows equal to them), plus the cut settings but the current one."""
    rows = [r for r in report["results"][1:] if not r["same_as_current"]]
    cuts = [c for c in report["relevance_cut"] if not c["current"]]
    return len(rows) + len(cuts)


def test_the_current_threshold_abstains_in_the_table(tmp_path: Path) -> None:
    # every demo answer reads below 0.5: the current settings hand nothing over
    report = run(tmp_path, "--sweep", NAUTILUS_RANKING_MIN_CONFIDENCE="0.5")
    current = report["results"][0]
    assert current["ndcg"] == 0.0
    reference = next(r for r in report["results"] if r["kind"] == "reference")
    assert reference["ndcg"] > 0.5  # the same ranking without the abstain
    assert [r["current"] for r in report["abstain"]["thresholds"]].count(True) == 1


def test_unanswerable_queries_with_a_relevant_judgment_are_refused(tmp_path: Path) -> None:
    for name in ("queries.jsonl", "qrels.tsv"):
        shutil.copy(JUDGED / name, tmp_path / name)
    write_jsonl(tmp_path / "u.jsonl", [{"_id": "d01", "text": "orders database disk"}])
    done = run_cli(
        [
            "eval",
            "--config",
            str(DEMO / "nautilus.yaml"),
            "--queries",
            "queries.jsonl",
            "--judgments",
            "qrels.tsv",
            "--unanswerable",
            "u.jsonl",
        ],
        tmp_path,
        {"NAUTILUS_DATA_DIR": str(tmp_path / "data")},
    )
    assert done.returncode == 1
    assert "u.jsonl: 1 unanswerable queries have a relevant judgment ('d01')" in done.stderr


def _row(p: float, false: int, off: int, judged: int = 400) -> AbstainScored:
    return AbstainScored(
        p,
        False,
        false,
        judged,
        off,
        50,
        np.zeros(1),
        (0.0, 0.0, 0.0),
        at_most_p_value(false, judged, 0.02),
    )


def test_the_threshold_that_passes_and_abstains_most_is_chosen() -> None:
    rows = [_row(0.1, 0, 30), _row(0.2, 1, 45), _row(0.3, 30, 50)]
    off = AbstainScored(None, True, 0, 400, 0, 50, np.zeros(1), (0.0, 0.0, 0.0))
    table = AbstainTable([off, *rows], 0.02, [], [], [])
    p_values = [r.p_value for r in table.tested]
    rejected = holm(p_values)
    assert list(rejected) == [True, True, False]  # 30 false abstains in 400: above 2%
    choose(table, rejected, len(p_values))
    assert table.recommended is rows[1]  # 45 of 50 off-topic, 1 false abstain in 400
    # through the sweep's rule: the abstain p-values are the last of the family
    rec = recommend([], abstain_p_values=p_values)
    assert rec.family == 3 and rec.abstain_rejected == (True, True, False)


def test_a_false_abstain_target_outside_0_and_1_is_an_error_naming_the_flag(
    tmp_path: Path,
) -> None:
    for name in ("queries.jsonl", "qrels.tsv"):
        shutil.copy(JUDGED / name, tmp_path / name)
    done = run_cli(
        [
            "eval",
            "--queries",
            "queries.jsonl",
            "--judgments",
            "qrels.tsv",
            *("--max-false-abstain", "2"),
        ],
        tmp_path,
        {"NAUTILUS_DATA_DIR": str(tmp_path / "data")},
    )
    assert done.returncode == 1
    assert "--max-false-abstain must be a rate between 0 and 1, got 2" in done.stderr
