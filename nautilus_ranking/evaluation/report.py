"""Rendering an :class:`EvalResult`: a table for a terminal, markdown, JSON, and a plot."""

from __future__ import annotations

import importlib
import math
import textwrap
from pathlib import Path
from typing import Any

from nautilus_ranking.evaluation.cuts import CutScored
from nautilus_ranking.evaluation.evaluate import EvalResult
from nautilus_ranking.evaluation.recommend import recommendation_lines
from nautilus_ranking.evaluation.sweep import HIJACK_FLOOR, Recommendation, Scored


def _setting(entry: Scored) -> str:
    alt = entry.alternative
    return alt.name + (" (= current)" if alt.same_as_current else "")


def _current_line(result: EvalResult) -> str:
    if not result.ranking_enabled:
        return "passthrough (no ranking knob set)"
    shown = []
    for name, value in result.settings.items():
        if value in (None, False, {}):
            continue
        if isinstance(value, dict):
            value = ",".join(f"{k}:{v}" for k, v in value.items())
        elif isinstance(value, bool):
            value = str(value).lower()
        shown.append(f"{name}={value}")
    return " ".join(shown)


def _listed(result: EvalResult) -> list[Scored]:
    """The current settings, then — when they are passthrough — the unboosted ranking the
    boosts are checked against (not deployable alone: no knob selects it), then the sweep."""
    shown = result.scored[:1]
    if not result.ranking_enabled:
        refs = {id(r): r for r in result.references.values() if r is not result.scored[0]}
        shown += list(refs.values())
    return shown + result.scored[1:]


def _rows(result: EvalResult, wide: bool = True) -> tuple[list[str], list[list[str]]]:
    """The sweep's table; ``wide`` heads each column in full (the compact heads of the
    terminal table are explained by its note)."""
    k = result.k
    head = ["setting", f"nDCG@{k}", f"recall@{k}", "MRR", f"Δ nDCG@{k} [95% CI]"]
    head += [f"{sid} share" if wide else sid for sid in result.sources]
    head += [f"others' recall@{k} kept (worst)" if wide else "kept (worst)"]
    rows = []
    for entry in _listed(result):
        delta = (
            "—"
            if entry.delta is None
            else f"{entry.delta[0]:+.3f} [{entry.delta[1]:+.3f}, {entry.delta[2]:+.3f}]"
        )
        row = [
            _setting(entry),
            f"{entry.ndcg.mean():.3f}",
            f"{entry.recall.mean():.3f}",
            f"{entry.rr.mean():.3f}",
            delta,
        ]
        row += [f"{entry.share.get(sid, 0.0):.2f}" for sid in result.sources]
        worst = entry.worst_kept
        if entry.alternative.kind != "boost":
            row.append("—")
        elif worst is None:
            row.append("n/a (none had relevant rows)")
        else:
            flag = "" if worst[1] >= HIJACK_FLOOR else f"  < {HIJACK_FLOOR:g}"
            row.append(f"{worst[1]:.2f} ({worst[0]}){flag}")
        rows.append(row)
    return head, rows


def _cut_rows(result: EvalResult) -> tuple[list[str], list[list[str]]]:
    """The relevance-cut table (a sweep's): per ``NAUTILUS_RANKING_CUT`` setting."""
    k = result.k
    head = [
        "NAUTILUS_RANKING_CUT",
        "rows handed over",
        "irrelevant rows",
        f"recall@{k}",
        f"nDCG@{k}",
    ]
    rows = [
        [
            entry.setting + (" (= current)" if entry.current else ""),
            f"{entry.handed.mean():.2f}",
            f"{entry.irrelevant.mean():.2f}",
            f"{entry.recall.mean():.3f}",
            f"{entry.ndcg.mean():.3f}",
        ]
        for entry in result.cuts
    ]
    return head, rows


_CUT_NOTE = (
    "relevance cut: each setting on the ranking above without a cut (ranking on); "
    "means per query; irrelevant = no judgment of grade >= 1"
)


#: How many judged queries docs/eval.md asks for, at least (30–50).
ENOUGH_QUERIES = 30


