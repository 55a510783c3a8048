"""The ``nautilus-ranking`` command: ``config``, ``query``, ``sources``, ``load``, ``serve``,
``mcp``,
``demo``, ``eval``, ``calibrate`` and ``feedback``.

Every command is a module with the same two functions: ``add_parser(commands, argv)``
registers its flags and ``run(args)`` runs it, importing its own machinery only then, so
``--version`` and ``--help`` load neither numpy nor pydantic, and ``query`` loads neither
the service nor the MCP SDK nor PostgreSQL's driver.

Output goes to stdout, logs to stderr. No input produces a traceback: known
problems print one clear line and exit 1; usage errors exit 2. Unless
``NAUTILUS_LOG_LEVEL`` says otherwise, only ``serve`` and ``mcp`` log at info: the other
commands' output is the point, so they log warnings and errors only.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from nautilus_ranking import __version__
from nautilus_ranking.calibration import command as calibrate_command
from nautilus_ranking.cli import config, demo, feedback, load, mcp, query, serve, sources
from nautilus_ranking.cli.demo import DEMO_QUERIES
from nautilus_ranking.cli.query import add_request_flags
from nautilus_ranking.evaluation import command as eval_command

__all__ = ["DEMO_QUERIES", "add_request_flags", "main"]

#: The commands, in the order ``--help`` lists them: each a module with ``add_parser``
#: and ``run``.
COMMANDS = (
    config,
    query,
    sources,
    load,
    serve,
    mcp,
    demo,
    eval_command,
    calibrate_command,
    feedback,
)
_DESCRIPTION = (
    "The ranking layer for retrieval brokers: ask every source, rank the union, "
    "keep the top K. Commands: config, query, sources, load, serve, mcp, demo, eval, "
    "calibrate, feedback "
    "('nautilus-ranking COMMAND --help' for each)."
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # the command as it was run
    from nautilus_ranking.errors import NautilusError
    from nautilus_ranking.log import LogSettings, configure_logging, get_logger

    log = LogSettings()
    level = (
        log.log_level.strip().lower()
        if "log_level" in log.model_fields_set
        else "info"
        if args.command in ("serve", "mcp")
        else "warning"
    )
    configure_logging(level, log.log_format.strip().lower())
    try:
        return int(args.run(args))
    except (NautilusError, ImportError) as exc:  # nautilus' own, and a missing extra
        print(f"nautilus-ranking: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader left (``| head``): not an error of ours
        _quiet_stdout()
        return 0
    except Exception as exc:  # the last line of defence: a clear line, never a traceback
        get_logger("nautilus_ranking.cli").error(
            "unexpected_error", error_type=type(exc).__name__, error=str(exc)[:500]
        )
        print(f"nautilus-ranking: unexpected {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush of a closed pipe does
    not print a second error."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nautilus-ranking", description=_DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"nautilus-ranking {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(commands, argv)
    return parser
