"""The ``nautilus-ranking calibrate`` subcommand: its flags and its run function (wired in
``cli/__init__.py``)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nautilus_ranking.evaluation.command import add_report_argument

if TYPE_CHECKING:
    from nautilus_ranking.calibration.collect import Collected
    from nautilus_ranking.calibration.fit import CalibrationFit
    from nautilus_ranking.settings.model import NautilusSettings


def add_parser(commands: Any, argv: Sequence[str] = ()) -> None:
    """Add ``calibrate`` to the ``nautilus-ranking`` subcommands."""
    parser = commands.add_parser(
        "calibrate",
        help="fit the confidence to these sources and choose the abstain threshold",
        description="Run off-topic queries (the shipped set and --null-queries) and, when "
        "given, judged queries through the configured sources; fit the confidence on what "
        "they score here and write a fit file for NAUTILUS_RANKING_CONFIDENCE_FIT, with "
        "the recommended NAUTILUS_RANKING_MIN_CONFIDENCE and what it promises.",
    )
    parser.add_argument("--out", required=True, type=Path, metavar="FILE", help="the fit file")
    parser.add_argument("--config", help="sources file (default: NAUTILUS_CONFIG, else the demo)")
    parser.add_argument(
        "--null-queries",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="off-topic queries of your own, one a line (repeatable; beside the shipped set)",
    )
    parser.add_argument(
        "--no-shipped-null-queries",
        action="store_true",
        help="leave the shipped off-topic queries out (your sources cover their domains)",
    )
    parser.add_argument("--queries", type=Path, metavar="FILE", help="judged queries, as eval")
    parser.add_argument("--judgments", type=Path, metavar="FILE", help="their judgments, as eval")
    parser.add_argument(
        "--id-field", default="id", metavar="FIELD", help="the row field of the judged id"
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=0.02,
        metavar="A",
        help="the false-abstain rate p may not exceed, on judged queries (default 0.02)",
    )
    parser.add_argument(
        "--null-rate",
        type=float,
        default=0.9,
        metavar="R",
        help="the off-topic abstain rate p is set for: the least p abstaining on R of "
        "off-topic queries (with probability 0.95), capped by --alpha (default 0.9)",
    )
    parser.add_argument("--profile", metavar="NAME", help="calibrate this ranking profile")
    parser.add_argument("--json", action="store_true", help="the report as one JSON object")
    add_report_argument(parser)
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a progress bar on stderr (default: when stderr is a terminal)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, collect: Any = None) -> int:
    """``collect``: how the queries are run and their signals read (None: through our
    own broker; the Nautilus broker's: ``upstream/calibrate.py``)."""
    from nautilus_ranking.calibration.collect import CalibrateError, shipped_entry
    from nautilus_ranking.calibration.collect import collect as collect_here
    from nautilus_ranking.calibration.fit import calibrate_fit
    from nautilus_ranking.evaluation.command import UnknownProfileError, settings_for_run

    for name, value in (("--alpha", args.alpha), ("--null-rate", args.null_rate)):
        if not 0 < value < 1:
            print(f"nautilus-ranking: {name} must be in (0, 1), got {value:g}", file=sys.stderr)
            return 2
    if (args.queries is None) != (args.judgments is None):
        print("nautilus-ranking: --queries and --judgments go together", file=sys.stderr)
        return 2
    if args.report is not None:
        from nautilus_ranking.report import unwritable

        problem = unwritable(args.report)
        if problem is not None:
            print(f"nautilus-ranking: --report: {problem}", file=sys.stderr)
            return 2
    try:
        settings = settings_for_run(args).settings
    except UnknownProfileError as exc:
        print(f"nautilus-ranking: --profile: {exc}", file=sys.stderr)
        return 2
    null, judged = _queries(args)
    collect = collect if collect is not None else collect_here
    found = collect(args.config, settings, null, judged, args.id_field, args.progress)
    seen = found.observations
    try:
        fitted = calibrate_fit(seen, shipped_entry(seen.setup), args.alpha, args.null_rate)
    except ValueError as exc:
        raise CalibrateError(str(exc)) from exc
    document = fit_document(args, settings, found, fitted, len(null), len(judged))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    if args.report is not None:
        from nautilus_ranking.calibration.report_page import write_calibration_report

        try:
            written = write_calibration_report(document, seen, fitted, args.report)
        except OSError as exc:  # the page's own message names --report and the path
            print(f"nautilus-ranking: {exc}", file=sys.stderr)
            return 1
        print(f"report written to {written.page}{written.described}", file=sys.stderr)
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        print("\n".join(report_lines(document, args.out)))
    return 0


def _queries(args: argparse.Namespace) -> tuple[list[str], list[tuple[str, str, dict[str, int]]]]:
    """The off-topic queries and the judged ones (id, text, grades)."""
    from nautilus_ranking.calibration.null_queries import read_null_queries, shipped_null_queries
    from nautilus_ranking.evaluation.judgments import read_judgments, read_queries

    null = [] if args.no_shipped_null_queries else shipped_null_queries()
    for path in args.null_queries:
        null += read_null_queries(path)
    null = list(dict.fromkeys(null))
    if not null:
        from nautilus_ranking.calibration.collect import CalibrateError

        raise CalibrateError(
            "no off-topic query: --no-shipped-null-queries needs --null-queries FILE"
        )
    judged: list[tuple[str, str, dict[str, int]]] = []
    if args.queries is not None:
        queries = read_queries(args.queries)
        grades = read_judgments(args.judgments, queries.texts, relevant_only=True).grades
        judged = [(q, t, grades.get(q, {})) for q, t in queries.texts.items() if q in grades]
    return null, judged


def fit_document(
    args: argparse.Namespace,
    settings: NautilusSettings,
    found: Collected,
    fitted: CalibrationFit,
    nulls: int,
    judged: int,
) -> dict[str, Any]:
    """The fit file: the fit, what it was made for, its provenance and its threshold."""
    from datetime import UTC, datetime

    import numpy as np

    from nautilus_ranking import __version__
    from nautilus_ranking.confidence_fit_check import made_for
    from nautilus_ranking.config_hash import config_hash
    from nautilus_ranking.selection.confidence import TOP_K
    from nautilus_ranking.selection.confidence_fitting import ece, ece_interval
    from nautilus_ranking.selection.local_fit import FIT_FORMAT

    seen = found.observations
    plain = settings.model_copy(update={"ranking_confidence_fit": None})
    labels = seen.label.astype(np.float64)
    calibration: dict[str, Any] = {"ece_crossfit": None, "ece_crossfit_ci95": None}
    if seen.judged.any():  # without judged queries every label is 0: no ECE to speak of
        low, high = ece_interval(fitted.crossfit, labels)
        calibration = {
            "ece_crossfit": round(ece(fitted.crossfit, labels), 4),
            "ece_crossfit_ci95": [round(low, 4), round(high, 4)],
        }
    return {
        "format": FIT_FORMAT,
        "top_k": TOP_K,
        "made_for": {
            **made_for(plain, found.sources_file),
            "config_hash": config_hash(plain, found.sources_file),
        },
        "provenance": {
            "version": __version__,
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "null_queries": int((~seen.judged).sum()),
            "null_queries_asked": nulls,
            "shipped_null_queries": not args.no_shipped_null_queries,
            "null_files": [str(p) for p in args.null_queries],
            "judged_queries": int(seen.judged.sum()),
            "judged_queries_asked": judged,
            "answerable": int((seen.judged & (seen.label == 1)).sum()),
            "judgments": str(args.judgments) if args.judgments is not None else None,
            "queries_skipped": found.skipped,
            "probability_from": fitted.probability_from,
            **calibration,
            "fetch_seconds": round(found.fetch_seconds, 2),
            "rank_seconds": round(found.rank_seconds, 2),
        },
        "threshold": fitted.threshold,
        "setups": {seen.setup: fitted.entry},
    }


def report_lines(document: dict[str, Any], out: Path) -> list[str]:
    """The plain report: what was run, what the fit promises, the rates it gives."""
    made, prov, chosen = document["made_for"], document["provenance"], document["threshold"]
    p = chosen["recommended_p"]
    lines = [
        f"calibrated {made['setup']} on {made['sources_file']} (config hash {made['config_hash']})",
        f"queries: {prov['null_queries']} off-topic, {prov['judged_queries']} judged "
        f"({prov['answerable']} answerable); {prov['queries_skipped']} returned no row "
        "(nothing to abstain on; not counted)",
        "probability: "
        + (
            "fitted on these sources"
            if prov["probability_from"] == "local"
            else "the shipped fit's (no answerable judged query to fit one here)"
        ),
        "ECE (cross-fitted, 10 bins): "
        + (
            f"{prov['ece_crossfit']:.3f} [{prov['ece_crossfit_ci95'][0]:.3f}, "
            f"{prov['ece_crossfit_ci95'][1]:.3f}]"
            if prov["ece_crossfit"] is not None
            else "none without judged queries"
        ),
        f"recommended p: {p if p is not None else 'none'}",
        f"promise: {chosen['promise']}",
        "",
        "| at p (cross-fitted) | abstained | of | rate | 95% CI (Clopper-Pearson) |",
        "|---|---|---|---|---|",
    ]
    answerable = "answerable" if chosen["false_abstain_guaranteed"] else "answerable (no guarantee)"
    for name, key in (("off-topic", "off_topic_abstain"), (answerable, "false_abstain")):
        rate = chosen[key]
        if rate is not None:
            shown = f"{rate['rate']:.4f}" if rate["rate"] is not None else "-"
            lines.append(
                f"| {name} | {rate['abstained']} | {rate['of']} | {shown} | "
                f"[{rate['ci95'][0]:.4f}, {rate['ci95'][1]:.4f}] |"
            )
    lines += ["", f"fit written to {out}: NAUTILUS_RANKING_CONFIDENCE_FIT={out}"]
    if p is not None:
        lines.append(f"NAUTILUS_RANKING_MIN_CONFIDENCE={p}")
    return lines
