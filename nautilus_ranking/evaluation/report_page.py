"""``eval --report``: the run as one static HTML page (:mod:`nautilus_ranking.report`).

The page has what the terminal report has — the coverage, the sweep's table, the
relevance cut, the abstain table and the recommendation — and four charts: nDCG@k per
setting with its 95% interval, the abstain trade-off with the recommended threshold
marked, the reliability of the confidence (each query's confidence against whether a
relevant row was in its top k; an unanswerable query never has one), and where the
first relevant row is, for the current settings and the recommended (else the best)
alternative.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

from nautilus_ranking.evaluation.abstain import AbstainTable
from nautilus_ranking.evaluation.evaluate import EvalResult
from nautilus_ranking.evaluation.recommend import recommendation_lines
from nautilus_ranking.evaluation.report import (
    abstain_note,
    abstain_rows,
    coverage_lines,
    cut_rows,
    listed,
    sweep_rows,
)
from nautilus_ranking.evaluation.sweep import Scored, bootstrap_ci
from nautilus_ranking.report import (
    Chart,
    Section,
    Table,
    Written,
    abstain_tradeoff,
    first_relevant_positions,
    reliability_diagram,
    values_with_intervals,
    write_report,
)


def write_eval_report(result: EvalResult, path: Path) -> Written:
    """Write the run's page at ``path`` (and its charts' PNGs beside it)."""
    cov = result.coverage
    summary = Section(
        "The run",
        [
            f"{cov.evaluated} judged queries (queries: {result.queries_format}, judgments: "
            f"{result.judgments_format}; id field {result.id_field!r}); sources: "
            f"{', '.join(result.sources)}.",
            f"Current settings: {result.settings_line}.",
            *([f"Ranked as of {result.as_of} (--as-of)."] if result.as_of else []),
            *coverage_lines(result),
        ],
    )
    sections = [summary, _settings_section(result)]
    if result.cuts:
        sections.append(Section("The relevance cut", tables=[Table(*cut_rows(result))]))
    if result.abstain is not None:
        sections.append(_abstain_section(result, result.abstain))
    sections.append(_first_relevant_section(result))
    lines = recommendation_lines(result)
    if lines:
        sections.append(Section("The recommendation", preformatted=["\n".join(lines)]))
    return write_report(path, f"nautilus-ranking eval: nDCG@{result.k}", sections)


def _settings_section(result: EvalResult) -> Section:
    k = result.k
    entries = listed(result)
    means = [bootstrap_ci(entry.ndcg) for entry in entries]
    chart = partial(
        values_with_intervals,
        [entry.alternative.name for entry in entries],
        [m[0] for m in means],
        [m[1] for m in means],
        [m[2] for m in means],
        baseline=float(entries[0].ndcg.mean()),
        label=f"nDCG@{k}",
        title=f"nDCG@{k} per setting, with its 95% bootstrap interval",
    )
    return Section(
        f"nDCG@{k} per setting",
        [
            "Each row re-ranks the same fetched rows; Δ is paired against the current "
            "settings (bootstrap 95% CI, fixed seed); Holm: the gain passes the "
            "correction for the run's alternatives."
        ],
        [Table(*sweep_rows(result))],
        [chart],
    )


def _abstain_section(result: EvalResult, table: AbstainTable) -> Section:
    measured = [r for r in table.rows if r.p is not None]
    with_off_topic = measured and measured[0].off_topic_rate is not None
    chosen = table.recommended.p if table.recommended is not None else None
    tradeoff = partial(
        abstain_tradeoff,
        [r.p or 0.0 for r in measured],
        [r.off_topic_abstains / r.unanswerable for r in measured] if with_off_topic else None,
        [r.false_abstains / r.judged if r.judged else 0.0 for r in measured],
        chosen,
    )
    charts: list[Callable[[], Chart]] = [tradeoff]
    predicted = [c for c in table.confidence_judged if c is not None]
    if predicted:
        observed = [
            h
            for c, h in zip(table.confidence_judged, table.hit_judged, strict=True)
            if c is not None
        ]
        off = [c for c in table.confidence_unanswerable if c is not None]
        charts.append(
            partial(
                reliability_diagram,
                [*predicted, *off],
                [*observed, *([False] * len(off))],
                title=f"reliability: confidence against a relevant row in the top {result.k}",
            )
        )
    return Section(
        "The abstain (NAUTILUS_RANKING_MIN_CONFIDENCE)",
        [abstain_note(result), *([f"Not recommended: {table.reason}."] if table.reason else [])],
        [Table(*abstain_rows(result))],
        charts,
    )


def _first_places(entry: Scored) -> list[int | None]:
    """Per query, the place of the first relevant row (None: none ranked)."""
    return [round(1 / rr) if rr > 0 else None for rr in entry.rr.tolist()]


def _first_relevant_section(result: EvalResult) -> Section:
    current = result.scored[0]
    rec = result.recommendation
    other = rec.best if rec is not None and rec.best is not None else None
    if other is None and len(result.scored) > 1:
        other = max(result.scored[1:], key=lambda s: float(s.ndcg.mean()))
    series = {current.alternative.name: _first_places(current)}
    if other is not None:
        series[other.alternative.name] = _first_places(other)
    k = result.k
    rows = [
        [
            name,
            *(str(sum(1 for p in places if p == at)) for at in range(1, k + 1)),
            str(sum(1 for p in places if p is None or p > k)),
        ]
        for name, places in series.items()
    ]
    head = ["setting", *(str(at) for at in range(1, k + 1)), f">{k} or none"]
    return Section(
        "Where the first relevant row is",
        [f"Queries by the place of their first relevant row, 1 to {k}, and below it or none."],
        [Table(head, rows)],
        [partial(first_relevant_positions, series, k)],
    )
