"""The worker pool as an event loop's default executor.

``asyncio.to_thread`` on a nautilus loop then gets a persistent worker of the shared
pool (``workers.py``), and a cancelled call is abandoned as in ``WorkerPool.run``.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from nautilus_ranking.fanout.workers import PoolCall, WorkerPool, current_owner, shared_pool

P = ParamSpec("P")
T = TypeVar("T")


class PoolExecutor(concurrent.futures.ThreadPoolExecutor):
    """The pool as a loop's default executor: ``asyncio.to_thread`` on a nautilus loop
    gets a persistent worker, and a cancelled call is abandoned as in :meth:`WorkerPool.run`.
    (A ``ThreadPoolExecutor`` only because asyncio insists; it starts no thread of its own.)
    """

    def submit(
        self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> concurrent.futures.Future[T]:
        pool = shared_pool()
        future: _PoolFuture[T] = _PoolFuture()

        def done(ok: bool, value: Any) -> None:
            if not future.set_running_or_notify_cancel():
                return
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

        future.call = pool.submit(lambda: fn(*args, **kwargs), current_owner.get(), done)
        future.pool = pool
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Nothing to join: the threads are shared and abandoned calls end on their own."""


class _PoolFuture(concurrent.futures.Future[T]):
    call: PoolCall | None = None
    pool: WorkerPool | None = None

    def cancel(self) -> bool:
        if self.call is not None and self.pool is not None:
            self.pool.abandon(self.call)
        return super().cancel()
