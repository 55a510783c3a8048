"""``nautilus-ranking feedback propose`` as a real process."""

from __future__ import annotations

import json
from pathlib import Path

from cli_process import run_nautilus
from simulated_feedback import CONFIG_HASH, simulate

THETA = [0.9, 0.5, 0.3, 0.3, 0.5, 0.8]


def _logs(tmp_path: Path) -> Path:
    folder = tmp_path / "feedback"
    simulate(folder, 1200, THETA, {"a": 0.4, "b": 0.4, "good": 0.7})
    with (folder / "ubi_events-1-20261207T100000Z.jsonl").open("a") as handle:
        handle.write("{broken line\n")
    return folder


def test_propose_prints_the_curve_records_and_a_commented_line(tmp_path: Path) -> None:
    folder = _logs(tmp_path)
    plot = tmp_path / "curve.html"
    args = ("feedback", "propose", "--logs", str(folder), "--config-hash", CONFIG_HASH)
    done = run_nautilus(*args, "--resamples", "200", "--plot", str(plot))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "feedback_log_line_skipped" in done.stderr  # the broken line, warned and skipped
    out = done.stdout
    assert "use rate by position" in out
    assert "good           none -> low" in out
    assert out.rstrip().endswith("# NAUTILUS_SOURCE_BOOSTS=good:low")
    assert "<svg" in plot.read_text()


def test_propose_json_is_the_same_each_run(tmp_path: Path) -> None:
    folder = _logs(tmp_path)
    args = ("feedback", "propose", "--logs", str(folder), "--config-hash", CONFIG_HASH, "--json")
    first = run_nautilus(*args, "--resamples", "100")
    again = run_nautilus(*args, "--resamples", "100")
    assert first.returncode == 0, first.stderr
    assert first.stdout == again.stdout
    report = json.loads(first.stdout)
    record = next(r for r in report["records"] if r["source"] == "good")
    assert (record["from"], record["to"], record["config_hash"]) == ("none", "low", CONFIG_HASH)
    assert (
        record["interval"][0] > 1 and record["holm_p"] < 0.05 and record["replay_gain"] is not None
    )
    assert len(report["position_curve"]["(global knobs)"]) == len(THETA)
    assert report["left_out"] == {"lines skipped: not a JSON object": 1}


def test_answers_under_another_config_hash_are_not_read(tmp_path: Path) -> None:
    folder = _logs(tmp_path)
    done = run_nautilus("feedback", "propose", "--logs", str(folder), "--resamples", "50")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "no answers under the current config hash" in done.stderr
    assert f"{CONFIG_HASH} (1200 answers)" in done.stderr


def test_no_logs_is_one_clear_line(tmp_path: Path) -> None:
    done = run_nautilus("feedback", "propose", "--logs", str(tmp_path / "nowhere"))
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith("nautilus-ranking: no feedback logs:")


JUDGED = Path(__file__).parents[1] / "data" / "demo_judgments"


def test_judgments_decide_through_eval_s_sweep(tmp_path: Path) -> None:
    folder = tmp_path / "feedback"
    gamma = {"tickets": 0.4, "graph": 0.4, "runbooks": 0.7, "postmortems": 0.4}
    # seed 1: seed 0 draws graph's uses 10% short of the others' (bootstrap p 0.01), a
    # step the 5% familywise rate allows; this test is about runbooks' step
    simulate(folder, 1200, THETA, gamma, seed=1)
    done = run_nautilus(
        "feedback", "propose", "--logs", str(folder), "--config-hash", CONFIG_HASH,
        "--resamples", "100", "--json",
        "--queries", str(JUDGED / "queries.jsonl"), "--judgments", str(JUDGED / "qrels.tsv"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["judged"] is True
    record = next(r for r in report["records"] if r["source"] == "runbooks")
    assert (record["from"], record["to"]) == ("none", "low")
    mean, low, high = record["eval_delta"]  # eval's nDCG@10 change for runbooks:low
    assert low <= mean <= high and isinstance(record["eval_safe"], bool)
    passes = mean >= 0 and record["eval_safe"] and record["replay_gain"] >= 0
    assert report["passes"] is passes
    assert report["lines"][-1] == ("" if passes else "# ") + "NAUTILUS_SOURCE_BOOSTS=runbooks:low"
