"""Rendering an :class:`EvalResult`: a table for a terminal, markdown, JSON, and a plot.

One module past 400 lines because the three renderings share each table's rows and
notes (one row builder each, written out as text or markdown); the HTML page is
``report/page.py``."""

from __future__ import annotations

import importlib
import textwrap
from pathlib import Path
from typing import Any

from nautilus_ranking.evaluation.evaluate import EvalResult
from nautilus_ranking.evaluation.familywise import ENOUGH_QUERIES
from nautilus_ranking.evaluation.recommend import recommendation_lines
from nautilus_ranking.evaluation.sweep import HIJACK_FLOOR, Scored


def _setting(entry: Scored) -> str:
    alt = entry.alternative
    return alt.name + (" (= current)" if alt.same_as_current else "")


def listed(result: EvalResult) -> list[Scored]:
    """The current settings, passthrough, the reference (ranking on, every knob at its
    default: not deployable alone, no knob selects it), then the rest of the sweep."""
    shown = list(result.scored)
    if result.reference is not None:
        at = 2 if len(shown) > 1 and shown[1].alternative.kind == "passthrough" else 1
        shown.insert(at, result.reference)
    return shown


def _rows(result: EvalResult, wide: bool = True) -> tuple[list[str], list[list[str]]]:
    """The sweep's table; ``wide`` heads each column in full (the compact heads of the
    terminal table are explained by its note)."""
    k = result.k
    head = ["setting", f"nDCG@{k}", f"recall@{k}", "MRR", "repeats", f"Δ nDCG@{k} [95% CI]"]
    rec = result.recommendation
    head += [] if rec is None else ["passes Holm's correction" if wide else "Holm"]
    head += [f"{sid} share" if wide else sid for sid in result.sources]
    head += [f"others' recall@{k} kept (worst)" if wide else "kept (worst)"]
    rows = []
    for entry in listed(result):
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
            "—" if entry.repeats is None else f"{entry.repeats.mean():.2f}",
            delta,
        ]
        row += [] if rec is None else [_holm(entry, rec.passed)]
        row += [f"{entry.share.get(sid, 0.0):.2f}" for sid in result.sources]
        worst = entry.worst_kept
        if entry.alternative.kind != "boost":
            row.append("—")
        elif worst is None:
            row.append("n/a (none had relevant rows)" if wide else "n/a")
        else:
            flag = "" if worst[1] >= HIJACK_FLOOR else f"  < {HIJACK_FLOOR:g}"
            row.append(f"{worst[1]:.2f} ({worst[0]}){flag}")
        rows.append(row)
    return head, rows


def _holm(entry: Scored, passed: frozenset[str]) -> str:
    """Whether the row's gain passes the correction: ``pass``, ``—`` for the current
    settings (and a row that is them), else blank."""
    if entry.delta is None or entry.alternative.same_as_current:
        return "—"
    return "pass" if entry.alternative.name in passed else ""


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


def sweep_rows(result: EvalResult) -> tuple[list[str], list[list[str]]]:
    """The sweep's table, each column headed in full (the HTML report's)."""
    return _rows(result, wide=True)


def cut_rows(result: EvalResult) -> tuple[list[str], list[list[str]]]:
    """The relevance-cut table (the HTML report's)."""
    return _cut_rows(result)


def abstain_rows(result: EvalResult) -> tuple[list[str], list[list[str]]]:
    """The abstain table: per ``NAUTILUS_RANKING_MIN_CONFIDENCE`` threshold, the
    off-topic abstain and false abstain with their exact intervals, and nDCG@k lost."""
    table = result.abstain
    k = result.k
    head = [
        "NAUTILUS_RANKING_MIN_CONFIDENCE",
        "off-topic abstain [95% CI]",
        "false abstain [95% CI]",
        f"nDCG@{k} lost [95% CI]",
        f"nDCG@{k}",
    ]
    if table is None:
        return head, []
    rows = []
    for entry in table.rows:
        off = entry.off_topic_rate
        rate, low, high = entry.false_rate
        mean, lost_low, lost_high = entry.lost
        mark = " (= current)" if entry.current else ""
        mark += " <- recommended" if entry is table.recommended else ""
        rows.append(
            [
                entry.setting + mark,
                "—"
                if off is None
                else f"{entry.off_topic_abstains}/{entry.unanswerable} {off[0]:.0%} "
                f"[{off[1]:.0%}, {off[2]:.0%}]",
                f"{entry.false_abstains}/{entry.judged} {rate:.0%} [{low:.0%}, {high:.0%}]",
                f"{mean:.3f} [{lost_low:.3f}, {lost_high:.3f}]",
                f"{entry.ndcg.mean():.3f}",
            ]
        )
    return head, rows


