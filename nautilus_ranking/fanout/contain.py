"""What a source raises stays in the source's own call.

A source is someone else's code, and Python lets it raise more than exceptions:
``SystemExit``, ``KeyboardInterrupt``, ``CancelledError`` or any ``BaseException``.
Out of an event loop's task, ``SystemExit`` and ``KeyboardInterrupt`` stop the loop
(a server with it), and a ``CancelledError`` that nobody asked for ends the task that
awaited it (the readiness prober, for good), as does a ``GeneratorExit``, which Python
also throws into a coroutine to close it: one raised while the call's own task runs is
the source's (:func:`raised_in`), one thrown in by ``close()`` is not. So the broker's
fan-out and the readiness probe contain whatever a source's call raises as that source's failure
(:func:`contained`), and a worker thread hands a ``BaseException`` over wrapped
(:class:`SourceRaisedError`), since in a worker thread it can never be a signal.

What still stops the process is what stops it for real: a cancellation of the running
task (a request or a server shutting down) and a ``KeyboardInterrupt`` where a real
Ctrl-C raises one — the main thread under Python's default SIGINT handler (the
synchronous API called from a program's main thread). The servers handle SIGINT and
SIGTERM themselves, and run the broker on a thread of its own: there, a
``KeyboardInterrupt`` out of a source is always the source's.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from typing import Any

from nautilus_ranking.errors import NautilusError


class SourceRaisedError(NautilusError, RuntimeError):
    """A ``BaseException`` that is not an ``Exception`` (``SystemExit``,
    ``KeyboardInterrupt``, ``CancelledError`` …), raised by a call in a worker thread and
    handed to its caller as this exception; ``raised`` is what was raised."""

    def __init__(self, raised: BaseException) -> None:
        super().__init__(f"{type(raised).__name__} raised in a worker thread: {_text(raised)}")
        self.raised = raised


def contained(exc: BaseException, task: asyncio.Task[Any] | None = None) -> bool:
    """Whether ``exc``, out of a source's call, is the source's own failure (to report
    as such) rather than this task or this process being stopped (to re-raise).
    ``task``: the task the call was made in (``asyncio.current_task()`` before it), which
    tells a source's own ``GeneratorExit`` from the coroutine being closed."""
    if isinstance(exc, GeneratorExit):
        return raised_in(task)
    if isinstance(exc, asyncio.CancelledError):
        task = asyncio.current_task()
        return task is None or task.cancelling() == 0
    if isinstance(exc, KeyboardInterrupt):
        return not _real_ctrl_c_lands_here()
    return True


def raised_in(task: asyncio.Task[Any] | None) -> bool:
    """Whether a ``GeneratorExit`` caught now was raised by code running in ``task``'s
    own step (a source's, to contain) rather than thrown in by ``close()`` — a
    coroutine closed by its owner or by the garbage collector, never while its task
    runs it (to re-raise: a closed coroutine must not go on)."""
    if task is None:
        return False
    try:
        return asyncio.current_task() is task
    except RuntimeError:  # no running loop: a close() from outside any loop
        return False


def error_type(exc: BaseException) -> str:
    """The name a failure is reported under: what the source raised."""
    raised = exc.raised if isinstance(exc, SourceRaisedError) else exc
    return type(raised).__name__


def _real_ctrl_c_lands_here() -> bool:
    return (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    )


def _text(exc: BaseException) -> str:
    try:
        return str(exc)[:500]
    except Exception:
        return ""
