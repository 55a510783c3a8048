"""``eval --json``: the whole report as one JSON object, versioned.

``version`` says which shape this is; CHANGELOG.md says what changed in each. 2: every
declared knob in ``current_settings`` as ``{value, origin, set}``; ``results`` lists the
rows of the text report (passthrough and the reference included) with ``repeats`` and
``p_value``; ``recommendation`` says the size of the family it was corrected for, whether
its lines are commented out, and the lines themselves; ``notes``. ``profile``, only
with ``--profile``: the ranking profile the knobs were resolved with. ``abstain`` (null
without a sweep or unanswerable queries) and ``as_of`` were added within version 2.
"""

from __future__ import annotations

import math
from typing import Any

from nautilus_ranking.evaluation.abstain import AbstainTable
from nautilus_ranking.evaluation.cuts import CutScored
from nautilus_ranking.evaluation.evaluate import EvalResult
from nautilus_ranking.evaluation.familywise import (
    ENOUGH_QUERIES,
    FAMILYWISE_ALPHA,
    Recommendation,
)
from nautilus_ranking.evaluation.recommend import recommendation_lines
from nautilus_ranking.evaluation.report import listed
from nautilus_ranking.evaluation.sweep import HIJACK_FLOOR, Scored

#: The JSON answer's version (1: before it had one); CHANGELOG.md says what changed.
JSON_VERSION = 2


def _scored_dict(entry: Scored) -> dict[str, Any]:
    alt = entry.alternative
    return {
        "name": alt.name,
        "kind": alt.kind,
        "source": alt.source,
        "level": alt.level,
        "same_as_current": alt.same_as_current,
        "env": dict(alt.env),
        "ndcg": _num(entry.ndcg.mean()),
        "recall": _num(entry.recall.mean()),
        "mrr": _num(entry.rr.mean()),
        "repeats": None if entry.repeats is None else _num(entry.repeats.mean()),
        "p_value": entry.p_value if entry.delta is not None else None,
        "delta_ndcg": None
        if entry.delta is None
        else {"mean": entry.delta[0], "ci_low": entry.delta[1], "ci_high": entry.delta[2]},
        "share": entry.share,
        "source_recall": entry.source_recall,
        "recall_kept": entry.kept,
        "recall_kept_reference": entry.reference,
        "safe": entry.safe,
    }


def _num(value: float) -> float:
    return float(value) if math.isfinite(value) else 0.0


def json_report(result: EvalResult) -> dict[str, Any]:
    cov = result.coverage
    rec: Recommendation | None = result.recommendation
    lines = recommendation_lines(result)
    return {
        "version": JSON_VERSION,
        "k": result.k,
        "id_field": result.id_field,
        "sources": result.sources,
        **({"profile": result.profile} if result.profile is not None else {}),
        "budget": (
            {
                "max_tokens": result.delivery.max_tokens,
                "counted_as": result.delivery.counting,
            }
            if result.delivery is not None
            else None
        ),
        "current_settings": {
            k.knob.variable: {"value": k.value, "origin": k.origin, "set": k.set}
            for k in result.knobs
        },
        "ranking_enabled": result.ranking_enabled,
        "formats": {"queries": result.queries_format, "judgments": result.judgments_format},
        "coverage": {
            "queries_in_file": cov.queries_in_file,
            "evaluated": cov.evaluated,
            "relevant_total": cov.relevant_total,
            "relevant_returned": cov.relevant_returned,
            "ceiling_recall": cov.ceiling_recall,
            "not_returned": cov.not_returned,
            "never_seen": cov.never_seen,
            "rows_total": cov.rows_total,
            "rows_without_id": cov.rows_without_id,
            "id_field_suspect": cov.id_field_suspect,
            "unjudged_queries": cov.unjudged,
            "no_relevant_queries": cov.no_relevant,
            "judged_unknown_queries": cov.judged_unknown_query,
            "source_errors": cov.errors,
        },
        "results": [_scored_dict(s) for s in listed(result)],
        "hijack_references": {sid: _scored_dict(r) for sid, r in result.references.items()},
        "recall_floor": HIJACK_FLOOR,
        "recommendation": None
        if rec is None
        else {
            "env": dict(rec.best.alternative.env) if rec.best else None,
            "name": rec.best.alternative.name if rec.best else None,
            "qualifying": [s.alternative.name for s in rec.qualifying],
            # every row whose gain passes the correction, safe or not (the table's Holm)
            "passed": [
                s.alternative.name for s in listed(result) if s.alternative.name in rec.passed
            ],
            "reason": rec.reason,
            "alternatives": rec.family,
            "correction": (
                f"holm over sign-flip p-values, familywise {FAMILYWISE_ALPHA:g} one-sided"
            ),
            # below the minimum, or (with --profile) a change no profile can make
            "commented_out": rec.best is not None
            and (cov.evaluated < ENOUGH_QUERIES or not any(_assigns(x) for x in lines)),
            "lines": lines,
        },
        "notes": result.notes,
        "seconds": {"fetch": result.fetch_seconds, "rank": result.rank_seconds},
        "relevance_cut": [_cut_dict(c) for c in result.cuts],
        "as_of": result.as_of,
        "abstain": None if result.abstain is None else abstain_dict(result.abstain),
    }


def abstain_dict(table: AbstainTable) -> dict[str, Any]:
    """The abstain table: per threshold, counts, rates with intervals, nDCG lost."""

    def rate(value: tuple[float, float, float] | None) -> dict[str, float] | None:
        return (
            None if value is None else dict(zip(("rate", "ci_low", "ci_high"), value, strict=True))
        )

    return {
        "max_false_abstain": table.target,
        "recommended": None if table.recommended is None else table.recommended.p,
        "reason": table.reason,
        "thresholds": [
            {
                "min_confidence": r.p,
                "current": r.current,
                "off_topic_abstains": r.off_topic_abstains,
                "unanswerable": r.unanswerable,
                "off_topic_abstain": rate(r.off_topic_rate),
                "false_abstains": r.false_abstains,
                "judged": r.judged,
                "false_abstain": rate(r.false_rate),
                "ndcg": _num(r.ndcg.mean()),
                "ndcg_lost": dict(zip(("mean", "ci_low", "ci_high"), r.lost, strict=True)),
                "p_value": r.p_value,
            }
            for r in table.rows
        ],
        "confidence": {
            "judged": table.confidence_judged,
            "unanswerable": table.confidence_unanswerable,
        },
    }


def _assigns(line: str) -> bool:
    """Whether a recommendation line sets a variable (is not a comment)."""
    return line.startswith("NAUTILUS_")


def _cut_dict(entry: CutScored) -> dict[str, Any]:
    return {
        "setting": entry.setting,
        "current": entry.current,
        "rows_handed_over": _num(entry.handed.mean()),
        "irrelevant_rows": _num(entry.irrelevant.mean()),
        "recall": _num(entry.recall.mean()),
        "ndcg": _num(entry.ndcg.mean()),
    }
