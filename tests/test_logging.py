"""The library logs through stdlib logging; only configure_logging (the CLI) sets handlers."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import structlog

import nautilus_ranking
from nautilus_ranking.log import configure_logging, get_logger


def test_every_module_logs_through_nautilus_log() -> None:
    """A module using structlog.get_logger directly would print to stdout when unconfigured."""
    package = Path(nautilus_ranking.__file__).parent
    offenders = [
        str(p.relative_to(package))
        for p in package.rglob("*.py")
        if p.name != "log.py" and "structlog.get_logger" in p.read_text("utf-8")
    ]
    assert offenders == []


def test_configure_logging_renders_json_at_the_level_and_can_be_called_again() -> None:
    stream = io.StringIO()
    try:
        configure_logging("warning", "json", stream)
        configure_logging("warning", "json", stream)  # replaces, never duplicates
        logger = get_logger("nautilus_ranking.test")
        logger.info("hidden_event")
        logger.warning("shown_event", field=1)
        [line] = stream.getvalue().splitlines()
        event = json.loads(line)
        assert event["event"] == "shown_event" and event["field"] == 1
        assert event["level"] == "warning"
    finally:
        structlog.reset_defaults()
        target = logging.getLogger("nautilus_ranking")
        for handler in list(target.handlers):
            target.removeHandler(handler)
        target.setLevel(logging.NOTSET)
        target.propagate = True
