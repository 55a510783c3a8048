"""The ``nautilus-ranking eval`` subcommand: its flags and its run function (wired in
``cli.py``)."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nautilus_ranking.errors import NautilusError
from nautilus_ranking.evaluation.metrics import DEFAULT_K

if TYPE_CHECKING:
    from nautilus_ranking.evaluation.knob_settings import RunSettings


def add_parser(commands: Any, argv: Sequence[str] = ()) -> None:
    """Add ``eval`` to the ``nautilus`` subcommands."""
    parser = commands.add_parser(
        "eval",
        help="measure relevance on judged queries; --sweep tries the alternatives",
        description="Run judged queries through the live broker (one fan-out per query) and "
        "report nDCG@k, recall@k, MRR, each source's share of the top k and the "
        "recall ceiling; --sweep re-ranks the same rows under passthrough, IDF "
        "off/on and every boost level, with paired bootstrap CIs.",
    )
    parser.add_argument(
        "--queries",
        required=True,
        type=Path,
        metavar="FILE",
        help="BEIR queries.jsonl, TREC topics, or 'qid<TAB>text' lines",
    )
    parser.add_argument(
        "--judgments",
        required=True,
        type=Path,
        metavar="FILE",
        help="BEIR qrels TSV (or its folder) or TREC qrels 'qid 0 docid grade'",
    )
    parser.add_argument("--config", help="sources file (default: NAUTILUS_CONFIG, else the demo)")
    parser.add_argument(
        "--id-field",
        default="id",
        metavar="FIELD",
        help="the row field that holds the judged document id (default: id)",
    )
    parser.add_argument(
        "--k",
        type=int,
        default=DEFAULT_K,
        metavar="K",
        help=f"metric depth: nDCG@K, recall@K, share of the top K (default {DEFAULT_K})",
    )
    parser.add_argument(
        "--sweep",
        action="store_true",
        help="also passthrough, IDF off/on and each source at each boost level, "
        "and a recommendation",
    )
    parser.add_argument(
        "--recommend",
        action="store_true",
        help="print only the recommended NAUTILUS_* lines, a .env fragment "
        "(implies --sweep; --json or --markdown print the whole report)",
    )
    parser.add_argument(
        "--wide",
        action="store_true",
        help="one table with every column headed in full, lines as long as they need "
        "(by default the tables fit in 120 columns)",
    )
    parser.add_argument(
        "--profile",
        metavar="NAME",
        help="measure this ranking profile: the global knobs with its own over them, as "
        "the servers resolve them; --recommend then writes its NAUTILUS_PROFILES__NAME__* "
        "lines",
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        metavar="N",
        help="score what a token budget of N hands over (default: "
        "NAUTILUS_RANKING_MAX_TOKENS, or the profile's; none: the top K whole)",
    )
    parser.add_argument(
        "--budget-counts",
        choices=("json", "mcp"),
        default="json",
        help="under a budget, count each row as this way in hands it over: json (a "
        "ranking entry: POST /v1/query, query --json, the retrievers; the default) or "
        "mcp (the search tool's text line, shorter: more rows fit)",
    )
    _add_time_and_abstain(parser)
    add_report_argument(parser)
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="one JSON object on stdout")
    output.add_argument("--markdown", action="store_true", help="a markdown table on stdout")
    parser.add_argument(
        "--plot",
        type=Path,
        metavar="FILE.png",
        help="share of the top K and nDCG@K against boost level (implies "
        "--sweep; needs matplotlib: pip install 'nautilus-ranking[bench]')",
    )
    parser.set_defaults(run=run)


def _add_time_and_abstain(parser: argparse.ArgumentParser) -> None:
    """The flags of what time and the abstain do (docs/eval.md)."""
    parser.add_argument(
        "--unanswerable",
        type=Path,
        metavar="FILE",
        help="queries nothing in the sources answers (same formats as --queries, no "
        "judgments needed): the abstain table reports off-topic abstain, false abstain "
        "and the nDCG lost at each NAUTILUS_RANKING_MIN_CONFIDENCE",
    )
    parser.add_argument(
        "--max-false-abstain",
        type=float,
        default=0.02,
        metavar="RATE",
        help="the false-abstain rate a recommended min_confidence must be shown to stay "
        "within (default 0.02)",
    )
    parser.add_argument(
        "--as-of",
        metavar="TIME",
        help="the time the judgments hold at (an ISO date or time): every query is ranked "
        "as of it, as a request's as_of; the sweep also tries without it",
    )


def add_report_argument(parser: argparse.ArgumentParser) -> None:
    """``--report``: the run as one HTML page (docs/eval.md, "The HTML report"); eval's
    and calibrate's."""
    parser.add_argument(
        "--report",
        type=Path,
        metavar="FILE.html",
        help="also write one static HTML report, working offline, with a PNG beside it "
        "for each chart (the charts need the report extra: pip install "
        "'nautilus-ranking[report]'; without it the page has the tables)",
    )