def abstain_note(result: EvalResult) -> str:
    """What the abstain table rests on, and what it recommends or why not."""
    table = result.abstain
    if table is None:
        return ""
    unanswerable = table.rows[0].unanswerable if table.rows else 0
    note = (
        f"abstain: each threshold on the ranking above without one (ranking on), decided "
        f"as the broker decides it; false abstain = an abstain on a judged query; "
        f"off-topic abstain = on the {unanswerable} unanswerable queries"
        if unanswerable
        else "abstain: each threshold on the ranking above without one (ranking on); "
        "off-topic abstain needs unanswerable queries (--unanswerable FILE)"
    )
    missing = sum(c is None for c in table.confidence_judged)
    if missing == len(table.confidence_judged):
        note += "; no query had a confidence (no fit for this scoring setup): none abstains"
    note += (
        f"; exact (Clopper-Pearson) intervals for the rates, paired bootstrap for nDCG@"
        f"{result.k} lost; a recommended threshold's false abstain passes Holm's correction "
        f"as within {table.target:.0%}"
    )
    return note


_CUT_NOTE = (
    "relevance cut: each setting on the ranking above without a cut (ranking on); "
    "means per query; irrelevant = no judgment of grade >= 1"
)


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
            f"ids no source returned for any query (whether a source holds them, this "
            f"run cannot tell): {cov.examples(cov.never_seen)}"
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
    # the columns before the shares: setting, nDCG, recall, MRR, repeats, Δ (and Holm)
    n = len(result.sources)
    m = len(head) - n - 1
    metrics = _table(head[:m] + head[m + n :], [r[:m] + r[m + n :] for r in rows])
    shares = _table(
        ["setting", *head[m : m + n]], [[r[0], *r[m : m + n]] for r in rows], last_left=False
    )
    return [*metrics, "", f"share of the top {result.k}, per source:", *shares]


def text_report(result: EvalResult, wide: bool = False) -> str:
    """The report for a terminal: its tables within :data:`WIDTH` columns unless
    ``wide`` (every column in one table, headed in full)."""
    cov = result.coverage
    lines = [
        f"nautilus-ranking eval: {cov.evaluated} judged queries (queries: {result.queries_format}, "
        f"judgments: {result.judgments_format}; id field {result.id_field!r})",
        f"sources: {', '.join(result.sources)}; current settings: {result.settings_line}",
        *_budget_lines(result),
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
        f">= {HIJACK_FLOOR:g}; n/a: no other source had relevant rows in the top)"
        + "; repeats = top-"
        + f"{result.k} rows per query resembling a row above them (the near-copy collapse's "
        + "'on' threshold)"
        + (
            "; the reference is ranking on, every ranking knob at its default"
            if result.reference is not None
            else ""
        )
        + (
            f"; Holm: pass = the gain passes Holm's correction for the run's "
            f"{result.recommendation.family} alternatives (familywise 0.025 one-sided; what "
            "a recommendation needs, with the 'kept' check)"
            if result.recommendation is not None
            else ""
        )
    )
    lines += [note] if wide else textwrap.wrap(note, WIDTH, break_on_hyphens=False)
    lines += result.notes
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
    if result.abstain is not None:
        note = abstain_note(result)
        lines += ["", *([note] if wide else textwrap.wrap(note, WIDTH, break_on_hyphens=False))]
        lines += _table(*abstain_rows(result), last_left=False)
    rec = recommendation_lines(result)
    if rec:
        lines += ["", *rec]
    lines.append(f"({result.fetch_seconds:.1f} s fetching, {result.rank_seconds:.1f} s ranking)")
    return "\n".join(lines)


def _budget_lines(result: EvalResult) -> list[str]:
    """The header's budget line: what every row of the table was scored on."""
    if result.delivery is None:
        return []
    return [f"budget: {result.delivery.described}"]


def markdown_report(result: EvalResult) -> str:
    cov = result.coverage
    head, rows = _rows(result)
    lines = [
        f"**nautilus-ranking eval**: {cov.evaluated} judged queries; sources "
        f"{', '.join(result.sources)}; current settings: `{result.settings_line}`",
        "",
    ]
    lines += [f"- {line}" for line in [*_budget_lines(result), *_coverage_lines(result)]]
    lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    if result.cuts:
        head, rows = _cut_rows(result)
        lines += ["", f"{_CUT_NOTE}:", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
    if result.abstain is not None:
        head, rows = abstain_rows(result)
        lines += ["", f"{abstain_note(result)}:", "", "| " + " | ".join(head) + " |"]
        lines += ["|" + "---|" * len(head), *("| " + " | ".join(row) + " |" for row in rows)]
    rec = recommendation_lines(result)
    if rec:
        lines += ["", "```sh", *rec, "```"]
    return "\n".join(lines)


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
