"""Worker threads for the blocking part of a source call, and the sync API's loop.

A source's blocking work (a SQLite query, building its database) runs in a worker
thread, so the event loop stays free and the broker can give up at the source's
deadline. Starting a thread for every call cost more than the query, so these
threads live on and take the next call. A call abandoned at its deadline keeps its
thread (Python cannot stop one): that thread is written off — a replacement takes
its place in the pool and the stuck thread exits when its call returns. While
:data:`MAX_STUCK` calls of one source are still stuck past their deadlines that
source is refused at once (:class:`SourceStuckError`) instead of being handed
another thread, so a source that hangs forever costs a bounded number of threads.
Worker threads are daemons: a stuck one never holds the process open.

The synchronous API (``Broker.request``) runs on one long-lived event loop in a
daemon thread instead of a new loop per call. Both are created on first use and
again in a forked child (threads do not survive ``fork``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

#: Abandoned calls of one source that may still be running before it is refused.
MAX_STUCK = 4
#: Worker threads kept (the standard library's default for I/O-bound pools).
POOL_SIZE = min(32, (os.cpu_count() or 1) + 4)

#: The source a call is made for, when the caller does not name one: the broker sets
#: it around each source's call, so ``asyncio.to_thread`` inside a source run on a
#: nautilus loop is counted against that source.
current_owner: contextvars.ContextVar[object] = contextvars.ContextVar(
    "nautilus_worker_owner", default=None)

_PENDING, _RUNNING, _DONE, _DROPPED = range(4)


class SourceStuckError(RuntimeError):
    """A source's earlier calls are still blocked past their deadlines: no new thread."""


class _Call:
    __slots__ = ("fn", "on_done", "owner", "state")

    def __init__(self, fn: Callable[[], Any], owner: object,
                 on_done: Callable[[bool, Any], None]) -> None:
        self.fn = fn
        self.owner = owner
        self.state = _PENDING
        self.on_done = on_done  # (ok, result or exception), called in the worker thread


class WorkerPool:
    """Persistent daemon threads taking calls from one queue; see the module docstring."""

    def __init__(self, size: int = POOL_SIZE, max_stuck: int = MAX_STUCK) -> None:
        self.size = size
        self.max_stuck = max_stuck
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._workers = 0  # threads in the pool (written-off ones not counted)
        self._idle = 0  # of those, waiting for a call
        self._stuck: dict[object, int] = {}  # owner -> abandoned calls still running
        self._running: dict[_Call, None] = {}  # calls started, not yet returned

    # --- the asyncio side ---------------------------------------------------------------

    async def run(self, owner: object, fn: Callable[P, T], /, *args: P.args,
                  **kwargs: P.kwargs) -> T:
        """``fn(*args)`` in a worker thread, with the caller's context variables, counted
        against ``owner`` (None: the source the broker is calling, if any); a cancelled
        caller abandons the call (see :meth:`abandon`)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        context = contextvars.copy_context()

        def done(ok: bool, value: Any) -> None:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                loop.call_soon_threadsafe(_settle, future, ok, value)

        call = self.submit(lambda: context.run(fn, *args, **kwargs),
                           owner if owner is not None else context.get(current_owner), done)
        try:
            return await future
        except asyncio.CancelledError:
            self.abandon(call)
            raise

    # --- the thread side ----------------------------------------------------------------

    def submit(self, fn: Callable[[], Any], owner: object,
               on_done: Callable[[bool, Any], None]) -> _Call:
        """Queue ``fn``; ``on_done(ok, value)`` is called in the worker with its outcome.
        Raises :class:`SourceStuckError` when ``owner`` has too many stuck calls."""
        call = _Call(fn, owner, on_done)
        with self._lock:
            stuck = self._stuck.get(owner, 0) if owner is not None else 0
            if stuck >= self.max_stuck:
                raise SourceStuckError(
                    f"{stuck} earlier calls of this source are still blocked past their "
                    "deadline; not starting another until one returns")
            start = self._idle <= 0 and self._workers < self.size
            if start:
                self._workers += 1
            else:
                self._idle -= 1  # reserved: the next idle worker takes this call
        self._queue.put(call)
        if start:
            self._start_thread()
        return call

    def abandon(self, call: _Call) -> None:
        """The caller gave up on ``call``: a pending call is dropped; a running one
        writes its thread off and a replacement joins the pool."""
        with self._lock:
            if call.state == _PENDING:
                call.state = _DROPPED
                return
            if call.state != _RUNNING:
                return
            call.state = _DROPPED
            if call.owner is not None:
                self._stuck[call.owner] = self._stuck.get(call.owner, 0) + 1
            self._workers -= 1  # the stuck thread leaves the pool when its call returns
            replace = self._idle < 0  # calls are queued with no worker to take them
            if replace:
                self._workers += 1
                self._idle += 1
        if replace:
            self._start_thread()

    def _start_thread(self) -> None:
        threading.Thread(target=self._work, name="nautilus-worker", daemon=True).start()

    def _work(self) -> None:
        while True:
            call = self._queue.get()
            if call is None:
                return
            with self._lock:
                dropped = call.state == _DROPPED
                if dropped:
                    self._idle += 1  # the slot reserved for it is free again
                else:
                    call.state = _RUNNING
            if dropped:
                continue
            try:
                value, ok = call.fn(), True
            except BaseException as exc:  # handed to the caller, like the stock pool
                value, ok = exc, False
            with self._lock:
                abandoned = call.state == _DROPPED
                call.state = _DONE
                if abandoned:
                    left = self._stuck.get(call.owner, 1) - 1
                    if left > 0:
                        self._stuck[call.owner] = left
                    else:
                        self._stuck.pop(call.owner, None)
                else:
                    self._idle += 1
            if not abandoned:
                call.on_done(ok, value)
            del call, value
            if abandoned:
                return  # written off: a replacement already took this thread's place

    def stats(self) -> dict[str, int]:
        """Workers in the pool, idle ones, and stuck calls (for tests and diagnostics)."""
        with self._lock:
            return {"workers": self._workers, "idle": max(self._idle, 0),
                    "stuck": sum(self._stuck.values())}


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


class PoolExecutor(concurrent.futures.ThreadPoolExecutor):
    """The pool as a loop's default executor: ``asyncio.to_thread`` on a nautilus loop
    gets a persistent worker, and a cancelled call is abandoned as in :meth:`WorkerPool.run`.
    (A ``ThreadPoolExecutor`` only because asyncio insists; it starts no thread of its own.)
    """

    def submit(self, fn: Callable[P, T], /, *args: P.args,
               **kwargs: P.kwargs) -> concurrent.futures.Future[T]:
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
    call: _Call | None = None
    pool: WorkerPool | None = None

    def cancel(self) -> bool:
        if self.call is not None and self.pool is not None:
            self.pool.abandon(self.call)
        return super().cancel()


_pool: WorkerPool | None = None
_sync_loop: _SyncLoop | None = None
_guard = threading.Lock()


def shared_pool() -> WorkerPool:
    """The process's worker pool (created on first use)."""
    global _pool
    if _pool is None:
        with _guard:
            if _pool is None:
                _pool = WorkerPool()
    return _pool


