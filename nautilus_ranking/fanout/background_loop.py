"""An event loop of its own in a daemon thread, for work that must not run on the caller's.

Two parts of nautilus need one: the service runs each worker's broker there (ranking
is CPU work that would stall the HTTP loop: see :mod:`nautilus_ranking.service.runner`), and
the PostgreSQL sources keep their connection pools there (a pool is bound to the loop
that opened it, and requests come from many loops). Its default executor is
nautilus' worker pool, so an ``asyncio.to_thread`` stuck past its deadline costs a
replaced thread, never the pool.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

import structlog

from nautilus_ranking.fanout.abandon import abandon, watch
from nautilus_ranking.fanout.thread_loop import new_loop
from nautilus_ranking.tracing.carry import carry

T = TypeVar("T")


class BackgroundLoop:
    """A private event loop in a daemon thread named ``name``."""

    def __init__(self, name: str) -> None:
        self.loop = new_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Schedule ``coro`` on the loop, from any thread, in the caller's trace context
        (when tracing is on: its spans are the caller's children)."""
        carried = carry()
        if carried is not None:
            coro = carried.into(coro)
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """The coroutine's result, computed on this loop, awaited from another; cancelling
        the caller (a deadline) cancels it here too, and stops its CPU work at the next
        checkpoint (:mod:`nautilus_ranking.fanout.abandon`). The caller's log context goes
        along, and its trace context (:meth:`submit`)."""
        context = structlog.contextvars.get_contextvars()
        flag = threading.Event()

        async def with_context() -> T:
            structlog.contextvars.bind_contextvars(**context)
            watch(flag)
            return await coro

        try:
            return await asyncio.wrap_future(self.submit(with_context()))
        except asyncio.CancelledError:
            abandon(flag)  # this loop may be busy ranking: it reads the flag, not the cancel
            raise

    def stop(self, timeout: float = 10.0) -> None:
        """Cancel what is left, stop the loop and wait (at most ``timeout``) for its thread."""

        def shutdown() -> None:
            for task in asyncio.all_tasks(self.loop):
                task.cancel()
            self.loop.stop()

        self.loop.call_soon_threadsafe(shutdown)
        self.thread.join(timeout=timeout)
        if not self.thread.is_alive():
            self.loop.close()