def run(args: argparse.Namespace) -> int:
    # Here, not at the top: `nautilus-ranking --help` builds this parser without loading them.
    from nautilus_ranking.evaluation.evaluate import run_eval
    from nautilus_ranking.evaluation.json_answer import json_report
    from nautilus_ranking.evaluation.judgments import EvalInputError
    from nautilus_ranking.evaluation.recommend import recommendation_lines
    from nautilus_ranking.evaluation.report import (
        coverage_lines,
        markdown_report,
        plot,
        text_report,
    )
    from nautilus_ranking.evaluation.report_page import write_eval_report

    if args.plot is not None:
        _check_matplotlib()
    sweep = bool(args.sweep or args.recommend or args.plot is not None or args.report)
    if args.max_tokens is not None and args.max_tokens < 1:
        print(
            f"nautilus-ranking: --max-tokens must be an integer >= 1, got {args.max_tokens}",
            file=sys.stderr,
        )
        return 2
    try:
        settings = settings_for_run(args)
    except UnknownProfileError as exc:
        print(f"nautilus-ranking: --profile: {exc}", file=sys.stderr)
        return 2
    try:
        result = run_eval(
            args.queries,
            args.judgments,
            args.config,
            settings,
            id_field=args.id_field,
            k=args.k,
            sweep=sweep,
            max_tokens=args.max_tokens,
            counting=args.budget_counts,
            unanswerable_path=args.unanswerable,
            as_of=args.as_of,
            max_false_abstain=args.max_false_abstain,
        )
        if args.plot is not None:
            plot(result, args.plot)
        written = write_eval_report(result, args.report) if args.report is not None else None
    except (EvalInputError, OSError) as exc:
        print(f"nautilus-ranking: {exc}", file=sys.stderr)
        return 1
    if args.json:
        text = json.dumps(json_report(result), indent=2, sort_keys=True)
    elif args.markdown:
        text = markdown_report(result)
    elif args.recommend:
        # stdout is a .env fragment: a warning that changes what to do is a comment in it;
        # the other notes it rests on go to stderr
        notes = coverage_lines(result)[1:]
        for line in notes:
            if not line.startswith("warning:"):
                print(f"nautilus-ranking: {line}", file=sys.stderr)
        warnings = [f"# {line}" for line in notes if line.startswith("warning:")]
        text = "\n".join([*warnings, *recommendation_lines(result)])
    else:
        text = text_report(result, wide=args.wide)
    if args.plot is not None:
        print(f"plot written to {args.plot}", file=sys.stderr)
    if written is not None:
        print(f"report written to {written.page}{written.described}", file=sys.stderr)
    return _emit(text)


class UnknownProfileError(NautilusError):
    """``--profile`` names no configured profile (a usage error: exit 2)."""


def settings_for_run(args: argparse.Namespace) -> RunSettings:
    """The settings the run ranks with, and each knob's origin: the environment and
    ``.env``, as the service reads them, and with ``--profile`` that profile's knobs
    over them, loaded and chosen as a server does (the one place a run's settings are
    built)."""
    from nautilus_ranking.evaluation.knob_settings import run_settings, with_profile

    run = run_settings()
    if args.profile is None:
        return run
    from nautilus_ranking.profiles.build import load_profiles
    from nautilus_ranking.request.errors import ProblemError
    from nautilus_ranking.request.profile_choice import choose

    profiles = load_profiles(run.settings)
    try:
        profile = choose(profiles, args.profile, None)  # no key: any profile may be named
    except ProblemError:
        profile = None
    if profile is None:
        configured = (
            f"configured: {', '.join(profiles.names)}"
            if profiles
            else "no profile is configured: NAUTILUS_PROFILES__<NAME>__<KNOB> or "
            "NAUTILUS_PROFILES_FILE (docs/configuration.md#profiles)"
        )
        raise UnknownProfileError(f"{args.profile!r}: no such profile ({configured})")
    return with_profile(run, profile)


def _emit(text: str) -> int:
    """Print the report; a reader that stopped early (``| head``) is not an error."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush is quiet
        os.close(devnull)
    return 0


def _check_matplotlib() -> None:
    """Fail before the run, not after it, when the plot cannot be drawn."""
    try:
        importlib.import_module("matplotlib")
    except ImportError as exc:
        raise ImportError("--plot needs matplotlib: pip install 'nautilus-ranking[bench]'") from exc
