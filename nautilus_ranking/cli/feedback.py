"""``nautilus-ranking feedback propose``: boost levels proposed from what agents used,
read offline from the feedback logs. It never writes configuration: it prints records
and one ``NAUTILUS_SOURCE_BOOSTS`` line, commented out unless every check passes."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nautilus_ranking.errors import NautilusError


class FeedbackInputError(NautilusError):
    """The logs cannot give a proposal (none found, none under the config hash)."""


def add_parser(commands: Any, argv: Sequence[str] = ()) -> None:
    """Add ``feedback`` (and its ``propose``) to the subcommands."""
    feedback = commands.add_parser(
        "feedback",
        help="what agents used: propose boost levels from the feedback logs (offline)",
        description="Read the feedback logs (docs/feedback.md) offline.",
    )
    actions = feedback.add_subparsers(dest="feedback_command", required=True, metavar="ACTION")
    parser = actions.add_parser(
        "propose",
        help="propose at most one level step per source; never writes configuration",
        description="Fit the use rate per position (free per position), compare each "
        "source's uses with what its positions predict (bootstrap over answers, Holm "
        "across sources), propose at most one level step per source, replay it from the "
        "logged components and, with --queries and --judgments, check it with eval's "
        "sweep (docs/feedback-propose.md).",
    )
    parser.add_argument(
        "--logs",
        type=Path,
        metavar="DIR",
        help="the logs' folder (default: NAUTILUS_DATA_DIR/feedback)",
    )
    parser.add_argument("--config", help="sources file (default: NAUTILUS_CONFIG, else the demo)")
    parser.add_argument(
        "--config-hash",
        metavar="HASH",
        help="read the answers made under this config hash (default: the current one)",
    )
    parser.add_argument("--queries", type=Path, metavar="FILE", help="judged queries, as eval")
    parser.add_argument("--judgments", type=Path, metavar="FILE", help="judgments, as eval")
    parser.add_argument("--id-field", default="id", metavar="FIELD", help="as eval (default: id)")
    parser.add_argument("--resamples", type=_positive, default=None, metavar="N")
    parser.add_argument("--seed", type=int, default=None, metavar="N")
    parser.add_argument("--alpha", type=_share, default=None, help="familywise (default 0.05)")
    parser.add_argument("--min-effect", type=_share, default=None, metavar="SHARE")
    parser.add_argument("--min-impressions", type=_positive, default=None, metavar="N")
    parser.add_argument("--min-expected", type=_positive, default=None, metavar="N")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument(
        "--plot",
        type=Path,
        metavar="FILE",
        help="the curve and the ratios: FILE.png with matplotlib, else an HTML page",
    )
    parser.set_defaults(run=run)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be a number between 0 and 1, got {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    from nautilus_ranking.proposal.report import json_report, text_report

    if (args.queries is None) != (args.judgments is None):
        print("nautilus-ranking: --queries and --judgments go together", file=sys.stderr)
        return 2
    settings, order, current = _settings(args)
    log = _read(args.logs or settings.data_dir.expanduser() / "feedback")
    config_hash = args.config_hash or current or log.latest_hash()
    answers = log.under(config_hash) if config_hash else []
    if not answers:
        raise FeedbackInputError(_no_answers(log, config_hash))
    proposal = _propose(args, answers, config_hash)
    if args.queries is not None:
        proposal = _checked(args, proposal)
    if args.plot is not None:
        from nautilus_ranking.proposal.plot import write_plot

        print(f"plot written to {write_plot(proposal, args.plot)}", file=sys.stderr)
    if args.json:
        print(json.dumps(json_report(log, proposal, order), indent=2, sort_keys=True))
    else:
        print(text_report(log, proposal, order))
    return 0


def _settings(args: argparse.Namespace) -> tuple[Any, list[str], str | None]:
    """The settings, the sources' order (for the line) and the current config hash
    (None when the sources file cannot be read and no hash was given)."""
    from nautilus_ranking.config_hash import config_hash
    from nautilus_ranking.settings.model import NautilusSettings
    from nautilus_ranking.source_settings import config_path
    from nautilus_ranking.sources.yaml_file import read_yaml

    settings = NautilusSettings()
    path = config_path(settings, args.config)
    try:
        order = [str(s.get("id")).lower() for s in read_yaml(path).get("sources", [])]
        current = config_hash(settings, path)
    except (OSError, NautilusError, AttributeError, TypeError):
        if args.config_hash is None and args.config is not None:
            raise FeedbackInputError(
                f"--config {args.config}: cannot read it to compute the config hash "
                "(pass --config-hash HASH to read the answers made under HASH)"
            ) from None
        order, current = [], None
    return settings, order, current


def _read(folder: Path) -> Any:
    from nautilus_ranking.evaluation.progress import Progress
    from nautilus_ranking.proposal.logs import log_files, read_logs

    if not folder.is_dir():
        raise FeedbackInputError(
            f"no feedback logs: {folder} is not a folder (the server writes them with "
            "NAUTILUS_FEEDBACK=on; --logs DIR reads another folder)"
        )
    queries, events = log_files(folder)
    total = sum(p.stat().st_size for p in [*queries, *events])
    with Progress(total, "reading logs") as bar:
        return read_logs(folder, on_bytes=bar.step)


def _propose(args: argparse.Namespace, answers: list[Any], config_hash: str) -> Any:
    from dataclasses import replace

    from nautilus_ranking.evaluation.progress import Progress
    from nautilus_ranking.proposal.propose import Rules, propose

    given = {
        "resamples": args.resamples,
        "seed": args.seed,
        "alpha": args.alpha,
        "min_effect": args.min_effect,
        "min_impressions": args.min_impressions,
        "min_expected": args.min_expected,
    }
    rules = replace(Rules(), **{k: v for k, v in given.items() if v is not None})
    with Progress(rules.resamples, "bootstrap") as bar:
        return propose(answers, config_hash, rules, on_step=bar.step)


def _checked(args: argparse.Namespace, proposal: Any) -> Any:
    """The proposal with eval's sweep and hijack check on each proposed level."""
    from nautilus_ranking.evaluation.evaluate import run_eval
    from nautilus_ranking.evaluation.knob_settings import run_settings
    from nautilus_ranking.proposal.propose import with_eval

    if not proposal.changes:
        return proposal
    result = run_eval(
        args.queries,
        args.judgments,
        args.config,
        run_settings(),
        id_field=args.id_field,
        sweep=True,
    )
    return with_eval(proposal, result)


def _no_answers(log: Any, config_hash: str | None) -> str:
    if not log.answers:
        skipped = sum(log.skipped.values())
        return f"no answers in the feedback logs ({log.files} files, {skipped} lines skipped)"
    found = ", ".join(f"{h} ({n} answers)" for h, n in log.hashes.most_common(5))
    return (
        f"no answers under the current config hash {config_hash}: the logs hold {found} "
        "(--config-hash HASH reads the answers made under HASH)"
    )
