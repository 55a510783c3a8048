"""The synchronous API's event loop: one long-lived loop per calling thread, run in it.

``Broker.request`` runs on a loop of the calling thread's own, instead of a new loop
per call (and with no hop to another thread and back). Its default executor is the
worker pool (:mod:`nautilus_ranking.fanout.workers`). A loop is created on first use, and afresh in
a forked child.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from nautilus_ranking.fanout.executor import PoolExecutor

T = TypeVar("T")


def new_loop() -> asyncio.AbstractEventLoop:
    """An event loop whose default executor is the shared pool."""
    loop = asyncio.new_event_loop()
    loop.set_default_executor(PoolExecutor())
    return loop


class _ThreadLoop:
    """One thread's long-lived event loop for the synchronous API, run in that thread
    (no hop to another thread and back). Closed when the thread ends."""

    def __init__(self) -> None:
        self.loop = new_loop()
        self.forked = False

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """The coroutine's result, with the caller's context variables. An exception
        out of the loop (Ctrl-C) cancels the coroutine before it propagates.

        Not ``asyncio.Runner``: in the main thread it swaps the SIGINT handler on every
        call, and on 3.11 each swap formats the previous handler — a partial holding the
        last request's task, rows and all — into an error message nobody reads (10% of
        a request's time in a profile)."""
        task = self.loop.create_task(coroutine, context=contextvars.copy_context())
        try:
            return self.loop.run_until_complete(task)
        except BaseException:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    self.loop.run_until_complete(task)
            raise

    def __del__(self) -> None:
        # The thread is gone (its thread-local went with it): release the selector and
        # the self-pipe. Never in a forked child: those are shared with the parent.
        if not self.forked and not self.loop.is_closed() and not self.loop.is_running():
            self.loop.close()


_here = threading.local()
_forked_leftovers: list[_ThreadLoop] = []


def run_in_this_thread(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` on this thread's long-lived loop (created on first use)."""
    held: _ThreadLoop | None = getattr(_here, "loop", None)
    if held is None:
        held = _here.loop = _ThreadLoop()
    return held.run(coroutine)


def _after_fork_in_child() -> None:
    """A forked child has none of the parent's threads: its loops start afresh."""
    global _here
    held = getattr(_here, "loop", None)
    if held is not None:  # the parent's: kept, never closed here (see _ThreadLoop)
        held.forked = True
        _forked_leftovers.append(held)
    _here = threading.local()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def run_sync(coroutine: Coroutine[Any, Any, T], name: str, instead: str) -> T:
    """Run ``coroutine`` to completion on this thread's long-lived loop
    (this module's), whose worker threads are never waited for. Inside a running
    loop this raises ``RuntimeError`` (as ``asyncio.run`` does) naming the
    awaitable to use."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run_in_this_thread(coroutine)
    coroutine.close()
    raise RuntimeError(f"{name} was called inside a running event loop; use '{instead}' instead")