def _coverage_lines(result: EvalResult) -> list[str]:
    cov = result.coverage
    lines = [
        f"ceiling: the sources returned {cov.relevant_returned} of {cov.relevant_total} "
        f"judged-relevant (query, document) pairs; recall of the union of every source "
        f"{cov.ceiling_recall:.3f} (no ranking can do better)",
    ]
    if cov.evaluated < ENOUGH_QUERIES:
        lines.append(
            f"warning: {cov.evaluated} judged queries, fewer than docs/eval.md asks for "
            f"({ENOUGH_QUERIES}–50, enough to see a difference of a few points): the "
            f"intervals are wide and any recommendation rests on little"
        )
    if cov.not_returned:
        lines.append(
            f"not returned: {cov.not_returned} judged-relevant pairs no source "
            "returned for their query"
        )
    if cov.never_seen:
        lines.append(
            f"never seen: {len(cov.never_seen)} of {cov.relevant_ids} judged-relevant "
            f"ids are carried by no row of any query (as far as this run shows, no "
            f"source holds them): {cov.examples(cov.never_seen)}"
        )
    if cov.id_field_suspect and cov.judged_fields:
        lines.append(
            f"warning: no returned row carries any judged id in field "
            f"{result.id_field!r}, but field {cov.judged_fields[0]!r} does: pass "
            f"--id-field {cov.judged_fields[0]}"
        )
    elif cov.id_field_suspect:  # in no field at all: judgments made for other sources
        lines.append(
            f"warning: no returned row carries any judged id, in any field: these "
            f"judgments are for other sources than the ones evaluated "
            f"({', '.join(result.sources)}); pass --config with the sources file "
            f"they were made for"
        )
    if cov.rows_without_id:
        lines.append(
            f"rows without {result.id_field!r}: {cov.rows_without_id} of "
            f"{cov.rows_total} (they keep their place and count as not relevant)"
        )
    if cov.no_relevant or cov.unjudged:
        lines.append(
            f"not scored: {len(cov.unjudged)} queries without judgments, "
            f"{len(cov.no_relevant)} with no judgment of grade >= 1"
        )
    if cov.judged_unknown_query:
        lines.append(
            f"judged queries missing from the queries file: "
            f"{len(cov.judged_unknown_query)} "
            f"({cov.examples(cov.judged_unknown_query)})"
        )
    for sid, count in sorted(cov.errors.items()):
        lines.append(
            f"source errors: {sid} failed {count} of {cov.evaluated} queries "
            "(scored as returning nothing)"
        )
    return lines


def coverage_lines(result: EvalResult) -> list[str]:
    """What the scores rest on: the recall ceiling first, then every note and warning."""
    return _coverage_lines(result)


#: The width the terminal report's tables fit in, unless ``--wide`` is asked for.
WIDTH = 120


