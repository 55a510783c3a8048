"""A request's ranking stops once nobody waits for its answer.

Ranking is CPU work done on the loop that awaits it (a server's broker loop,
``service/runner.py``): a deadline that cancels the request's task reaches it only at its
next ``await``, which for a ranking is its end. So whoever runs a call on another loop
(:meth:`~nautilus_ranking.fanout.background_loop.BackgroundLoop.run`) hands it a flag,
:func:`abandon`\\ ed when the caller stops waiting (its deadline answered 504), and the
ranking's stages call :func:`checkpoint` between them: past a set flag the ranking
raises ``CancelledError`` — the task was cancelled; its cancellation arrives a stage
later instead of after the whole ranking — and logs ``ranking_abandoned`` once, with
the stage it stopped at. Outside such a call (the library, the CLI) a checkpoint is one
context-variable read.
"""

from __future__ import annotations

import asyncio
import threading
from contextvars import ContextVar

from nautilus_ranking.log import get_logger

logger = get_logger("nautilus_ranking.ranking")

_FLAG: ContextVar[threading.Event | None] = ContextVar("nautilus_abandoned", default=None)


def watch(flag: threading.Event) -> None:
    """``flag`` watches the call that runs in this context (set it to abandon the call)."""
    _FLAG.set(flag)


def abandon(flag: threading.Event) -> None:
    """Nobody waits for the call that ``flag`` watches: its next checkpoint stops it."""
    flag.set()


def can_be_abandoned() -> bool:
    """Whether a caller watches the call running in this context (it may abandon it)."""
    return _FLAG.get() is not None


def abandoned() -> bool:
    """Whether the caller has abandoned this call, without stopping it: for a loop of
    chunks that keeps what it finished before its :func:`checkpoint`."""
    flag = _FLAG.get()
    return flag is not None and flag.is_set()


def checkpoint(stage: str) -> None:
    """Stop here (``CancelledError``) when the caller has abandoned this call."""
    flag = _FLAG.get()
    if flag is not None and flag.is_set():
        logger.warning("ranking_abandoned", stage=stage, reason="the caller stopped waiting")
        _FLAG.set(None)  # logged once; the cancellation ends the task anyway
        raise asyncio.CancelledError(f"ranking abandoned at {stage}")
