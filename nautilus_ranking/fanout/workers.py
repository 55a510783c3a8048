"""Worker threads for the blocking part of a source call.

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

The pool is created on first use, and afresh in a forked child (threads do not
survive ``fork``). The synchronous API's loop is in :mod:`nautilus_ranking.fanout.thread_loop`;
results reach a loop through ``inbox.py``; ``executor.py`` makes the pool a loop's executor.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import functools
import os
import threading
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from nautilus_ranking.errors import NautilusError
from nautilus_ranking.fanout.inbox import Inbox, inbox_of, settle

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
    "nautilus_worker_owner", default=None
)

#: How long a queued call may wait for the busy workers before another one is woken.
SPILL_S = 0.002

_PENDING, _RUNNING, _DONE, _DROPPED = range(4)


class SourceStuckError(NautilusError, RuntimeError):
    """A source's earlier calls are still blocked past their deadlines: no new thread."""


class PoolCall:
    __slots__ = ("fn", "on_done", "owner", "state", "watched")

    def __init__(
        self, fn: Callable[[], Any], owner: object, on_done: Callable[[bool, Any], None]
    ) -> None:
        self.fn = fn
        self.owner = owner
        self.state = _PENDING
        self.on_done = on_done  # (ok, result or exception), called in the worker thread
        #: The caller's loop will look at this call within SPILL_S (its spill timer is
        #: armed): its result may wait for that instead of waking the loop.
        self.watched: tuple[Inbox, Callable[[bool, Any], None]] | None = None


