"""structlog set-up: one call, logs to stderr, console on a terminal, JSON otherwise.

stdout is kept for a command's output, so ``nautilus query --json | jq`` works
while warnings still reach the operator (and their log shipper) on stderr.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO,
           "warning": logging.WARNING, "error": logging.ERROR}


def configure_logging(level: str = "info", fmt: str = "auto",
                      stream: TextIO | None = None) -> None:
    """Configure structlog for nautilus' command line (or an app that wants the same).

    ``fmt``: ``console`` (coloured key=value), ``json`` (one object a line, for
    alerting), or ``auto`` — console when ``stream`` is a terminal, else JSON.
    Unknown values fall back to ``info`` / ``auto``; settings already warned.
    """
    out = stream if stream is not None else sys.stderr
    use_console = fmt == "console" or (fmt != "json" and out.isatty())
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer(colors=out.isatty()) if use_console
        else structlog.processors.JSONRenderer(sort_keys=True)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS.get(level, logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )
