"""Results handed back to an event loop in batches: one wake-up for all that arrive.

The worker threads (``workers.py``) finish calls made from a loop; waking that loop once
per result made it contend for the GIL with the worker's next query, so results wait
here for one drain.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

from nautilus_ranking.fanout.contain import SourceRaisedError


class Inbox:
    """Results for one loop: one wake-up of the loop for all that arrive before it runs.

    A worker that goes straight on to another call leaves a result here without a
    wake-up (:meth:`put_quietly`): waking the loop mid-batch made it contend for the
    GIL with the worker's next query (a request's four lookups took half as long
    again). Such a result is handed over with the next wake-up or by its call's spill
    timer, so it waits at most :data:`SPILL_S` after its call was queued.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.lock = threading.Lock()
        self.items: list[tuple[Callable[[bool, Any], None], bool, Any]] = []
        self.waking = False  # a drain is scheduled on the loop

    def put(self, future: asyncio.Future[Any], ok: bool, value: Any) -> None:
        with self.lock:
            self.items.append((functools.partial(settle, future), ok, value))
            if self.waking:
                return  # a wake-up is already on its way
            self.waking = True
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            self.loop.call_soon_threadsafe(self.drain)

    def put_quietly(self, settle: Callable[[bool, Any], None], ok: bool, value: Any) -> None:
        """Keep a call's outcome for the next drain, without waking the loop."""
        with self.lock:
            self.items.append((settle, ok, value))

    def drain(self) -> None:
        with self.lock:
            items, self.items = self.items, []
            self.waking = False
        for settle, ok, value in items:
            settle(ok, value)


_inboxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Inbox] = weakref.WeakKeyDictionary()
_inboxes_guard = threading.Lock()


def inbox_of(loop: asyncio.AbstractEventLoop) -> Inbox:
    inbox = _inboxes.get(loop)
    if inbox is None:
        with _inboxes_guard:
            inbox = _inboxes.setdefault(loop, Inbox(loop))
    return inbox


def settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():
        return
    if ok:
        future.set_result(value)
    elif isinstance(value, Exception):
        future.set_exception(value)
    else:  # SystemExit, CancelledError…: the call's own (never a signal in a worker
        future.set_exception(SourceRaisedError(value))  # thread), not a stop of the loop


def _after_fork_in_child() -> None:
    """A forked child has none of the parent's loops or threads: start afresh."""
    global _inboxes, _inboxes_guard
    _inboxes_guard = threading.Lock()
    _inboxes = weakref.WeakKeyDictionary()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
