"""``feedback propose`` from the logs to the proposal: the answers of one config hash and
one set of levels, the position curve and each source's usefulness, one step per source
at most, each step replayed, and (with judgments) eval's verdict on each.

Nothing here writes configuration: the result is records and a commented-out line.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from nautilus_ranking.proposal.logs import Answer
from nautilus_ranking.proposal.proposal import (
    ALPHA,
    MIN_EFFECT,
    Record,
    boosts_line,
    level_name,
    propose_step,
)
from nautilus_ranking.proposal.replay import Replay, replay
from nautilus_ranking.proposal.usefulness import (
    MIN_EXPECTED,
    MIN_IMPRESSIONS,
    RESAMPLES,
    SEED,
    Usefulness,
    usefulness,
)

if TYPE_CHECKING:
    from nautilus_ranking.evaluation.evaluate import EvalResult
    from nautilus_ranking.evaluation.sweep import Scored


@dataclass(frozen=True)
class Rules:
    """What counts as evidence and as a step (the flags of ``feedback propose``)."""

    resamples: int = RESAMPLES
    seed: int = SEED
    alpha: float = ALPHA
    min_effect: float = MIN_EFFECT
    min_impressions: int = MIN_IMPRESSIONS
    min_expected: float = MIN_EXPECTED


@dataclass(frozen=True)
class Proposal:
    """Every source's record, the curve they rest on and what was left out."""

    config_hash: str
    levels: dict[str, str | None]  # the levels the answers were ranked under
    window: tuple[str, str]  # the first and last answer's time
    answers: int
    usefulness: Usefulness
    records: list[Record]
    joint: Replay | None  # every step together, replayed
    left_out: Counter[str] = field(default_factory=Counter)  # why -> answers
    judged: bool = False  # whether eval's check ran

    @property
    def changes(self) -> list[Record]:
        return [r for r in self.records if r.step.changes]

    def proposed_levels(self) -> dict[str, str | None]:
        out = dict(self.levels)
        out.update({r.step.source: r.step.proposed for r in self.changes})
        return out

    def passes(self) -> bool:
        """Every check of every change: evidence, replay (alone and together) and eval."""
        return (
            bool(self.changes)
            and self.judged
            and all(r.replay_passes and r.eval_passes for r in self.changes)
            and self.joint is not None
            and self.joint.gain >= 0
        )


def one_levels_set(answers: Sequence[Answer]) -> tuple[list[Answer], dict[str, str | None], int]:
    """The answers ranked under the most common levels (a profile may set others), those
    levels, and how many answers were under other levels."""
    if not answers:
        return [], {}, 0
    key = Counter(tuple(sorted(a.levels.items())) for a in answers).most_common(1)[0][0]
    kept = [a for a in answers if tuple(sorted(a.levels.items())) == key]
    return kept, dict(key), len(answers) - len(kept)


def propose(
    answers: Sequence[Answer],
    config_hash: str,
    rules: Rules = Rules(),
    on_step: Callable[[int], None] | None = None,
) -> Proposal:
    """The proposal from ``answers`` (all of one config hash)."""
    kept, levels, other = one_levels_set(answers)
    left_out: Counter[str] = Counter()
    if other:
        left_out["ranked under other levels (another profile's)"] = other
    found = usefulness(
        kept, rules.resamples, rules.seed, rules.min_impressions, rules.min_expected, on_step
    )
    profiles = found.impressions.profiles
    records = []
    for evidence in found.sources:
        step = propose_step(evidence, levels.get(evidence.source), rules.alpha, rules.min_effect)
        gain = None
        if step.changes:
            gain = replay(kept, {step.source: step.proposed}, found.curve, profiles).gain
        records.append(Record(step, evidence, gain))
    changes = {r.step.source: r.step.proposed for r in records if r.step.changes}
    joint = replay(kept, changes, found.curve, profiles) if changes else None
    times = sorted(a.timestamp for a in kept)
    window = (times[0], times[-1]) if times else ("", "")
    return Proposal(config_hash, levels, window, len(kept), found, records, joint, left_out)


def with_eval(proposal: Proposal, result: EvalResult) -> Proposal:
    """``proposal`` with eval's sweep on each proposed level: its nDCG change and the
    hijack check, which decide."""
    by_alternative: dict[str, dict[str | None, Scored]] = {}
    for s in result.scored:
        if s.alternative.kind == "boost" and s.alternative.source:
            by_alternative.setdefault(s.alternative.source.lower(), {})[s.alternative.level] = s
    records = []
    for record in proposal.records:
        step = record.step
        if not step.changes:
            records.append(record)
            continue
        scored = by_alternative.get(step.source, {}).get(level_name(step.proposed))
        if scored is None or scored.delta is None:
            note = f"eval measured no {step.source}:{level_name(step.proposed)}"
            records.append(replace(record, eval_note=note))
            continue
        worst = scored.worst_kept
        note = f"{worst[0]} keeps {worst[1]:.2f} of its recall@{result.k}" if worst else ""
        checked = replace(record, eval_delta=scored.delta, eval_safe=scored.safe, eval_note=note)
        records.append(checked)
    return replace(proposal, records=records, judged=True)


def paste_lines(proposal: Proposal, order: list[str]) -> list[str]:
    """The one ``NAUTILUS_SOURCE_BOOSTS`` line, commented out unless every check passes,
    after comments saying why."""
    if not proposal.changes:
        return ["# feedback proposal: keep the current levels (no source clearly off)."]
    steps = ", ".join(
        f"{r.step.source} {level_name(r.step.current)} -> {level_name(r.step.proposed)}"
        for r in proposal.changes
    )
    line = boosts_line(proposal.proposed_levels(), order)
    if proposal.passes():
        return [f"# feedback proposal: {steps}; replayed and checked on judgments.", line]
    return [f"# feedback proposal: {steps}", *_not_yet(proposal), f"# {line}"]


def _not_yet(proposal: Proposal) -> list[str]:
    """Why the line is commented out."""
    out = []
    if not proposal.judged:
        out.append(
            "# not for pasting yet: no judged queries checked it (--queries and --judgments "
            "run eval's sweep and hijack check on it, and judgments decide)"
        )
    for r in proposal.changes:
        if r.replay_gain is not None and r.replay_gain < 0:
            out.append(f"# not for pasting: {r.step.source}'s step loses uses in the replay")
        if proposal.judged and not r.eval_passes:
            why = r.eval_note or "worse nDCG"
            out.append(f"# not for pasting: {r.step.source}'s step fails eval ({why})")
    if proposal.joint is not None and proposal.joint.gain < 0:
        out.append("# not for pasting: the steps together lose uses in the replay")
    return out