def _table(head: list[str], rows: list[list[str]], last_left: bool = True) -> list[str]:
    """Columns padded to their widest cell: the first left-aligned, the others right
    (the last left-aligned when ``last_left``)."""
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    last = len(head) - 1
    return [
        "  ".join(
            c.ljust(w) if i == 0 or (i == last and last_left) else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in [head, *rows]
    ]


def _sweep_table(result: EvalResult, wide: bool) -> list[str]:
    """The sweep's table; unless ``wide``, within :data:`WIDTH` columns: when the share
    columns do not fit beside the metrics, they follow in a table of their own."""
    head, rows = _rows(result, wide)
    table = _table(head, rows)
    if wide or max(map(len, table)) <= WIDTH:
        return table
    n = len(result.sources)
    metrics = _table(head[:5] + head[5 + n :], [r[:5] + r[5 + n :] for r in rows])
    shares = _table(
        ["setting", *head[5 : 5 + n]], [[r[0], *r[5 : 5 + n]] for r in rows], last_left=False
    )
    return [*metrics, "", f"share of the top {result.k}, per source:", *shares]


def text_report(result: EvalResult, wide: bool = False) -> str:
    """The report for a terminal: its tables within :data:`WIDTH` columns unless
    ``wide`` (every column in one table, headed in full)."""
    cov = result.coverage
    lines = [
        f"nautilus-ranking eval: {cov.evaluated} judged queries (queries: {result.queries_format}, "
        f"judgments: {result.judgments_format}; id field {result.id_field!r})",
        f"sources: {', '.join(result.sources)}; current settings: {_current_line(result)}",
        *_coverage_lines(result),
        "",
    ]
    lines += _sweep_table(result, wide)
    lines.append("")
    note = (
        ("shares are" if wide else "a source's column is its share")
        + f" of the top {result.k}; Δ is paired against the current settings "
        f"(bootstrap 95% CI, fixed seed); 'kept' = the other sources' recall@{result.k} "
        f"relative to the same ranking without the boost (a recommendation keeps "
        f">= {HIJACK_FLOOR:g})"
        + (
            "; 'ranked, no boost' is that ranking (ranking on, every knob at its default)"
            if not result.ranking_enabled
            else ""
        )
    )
    lines += [note] if wide else textwrap.wrap(note, WIDTH, break_on_hyphens=False)
    if result.cuts:
        head, rows = _cut_rows(result)
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
        lines += ["", *([_CUT_NOTE] if wide else textwrap.wrap(_CUT_NOTE, WIDTH))]
        lines += [
            "  ".join(
                [row[0].ljust(widths[0])]
                + [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
            )
            for row in [head, *rows]
        ]
    rec = recommendation_lines(result)
    if rec:
        lines += ["", *rec]
    lines.append(f"({result.fetch_seconds:.1f} s fetching, {result.rank_seconds:.1f} s ranking)")
    return "\n".join(lines)


def markdown_report(result: EvalResult) -> str:
    cov = result.coverage
    head, rows = _rows(result)
    lines = [
        f"**nautilus-ranking eval**: {cov.evaluated} judged queries; sources "
        f"{', '.join(result.sources)}; current settings: `{_current_line(result)}`",
        "",
    ]
    lines += [f"- {line}" for line in _coverage_lines(result)]
    lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    if result.cuts:
        head, rows = _cut_rows(result)
        lines += ["", f"{_CUT_NOTE}:", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
    rec = recommendation_lines(result)
    if rec:
        lines += ["", "```sh", *rec, "```"]
    return "\n".join(lines)


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
    return {
        "k": result.k,
        "id_field": result.id_field,
        "sources": result.sources,
        "current_settings": result.settings,
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
        "results": [_scored_dict(s) for s in result.scored],
        "hijack_references": {sid: _scored_dict(r) for sid, r in result.references.items()},
        "recall_floor": HIJACK_FLOOR,
        "recommendation": None
        if rec is None
        else {
            "env": dict(rec.best.alternative.env) if rec.best else None,
            "name": rec.best.alternative.name if rec.best else None,
            "qualifying": [s.alternative.name for s in rec.qualifying],
            "reason": rec.reason,
        },
        "seconds": {"fetch": result.fetch_seconds, "rank": result.rank_seconds},
        "relevance_cut": [_cut_dict(c) for c in result.cuts],
    }


def _cut_dict(entry: CutScored) -> dict[str, Any]:
    return {
        "setting": entry.setting,
        "current": entry.current,
        "rows_handed_over": _num(entry.handed.mean()),
        "irrelevant_rows": _num(entry.irrelevant.mean()),
        "recall": _num(entry.recall.mean()),
        "ndcg": _num(entry.ndcg.mean()),
    }


def plot(result: EvalResult, path: Path) -> None:
    """Each source's share of the top k and nDCG@k against its boost level (needs a sweep)."""
    try:
        matplotlib: Any = importlib.import_module("matplotlib")
        matplotlib.use("Agg")
        plt: Any = importlib.import_module("matplotlib.pyplot")
    except ImportError as exc:
        raise ImportError("--plot needs matplotlib: pip install 'nautilus-ranking[bench]'") from exc
    levels = ["-high", "-medium", "-low", "none", "low", "medium", "high"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for sid in result.sources:
        by_level = {
            e.alternative.level: e
            for e in result.scored
            if e.alternative.kind == "boost" and e.alternative.source == sid
        }
        if sid in result.references:
            by_level.setdefault("none", result.references[sid])
        xs = [i for i, lvl in enumerate(levels) if lvl in by_level]
        left.plot(xs, [by_level[levels[i]].share.get(sid, 0.0) for i in xs], marker="o", label=sid)
        right.plot(xs, [float(by_level[levels[i]].ndcg.mean()) for i in xs], marker="o", label=sid)
    current = float(result.scored[0].ndcg.mean())
    right.axhline(current, color="grey", linestyle="--", linewidth=1, label="current")
    for axis, title in (
        (left, f"boosted source's share of the top {result.k}"),
        (right, f"nDCG@{result.k}"),
    ):
        axis.set_xticks(range(len(levels)), levels)
        axis.set_xlabel("boost level")
        axis.set_title(title)
        axis.grid(alpha=0.3)
        axis.legend()
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=120)
    except OSError as exc:
        raise OSError(f"--plot: cannot write {path}: {exc.strerror}") from exc
    finally:
        plt.close(fig)