async def in_worker(owner: object, fn: Callable[P, T], /, *args: P.args,
                    **kwargs: P.kwargs) -> T:
    """``await in_worker(source, fn, ...)``: ``fn`` in the shared pool, counted against
    ``source`` (``asyncio.to_thread``'s place for nautilus' own blocking calls, whatever
    loop awaits it)."""
    return await shared_pool().run(owner, fn, *args, **kwargs)


def new_loop() -> asyncio.AbstractEventLoop:
    """An event loop whose default executor is the shared pool."""
    loop = asyncio.new_event_loop()
    loop.set_default_executor(PoolExecutor())
    return loop


class _SyncLoop:
    """One event loop in a daemon thread that every synchronous call runs on."""

    def __init__(self) -> None:
        self.loop = new_loop()
        self.thread = threading.Thread(target=self._serve, name="nautilus-sync", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        # A task that raises SystemExit or KeyboardInterrupt (a source's own) ends
        # run_forever; its caller gets the exception and the loop carries on.
        while True:
            try:
                self.loop.run_forever()
                return
            except BaseException:  # delivered to the caller by finish()
                continue

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """The coroutine's result, computed on the loop with the caller's context
        variables; an exception in the waiting caller (Ctrl-C) cancels it there."""
        context = contextvars.copy_context()
        result: concurrent.futures.Future[T] = concurrent.futures.Future()
        tasks: list[asyncio.Task[T]] = []

        def start() -> None:
            if not result.set_running_or_notify_cancel():
                coroutine.close()
                return
            task = self.loop.create_task(coroutine, context=context)
            tasks.append(task)
            task.add_done_callback(finish)

        def finish(task: asyncio.Task[T]) -> None:
            if task.cancelled():
                result.set_exception(concurrent.futures.CancelledError())
            elif (error := task.exception()) is not None:
                result.set_exception(error)
            else:
                result.set_result(task.result())

        self.loop.call_soon_threadsafe(start)
        try:
            return result.result()
        except BaseException:
            if not result.cancel():  # started: cancel it on the loop
                self.loop.call_soon_threadsafe(lambda: [t.cancel() for t in tasks])
            raise


def sync_loop() -> _SyncLoop:
    global _sync_loop
    if _sync_loop is None:
        with _guard:
            if _sync_loop is None:
                _sync_loop = _SyncLoop()
    return _sync_loop


def _after_fork_in_child() -> None:
    """A forked child has none of the parent's threads: start afresh on first use."""
    global _pool, _sync_loop, _guard
    _guard = threading.Lock()
    _pool = None
    _sync_loop = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