class WorkerPool:
    """Persistent daemon threads taking calls from one queue; see the module docstring.

    Waking a thread costs more than a small query (a context switch, and on a busy
    machine a wait for a core while holding the GIL), so calls are woken for lazily:
    a call gets a new worker only when no worker is awake to take it next, or when it
    has waited :data:`SPILL_S` behind the awake ones (a slow or stuck call never holds
    the others up for longer). A request's four quick lookups run on one worker.
    """

    def __init__(self, size: int = POOL_SIZE, max_stuck: int = MAX_STUCK) -> None:
        self.size = size
        self.max_stuck = max_stuck
        self._lock = threading.Lock()
        self._pending: collections.deque[PoolCall] = collections.deque()
        self._sleeping: list[threading.Lock] = []  # each held until its worker is woken
        self._workers = 0  # threads in the pool (written-off ones not counted)
        self._awake = 0  # of those, the ones not asleep (running a call or about to)
        self._stuck: dict[object, int] = {}  # owner -> abandoned calls still running

    # --- the asyncio side ---------------------------------------------------------------

    async def run(
        self, owner: object, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """``fn(*args)`` in a worker thread, with the caller's context variables, counted
        against ``owner`` (None: the source the broker is calling, if any); a cancelled
        caller abandons the call (see :meth:`abandon`)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        context = contextvars.copy_context()
        inbox = inbox_of(loop)

        def done(ok: bool, value: Any) -> None:
            inbox.put(future, ok, value)

        owner = owner if owner is not None else context.get(current_owner)
        call = self.submit(
            lambda: context.run(fn, *args, **kwargs),
            owner,
            done,
            eager=False,
            wake_later=loop.call_soon,
        )
        spill = None
        if call.state == _PENDING:
            spill = loop.call_later(SPILL_S, self._spill, call, inbox)
            deadline = getattr(owner, "timeout_s", None)
            if not isinstance(deadline, int | float) or deadline > 2 * SPILL_S:
                # (a deadline shorter than that: its result at once)
                call.watched = (inbox, functools.partial(settle, future))
        try:
            return await future
        except asyncio.CancelledError:
            self.abandon(call)
            raise
        finally:
            call.watched = None
            if spill is not None:
                spill.cancel()

    # --- the thread side ----------------------------------------------------------------

    def submit(
        self,
        fn: Callable[[], Any],
        owner: object,
        on_done: Callable[[bool, Any], None],
        eager: bool = True,
        wake_later: Callable[[Callable[[], None]], object] | None = None,
    ) -> PoolCall:
        """Queue ``fn``; ``on_done(ok, value)`` is called in the worker with its outcome.
        ``eager``: wake a worker for it whenever one sleeps (else only when none is awake;
        see :meth:`_spill`). ``wake_later``: how to defer that wake-up (a loop's
        ``call_soon``: after the callbacks the loop has ready, so the calls a request's
        sources queue together wake one worker, which takes them all in turn, instead of
        a worker woken for the first one finding the queue empty, waking the loop for its
        result alone, and being woken again for the next). Raises
        :class:`SourceStuckError` when ``owner`` has too many stuck calls."""
        call = PoolCall(fn, owner, on_done)
        with self._lock:
            stuck = self._stuck.get(owner, 0) if owner is not None else 0
            if stuck >= self.max_stuck:
                raise SourceStuckError(
                    f"{stuck} earlier calls of this source are still blocked past their "
                    "deadline; not starting another until one returns"
                )
            self._pending.append(call)
            wake = self._wake_one() if eager or self._awake == 0 else None
        if wake is not None:
            if wake_later is None:
                wake()
            else:
                try:
                    wake_later(wake)
                except RuntimeError:  # the loop is closed: at once, then
                    wake()
        return call

    def _wake_one(self) -> Callable[[], None] | None:
        """Under the lock: a sleeping worker to wake, or a new one to start (the
        function to call once the lock is released), or None at the pool's size."""
        if self._sleeping:
            self._awake += 1
            return self._sleeping.pop().release
        if self._workers < self.size:
            self._workers += 1
            self._awake += 1
            return self._start_thread
        return None

    def _spill(self, call: PoolCall, inbox: Inbox) -> None:
        """SPILL_S after ``call`` was queued: if it still waits behind the awake
        workers, wake one more; hand over the results that waited for this look."""
        with self._lock:
            call.watched = None  # from now on a worker wakes the loop for its result
            wake = self._wake_one() if call.state == _PENDING else None
        if wake is not None:
            wake()
        inbox.drain()

    def abandon(self, call: PoolCall) -> None:
        """The caller gave up on ``call``: a pending call is dropped; a running one
        writes its thread off, and a replacement is woken if calls are waiting."""
        wake = None
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
            self._awake -= 1
            if self._pending:
                wake = self._wake_one()
        if wake is not None:
            wake()

    def _start_thread(self) -> None:
        threading.Thread(target=self._work, name="nautilus-worker", daemon=True).start()

    def _work(self) -> None:
        asleep = threading.Lock()
        asleep.acquire()
        while True:
            with self._lock:
                call = None
                while self._pending:
                    candidate = self._pending.popleft()
                    if candidate.state == _PENDING:
                        candidate.state = _RUNNING
                        call = candidate
                        break
                if call is None:
                    self._awake -= 1
                    self._sleeping.append(asleep)
            if call is None:
                asleep.acquire()  # until a caller wakes this worker (awake counted then)
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
                    return  # written off: a replacement already took this thread's place
                while self._pending and self._pending[0].state != _PENDING:
                    self._pending.popleft()  # dropped by their callers
                if call.watched is not None and self._pending:
                    # This thread goes straight on to the next call: the result waits,
                    # without waking the loop, for a later wake-up or the call's spill
                    # timer (under the lock: ordered with the timer's look).
                    inbox, settle = call.watched
                    inbox.put_quietly(settle, ok, value)
                    call = None
            if call is not None:
                call.on_done(ok, value)
            del call, value

    def stats(self) -> dict[str, int]:
        """Workers in the pool, idle ones, and stuck calls (for tests and diagnostics)."""
        with self._lock:
            return {
                "workers": self._workers,
                "idle": len(self._sleeping),
                "stuck": sum(self._stuck.values()),
            }


_pool: WorkerPool | None = None
_guard = threading.Lock()


def shared_pool() -> WorkerPool:
    """The process's worker pool (created on first use)."""
    global _pool
    if _pool is None:
        with _guard:
            if _pool is None:
                _pool = WorkerPool()
    return _pool


async def in_worker(owner: object, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``await in_worker(source, fn, ...)``: ``fn`` in the shared pool, counted against
    ``source`` (``asyncio.to_thread``'s place for nautilus' own blocking calls, whatever
    loop awaits it)."""
    return await shared_pool().run(owner, fn, *args, **kwargs)


def _after_fork_in_child() -> None:
    """A forked child has none of the parent's threads: start afresh on first use."""
    global _pool, _guard
    _guard = threading.Lock()
    _pool = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
