"""A recommendation is earned across every alternative of the run: Holm's correction over
the paired sign-flip p-values (cuts included); below the documented minimum of judged
queries the line is printed commented out, with the reason and how many more queries the
gain it saw needs; warnings that change what to do are ``# warning:`` lines on stdout.
"Never seen" says what a run can know: no source returned those ids."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from test_eval_knobs_in_force import cli, notes

from nautilus_ranking.evaluation.alternatives import Alternative
from nautilus_ranking.evaluation.familywise import (
    FAMILYWISE_ALPHA,
    holm,
    queries_needed,
    recommend,
    sign_flip_p_value,
)
from nautilus_ranking.evaluation.sweep import Scored, compare

SOURCES = ["fts", "sql"]


def test_holm_rejects_step_down_until_the_first_p_value_over_its_bar() -> None:
    # alpha 0.025, m = 3: the bars are 0.025/3 = 0.00833, 0.025/2 = 0.0125, 0.025/1
    assert FAMILYWISE_ALPHA == 0.025
    assert holm([0.01, 0.001, 0.03]).tolist() == [True, True, False]
    # 0.013 misses the second bar (0.0125): 0.014 after it stands too, though it is
    # below 0.025 (step-down: the first p-value over its bar stops the rejections)
    assert holm([0.013, 0.0001, 0.014]).tolist() == [False, True, False]
    assert holm([]).tolist() == []


def test_the_p_value_is_the_share_of_sign_flipped_means_as_large() -> None:
    assert sign_flip_p_value(np.zeros(20)) == 1.0  # no difference: never evidence
    # every one of 20 flips would have to come out +: 2^-20, so none of 10,000 does
    assert sign_flip_p_value(np.full(20, 0.1)) == pytest.approx(1 / 10_001)
    noisy = np.array([0.2, -0.2] * 10)
    assert 0.3 < sign_flip_p_value(noisy) < 0.7
    # six queries better, fourteen unchanged, none worse: no bootstrap mean falls to zero
    # or below, but six fair coins all come out + once in 2^6 = 64
    sparse = np.array([0.06] * 6 + [0.0] * 14)
    assert sign_flip_p_value(sparse) == pytest.approx(1 / 64, abs=0.003)


def scored(name: str, ndcg: np.ndarray, kind: str = "idf") -> Scored:
    alternative = Alternative(name, kind, None, (("NAUTILUS_RANKING_IDF", "true"),))
    share = dict.fromkeys(SOURCES, 0.5)
    return Scored(alternative, ndcg, ndcg, ndcg, share, dict.fromkeys(SOURCES, 0.3))


def winners_curse(alternatives: int) -> list[Scored]:
    """A small gain, +0.013 on 14 queries (95% CI +0.003 to +0.022, p 0.018), among
    ``alternatives - 1`` others that change nothing."""
    current = scored("current", np.full(14, 0.5), kind="current")
    gain = np.full(14, 0.5) + np.array([0.04, -0.01, 0.03, 0.02, -0.01, 0.02, 0.0] * 2)
    entries = [current, scored("wiki:medium", gain)]
    entries += [scored(f"same {i}", np.full(14, 0.5)) for i in range(alternatives - 1)]
    compare(entries, {})
    return entries


def test_one_alternative_passes_at_its_level_many_are_corrected() -> None:
    alone = winners_curse(1)
    assert alone[1].delta is not None and alone[1].delta[1] > 0  # its own CI clears zero
    assert recommend(alone).best is alone[1]
    many = winners_curse(20)
    rec = recommend(many)
    assert rec.best is None
    assert "none survives the correction for 20 alternatives" in rec.reason
    assert recommend(winners_curse(2), extra_p_values=[1.0] * 18).best is None  # cuts count
    # what passes is said of every row, for the table: the gain alone, none of the many
    assert recommend(alone).passed == {"wiki:medium"} and rec.passed == frozenset()


def test_the_reference_is_one_of_the_family_and_said_to_pass() -> None:
    entries = winners_curse(1)
    reference = scored("reference (ranked, defaults)", np.full(14, 0.6))
    compare([entries[0], reference], {})
    rec = recommend(entries, reference=reference)
    assert rec.family == 2 and rec.passed == {"wiki:medium", "reference (ranked, defaults)"}


def test_queries_needed_for_the_gain_seen() -> None:
    # n = ((z_{1-alpha/m} + z_{0.8}) * sd / mean)^2: mean 0.05, sd 0.1, m = 10
    diffs = np.array([0.15, -0.05] * 10)  # mean 0.05, sd 0.1026 (n - 1)
    z = 2.807 + 0.8416  # z at 1 - 0.0025 and at 0.8
    expected = math.ceil((z * float(np.std(diffs, ddof=1)) / 0.05) ** 2)
    assert queries_needed(diffs, 10) == expected == 57
    assert queries_needed(np.array([-0.1, 0.0]), 10) is None  # no gain: no number helps


def test_below_the_minimum_the_line_is_commented_out_with_its_reason(tmp_path: Path) -> None:
    run = cli(tmp_path, *notes(tmp_path), "--recommend")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert all(line.startswith("#") for line in lines), run.stdout  # nothing to paste blindly
    assert "# NAUTILUS_RANKING_TOP_K=10" in lines
    [why] = [line for line in lines if line.startswith("# not for pasting yet:")]
    assert why.startswith("# not for pasting yet: 20 judged queries, fewer than the 30 "), why
    assert "10 more judged queries (30 in all; docs/eval.md)" in why
    # the minimum is its own reason: the line does not read as failing the correction,
    # which the recommendation above it says the gain passes
    assert "passed the correction, on too few queries to rely on" in why
    assert "clear the correction" not in run.stdout
    assert any(
        line.startswith("# warning: 20 judged queries, fewer than docs/eval.md asks for")
        for line in lines
    ), run.stdout
    assert "fewer than docs/eval.md" not in run.stderr  # said where the line to copy is


def test_the_sweep_table_marks_the_rows_that_pass_the_correction(tmp_path: Path) -> None:
    run = cli(tmp_path, *notes(tmp_path), "--sweep")
    assert run.returncode == 0, run.stderr
    table = run.stdout.split("\n\n")[1].splitlines()
    assert "[95% CI]  Holm  " in table[0], table[0]  # beside the gain it judges
    at = table[0].index("Holm")
    holm = {line.split("  ")[0].strip(): line[at : at + 4].strip() for line in table[1:]}
    assert holm["current (passthrough)"] == "—"
    passed = [name for name, mark in holm.items() if mark == "pass"]
    assert set(holm.values()) <= {"—", "pass", ""}
    assert passed and "IDF on" in passed, run.stdout
    as_json = cli(tmp_path, *notes(tmp_path), "--sweep", "--json")
    assert set(json.loads(as_json.stdout)["recommendation"]["passed"]) == set(passed)
    note = " ".join(run.stdout.split())
    assert "Holm: pass = the gain passes Holm's correction for the run's 30 alternatives" in note


def test_never_seen_says_no_source_returned_them(tmp_path: Path) -> None:
    args = notes(tmp_path)
    with (tmp_path / "j.tsv").open("a") as handle:
        handle.write("q0\tghost-0\t1\n")
    run = cli(tmp_path, *args)
    assert run.returncode == 0, run.stderr
    line = next(x for x in run.stdout.splitlines() if x.startswith("never seen"))
    assert line.startswith(
        "never seen: 1 of 21 judged-relevant ids no source returned for any query "
        "(whether a source holds them, this run cannot tell)"
    ), line
    assert "no source holds them" not in run.stdout
