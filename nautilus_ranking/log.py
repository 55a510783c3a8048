"""Logging: the library only emits; the command line (or the app) decides where logs go.

Every nautilus module gets its logger from :func:`get_logger`: a structlog logger
that uses structlog's global processors but hands its output to the standard
library logger of the same name (``nautilus_ranking.broker``, ``nautilus_ranking.sources``, …).
So, as a library, nautilus never configures logging and never writes to stdout:

- an application that configures nothing sees only warnings and errors, on
  stderr (Python's last-resort handler);
- ``logging.basicConfig(level=logging.INFO)`` (or any handler on the
  ``nautilus_ranking`` logger) turns the rest on;
- an application that configures structlog gets nautilus' events through its
  own processors, and ``structlog.testing.capture_logs()`` sees them.

:func:`configure_logging` is what the ``nautilus-ranking`` command calls with
``NAUTILUS_LOG_LEVEL`` / ``NAUTILUS_LOG_FORMAT``; an application may call it too.
stdout is kept for a command's output, so ``nautilus-ranking query --json | jq`` works.

structlog itself is imported when the first event is logged, not before: under
:func:`configure_logging` in a process that has not imported structlog yet, the set-up
waits for the first event at or above its level, and events below it are dropped
without loading structlog (``nautilus-ranking query`` logs nothing at its default level, and
structlog's import pulls in ``rich`` when that is installed).

Under :func:`configure_logging` a request id bound with structlog's contextvars (the
service binds each request's ``X-Request-ID``) is *the* ``request_id`` of every line
logged meanwhile; an event that names an id of its own (the broker's
``request_served``) keeps that one as ``broker_request_id``.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from pydantic_settings import BaseSettings, SettingsConfigDict

if TYPE_CHECKING:
    import structlog

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
VALID_LOG_LEVELS: tuple[str, ...] = tuple(_LEVELS)
VALID_LOG_FORMATS: tuple[str, ...] = ("auto", "console", "json")
_HANDLER_NAME = "nautilus-configure-logging"


class LogSettings(BaseSettings):
    """Just the logging knobs, read leniently so logging can be set up first.

    They live here, below :mod:`nautilus_ranking.settings.model` (whose ``NautilusSettings`` extends
    this class and checks the two values), so that the settings may log and logging
    may read its settings without the two modules importing each other.
    """

    model_config = SettingsConfigDict(
        env_prefix="NAUTILUS_", env_file=".env", extra="ignore", validate_default=True
    )

    log_level: str = "info"
    log_format: str = "auto"


def get_logger(name: str) -> Any:
    """The logger a nautilus module logs with (a structlog logger over stdlib ``name``,
    created on its first event)."""
    return _Logger(name)


class _Logger:
    """structlog's ``wrap_logger(logging.getLogger(name))``, made on first use; while a
    :func:`configure_logging` waits (see the module docstring), an event below its level
    is dropped here."""

    __slots__ = ("_bound", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._bound: Any = None

    def _target(self, level: int) -> Any:
        if _pending is not None:
            if level < _pending.level:
                return None
            _apply(_pending, waited=True)
        bound = self._bound
        if bound is None:
            import structlog

            bound = self._bound = structlog.wrap_logger(logging.getLogger(self._name))
        return bound

    def debug(self, event: str, **kw: Any) -> Any:
        target = self._target(logging.DEBUG)
        return None if target is None else target.debug(event, **kw)

    def info(self, event: str, **kw: Any) -> Any:
        target = self._target(logging.INFO)
        return None if target is None else target.info(event, **kw)

    def warning(self, event: str, **kw: Any) -> Any:
        target = self._target(logging.WARNING)
        return None if target is None else target.warning(event, **kw)

    def error(self, event: str, **kw: Any) -> Any:
        target = self._target(logging.ERROR)
        return None if target is None else target.error(event, **kw)

    def exception(self, event: str, **kw: Any) -> Any:
        target = self._target(logging.ERROR)
        return None if target is None else target.exception(event, **kw)

    def __getattr__(self, name: str) -> Any:  # bind, new, critical, …: structlog's own
        return getattr(self._target(logging.CRITICAL), name)


def merge_request_context(
    logger: Any, method: str, event_dict: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    """structlog's ``merge_contextvars``, except that a bound ``request_id`` wins over the
    event's own (kept as ``broker_request_id``): one id per request on every line."""
    import structlog

    from nautilus_ranking.tracing.carry import add_trace_ids

    context = structlog.contextvars.get_contextvars()
    bound, own = context.get("request_id"), event_dict.get("request_id")
    if bound is not None and own is not None and own != bound:
        event_dict["broker_request_id"] = own
        event_dict["request_id"] = bound
    merged = {**context, **event_dict}
    add_trace_ids(merged)  # inside a recorded span: its trace_id and span_id
    return merged


def configure_logging(
    level: str | None = None, fmt: str | None = None, stream: TextIO | None = None
) -> None:
    """Send nautilus' logs to ``stream`` (default stderr) at ``level``, rendered as ``fmt``.

    ``level``/``fmt`` default to ``NAUTILUS_LOG_LEVEL`` / ``NAUTILUS_LOG_FORMAT``.
    ``fmt``: ``console`` (coloured key=value), ``json`` (one object a line, for
    alerting), or ``auto`` — console when ``stream`` is a terminal, else JSON.
    Unknown values fall back to ``info`` / ``auto``; the settings already warned.
    Calling it again replaces the previous set-up.
    """
    global _pending
    if level is None or fmt is None:
        settings = LogSettings()
        level = level if level is not None else settings.log_level.strip().lower()
        fmt = fmt if fmt is not None else settings.log_format.strip().lower()
    out = stream if stream is not None else sys.stderr
    numeric = _LEVELS.get(level, _LEVELS[LogSettings.model_fields["log_level"].default])
    target = logging.getLogger("nautilus_ranking")
    for old in [h for h in target.handlers if h.get_name() == _HANDLER_NAME]:
        target.removeHandler(old)
    handler = logging.StreamHandler(out)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(logging.Formatter("%(message)s"))
    target.addHandler(handler)
    target.setLevel(numeric)
    target.propagate = False
    _pending = _Setup(numeric, fmt, out)
    if "structlog" in sys.modules:  # already loaded (an application's, a test's): now
        _apply(_pending)


@dataclass(frozen=True)
class _Setup:
    """What :func:`configure_logging` asked for, until structlog is configured with it."""

    level: int
    fmt: str
    out: TextIO


#: A set-up waiting for structlog to be needed (None: nothing waits).
_pending: _Setup | None = None


def _apply(setup: _Setup, waited: bool = False) -> None:
    """Configure structlog as ``setup`` says (importing it). A set-up that ``waited``
    yields to a structlog configured meanwhile (by the application, after the call)."""
    global _pending
    import structlog

    _pending = None
    if waited and structlog.is_configured():
        return
    use_console = setup.fmt == "console" or (setup.fmt != "json" and setup.out.isatty())
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer(colors=setup.out.isatty())
        if use_console
        else structlog.processors.JSONRenderer(sort_keys=True)
    )
    structlog.configure(
        processors=[
            merge_request_context,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(setup.level),
        logger_factory=structlog.PrintLoggerFactory(setup.out),
        cache_logger_on_first_use=False,
    )
