"""Each worker's broker runs on an event loop of its own, in one background thread.

Ranking is CPU work that ``Broker.arequest`` does on the loop that awaits it. On the
HTTP loop it would stall everything else: requests would wait unparsed (so the
concurrency limit never sees them and cannot shed load) and ``/healthz`` would
answer late under load — exactly how a busy pod gets killed by its liveness probe.
On its own loop the broker keeps its concurrency (sources fan out as before) and
the HTTP loop stays free to parse, refuse, probe and scrape; numpy releases the GIL
for the heavy part.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

import structlog

from nautilus.workers import new_loop

T = TypeVar("T")


class BrokerLoop:
    """A private event loop in a daemon thread; ``await run(coro)`` from any other loop.
    Its default executor is nautilus' worker pool, so a source's ``asyncio.to_thread``
    stuck past its deadline costs a replaced thread, never the pool."""

    def __init__(self) -> None:
        self._loop = new_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="nautilus-broker",
                                        daemon=True)
        self._thread.start()

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """The coroutine's result, computed on the broker loop; cancelling the caller
        (a deadline) cancels it there too. The caller's log context goes along."""
        context = structlog.contextvars.get_contextvars()

        async def with_context() -> T:
            structlog.contextvars.bind_contextvars(**context)
            return await coro

        future = asyncio.run_coroutine_threadsafe(with_context(), self._loop)
        return await asyncio.wrap_future(future)

    def stop(self) -> None:
        """Cancel what is left, stop the loop and wait for its thread."""
        def shutdown() -> None:
            for task in asyncio.all_tasks(self._loop):
                task.cancel()
            self._loop.stop()

        self._loop.call_soon_threadsafe(shutdown)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()
