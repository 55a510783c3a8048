"""``feedback propose``'s output: the position curve, a record per source and the line to
paste, as text for a person or as one JSON object."""

from __future__ import annotations

from typing import Any

from nautilus_ranking.proposal.logs import FeedbackLog
from nautilus_ranking.proposal.proposal import Record, level_name
from nautilus_ranking.proposal.propose import Proposal, paste_lines

_BAR = 30


def profile_label(profile: str | None) -> str:
    return "(global knobs)" if profile is None else profile


def left_out(log: FeedbackLog, proposal: Proposal) -> dict[str, int]:
    """What the proposal did not read, and why (answers, events or lines)."""
    out = {f"lines skipped: {why}": n for why, n in sorted(log.skipped.items())}
    if log.duplicates:
        out["events repeated (read once)"] = log.duplicates
    others = {h: n for h, n in log.hashes.items() if h != proposal.config_hash}
    if others:
        out[f"answers under other config hashes ({', '.join(sorted(others))})"] = sum(
            others.values()
        )
    out.update({f"answers {why}": n for why, n in proposal.left_out.items()})
    return out


def record_json(record: Record, proposal: Proposal) -> dict[str, Any]:
    """One source's proposal record."""
    e = record.evidence
    return {
        "source": record.step.source,
        "from": level_name(record.step.current),
        "to": level_name(record.step.proposed),
        "changes": record.step.changes,
        "reason": record.step.reason,
        "ratio": e.ratio,
        "interval": [e.low, e.high],
        "uses": e.uses,
        "expected_uses": e.expected,
        "impressions": e.impressions,
        "answers": e.answers,
        "p_value": e.p_value,
        "holm_p": e.p_holm,
        "enough_evidence": e.enough,
        "window": list(proposal.window),
        "config_hash": proposal.config_hash,
        "replay_gain": record.replay_gain,
        "eval_delta": list(record.eval_delta) if record.eval_delta is not None else None,
        "eval_safe": record.eval_safe,
        "eval_note": record.eval_note or None,
    }


def json_report(log: FeedbackLog, proposal: Proposal, order: list[str]) -> dict[str, Any]:
    u = proposal.usefulness
    return {
        "config_hash": proposal.config_hash,
        "window": list(proposal.window),
        "answers": proposal.answers,
        "levels": {s: level_name(v) for s, v in sorted(proposal.levels.items())},
        "position_curve": {
            profile_label(p): [float(x) for x in u.curve[i]]
            for i, p in enumerate(u.impressions.profiles)
        },
        "resamples": u.resamples,
        "seed": u.seed,
        "records": [record_json(r, proposal) for r in proposal.records],
        "joint_replay_gain": proposal.joint.gain if proposal.joint is not None else None,
        "judged": proposal.judged,
        "passes": proposal.passes(),
        "lines": paste_lines(proposal, order),
        "left_out": left_out(log, proposal),
    }


def text_report(log: FeedbackLog, proposal: Proposal, order: list[str]) -> str:
    u = proposal.usefulness
    first, last = proposal.window
    lines = [
        "feedback proposal (offline: it changes no configuration)",
        f"{proposal.answers} answers under config hash {proposal.config_hash}, {first} to {last}; "
        f"{u.resamples} bootstrap resamples of whole answers (seed {u.seed})",
    ]
    lines += [f"left out: {n} {why}" for why, n in left_out(log, proposal).items()]
    for i, profile in enumerate(u.impressions.profiles):
        lines += ["", f"use rate by position, {profile_label(profile)} (a typical source's row):"]
        top = float(u.curve[i].max())
        scale = _BAR / top if top > 1e-9 else 0.0  # no uses at all: no bars
        for k, rate in enumerate(u.curve[i], start=1):
            lines.append(f"  {k:>3}  {rate:6.3f}  {'#' * round(scale * float(rate))}")
    lines += ["", _header()]
    lines += [_record_line(r) for r in proposal.records]
    if proposal.joint is not None:
        lines.append(f"every step together, replayed: {proposal.joint.gain:+.1%} uses")
    return "\n".join([*lines, "", *paste_lines(proposal, order)])


def _header() -> str:
    return (
        f"{'source':<14} {'level':<16} {'ratio [95% CI]':<22} {'uses/expected':<15} "
        f"{'shown':>7} {'Holm p':>7} {'replay':>7} {'eval nDCG':>10}  why"
    )


def _record_line(r: Record) -> str:
    e = r.evidence
    step = f"{level_name(r.step.current)} -> {level_name(r.step.proposed)}"
    holm = f"{e.p_holm:.3g}" if e.p_holm is not None else "-"
    replay = f"{r.replay_gain:+.1%}" if r.replay_gain is not None else "-"
    evaluated = f"{r.eval_delta[0]:+.3f}" if r.eval_delta is not None else "-"
    if r.eval_safe is False:
        evaluated += " hijack"
    return (
        f"{r.step.source:<14} {step:<16} {e.ratio:5.2f} [{e.low:.2f}, {e.high:.2f}]"
        f"{'':<6} {e.uses:>6}/{e.expected:<8.0f} {e.impressions:>7} {holm:>7} {replay:>7} "
        f"{evaluated:>10}  {r.step.reason}"
    )
