"""The proposal: one step at most, none by default, and the line to paste."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from simulated_feedback import simulate

from nautilus_ranking.proposal.logs import Answer, Shown, read_logs
from nautilus_ranking.proposal.proposal import LADDER, propose_step
from nautilus_ranking.proposal.propose import Rules, paste_lines, propose
from nautilus_ranking.proposal.usefulness import SourceUsefulness


def _row(ratio: float, p_holm: float | None = 0.001, enough: bool = True) -> SourceUsefulness:
    return SourceUsefulness(
        "a", 100, 1000, 300, 250.0, ratio, ratio - 0.05, ratio + 0.05, 0.001, p_holm, enough
    )


def test_the_ladder_is_the_boost_levels_with_none_between() -> None:
    assert LADDER == ("-high", "-medium", "-low", None, "low", "medium", "high")


@pytest.mark.parametrize(
    ("current", "ratio", "proposed"),
    [(None, 1.4, "low"), (None, 0.6, "-low"), ("low", 3.0, "medium"), ("-low", 1.3, None),
     ("high", 1.5, "high"), ("-high", 0.5, "-high")],
)  # fmt: skip
def test_one_step_the_way_the_ratio_points(
    current: str | None, ratio: float, proposed: str | None
) -> None:
    assert propose_step(_row(ratio), current).proposed == proposed


def test_no_change_without_clear_evidence() -> None:
    assert not propose_step(_row(1.5, enough=False, p_holm=None), None).changes
    assert not propose_step(_row(1.5, p_holm=0.2), None).changes
    assert not propose_step(_row(1.01), None).changes  # significant, too small to act on
    assert not propose_step(_row(1.5), "2.5").changes  # not on the ladder


def test_an_unbiased_log_proposes_no_change(tmp_path: Path) -> None:
    simulate(tmp_path, 1500, [0.9, 0.5, 0.3, 0.3, 0.5, 0.8], {"a": 0.4, "b": 0.4, "c": 0.4})
    proposal = propose(read_logs(tmp_path).answers, "h", Rules(resamples=200))
    assert not proposal.changes
    assert paste_lines(proposal, ["a", "b", "c"]) == [
        "# feedback proposal: keep the current levels (no source clearly off)."
    ]


def test_the_line_stays_commented_out_without_judgments(tmp_path: Path) -> None:
    simulate(
        tmp_path, 1500, [0.9, 0.5, 0.3, 0.3, 0.5, 0.8], {"a": 0.4, "b": 0.4, "good": 0.7},
        levels={"b": "low"},
    )  # fmt: skip
    proposal = propose(read_logs(tmp_path).answers, "h", Rules(resamples=200))
    assert [(r.step.source, r.step.proposed) for r in proposal.changes] == [("good", "low")]
    lines = paste_lines(proposal, ["good", "a", "b"])
    assert lines[-1] == "# NAUTILUS_SOURCE_BOOSTS=good:low,b:low"
    assert not proposal.passes()
    assert all(line.startswith("#") for line in lines)


def test_a_source_only_ever_in_its_own_slots_is_not_enough_evidence() -> None:
    """Shown only at the last two positions, which no other source shares, a source's
    usefulness cannot be told from those positions' attention: no step either way."""
    rng = np.random.default_rng(0)
    answers = []
    for n in range(800):
        rows = [Shown(k, "a" if k % 2 else "b", f"{n}-{k}", {}) for k in range(1, 5)]
        rows += [Shown(k, "tail", f"{n}-{k}", {}) for k in (5, 6)]
        used = {s.position for s in rows if rng.random() < (0.2 if s.source == "tail" else 0.5)}
        answers.append(Answer(f"q{n}", "", None, "h", {}, rows, used))
    proposal = propose(answers, "h", Rules(resamples=50))
    tail = next(r for r in proposal.records if r.step.source == "tail")
    assert not tail.step.changes and not tail.evidence.enough
    assert tail.step.reason.startswith("not enough evidence: 0% of its rows")


def test_a_log_with_no_use_proposes_nothing_and_draws_a_flat_curve(tmp_path: Path) -> None:
    simulate(tmp_path, 300, [0.0, 0.0, 0.0], {"a": 0.5, "b": 0.5})
    proposal = propose(read_logs(tmp_path).answers, "h", Rules(resamples=20))
    assert not proposal.changes
    assert proposal.usefulness.curve.tolist() == [[0.0, 0.0, 0.0]]
