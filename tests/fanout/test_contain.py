"""What a source raises stays in its own call: ``SystemExit``, ``KeyboardInterrupt``,
``CancelledError`` or any ``BaseException``, from its search, its ``prepare`` or a worker
thread, fails that source alone, in the broker and in the readiness prober; a real
cancellation and a real Ctrl-C on the main thread still stop what they stop.
(The servers as real processes, and real signals to them: tests/service/.)"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from nautilus_ranking import Broker
from nautilus_ranking.fanout.workers import in_worker
from nautilus_ranking.service.readiness import Readiness

ROWS = [{"id": "g1", "title": "disk full"}]
RAISED: dict[str, Callable[[], BaseException]] = {
    "SystemExit": lambda: SystemExit(3),
    "KeyboardInterrupt": KeyboardInterrupt,
    "CancelledError": asyncio.CancelledError,
    "BaseException": lambda: BaseException("its own"),
}


class Raising:
    """A source that raises ``raises`` in ``where``: its search, a worker, its prepare."""

    def __init__(self, raises: str, where: str = "search", source_id: str = "bad") -> None:
        self.id, self.timeout_s, self.raises, self.where = source_id, 5.0, raises, where
        self.calls = 0

    def _raise(self) -> None:
        raise RAISED[self.raises]()

    async def prepare(self) -> None:
        if self.where == "prepare":
            self._raise()

    async def search(self, query: str, context: Mapping[str, Any], limit: int) -> Any:
        self.calls += 1
        if self.where == "worker":
            await in_worker(self, self._raise)
        self._raise()

    def close(self) -> None:
        if self.where == "close":
            self._raise()


class Good:
    def __init__(self) -> None:
        self.id, self.timeout_s, self.calls = "good", 5.0, 0

    async def search(self, query: str, context: Mapping[str, Any], limit: int) -> Any:
        self.calls += 1
        return ROWS

    def close(self) -> None:
        pass


def in_a_thread(fn: Callable[[], Any]) -> Any:
    """``fn()`` in a thread of its own, as a server runs its broker (not the main thread,
    where a real Ctrl-C lands)."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    thread.join(60)
    assert out, "the call did not return"
    return out[0]


@pytest.mark.parametrize("where", ["search", "worker", "prepare"])
@pytest.mark.parametrize("raises", sorted(RAISED))
def test_what_a_source_raises_fails_that_source_alone(raises: str, where: str) -> None:
    broker = Broker([Raising(raises, where), Good()])
    response = in_a_thread(lambda: broker.request("disk"))
    assert response.data == {"good": ROWS}
    [error] = response.sources_errored
    assert (error.source_id, error.error_type) == ("bad", raises)
    broker.close()


@pytest.mark.parametrize("raises", sorted(RAISED))
def test_the_readiness_prober_survives_what_a_source_raises(raises: str) -> None:
    """Before: a source raising ``CancelledError`` ended the prober (``/readyz`` 503 for
    good); ``SystemExit`` ended the loop it ran on."""
    bad, good = Raising(raises), Good()
    readiness = Readiness([bad, good], interval_s=60.0)
    running = Readiness([Raising(raises), Good()], interval_s=0.0)

    async def probe() -> None:
        for _ in range(3):
            await readiness.probe_once()
        prober = asyncio.create_task(running.run())
        for _ in range(10_000):  # bounded: until both were probed three times
            await asyncio.sleep(0)
            if all(s.calls >= 3 for s in running.sources):  # type: ignore[attr-defined]
                break
        assert not prober.done()
        prober.cancel()  # a real cancellation (the server stopping) still stops it
        with pytest.raises(asyncio.CancelledError):
            await prober

    in_a_thread(lambda: asyncio.run(probe()))
    assert bad.calls == good.calls == 3
    assert list(readiness.failing()) == ["bad"]
    assert readiness.failing()["bad"].startswith(raises)
    assert all(s.calls >= 3 for s in running.sources)  # type: ignore[attr-defined]


def test_closing_a_source_that_raises_closes_the_others() -> None:
    closed = []

    class Closing(Good):
        def close(self) -> None:
            closed.append(self.id)

    broker = Broker([Raising("SystemExit", "close"), Closing()])
    in_a_thread(broker.close)
    assert closed == ["good"]


def test_a_real_ctrl_c_on_the_main_thread_still_stops_the_call() -> None:
    """On the main thread under Python's default SIGINT handler, a ``KeyboardInterrupt``
    may be a real Ctrl-C: it is not taken for the source's failure. ``SystemExit``
    never comes from a signal, so it stays the source's own there too."""
    assert threading.current_thread() is threading.main_thread()
    # The handler a program's main thread has; a test runner's worker may hold another.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        broker = Broker([Raising("KeyboardInterrupt"), Good()])
        with pytest.raises(KeyboardInterrupt):
            broker.request("disk")
        broker = Broker([Raising("SystemExit"), Good()])
        response = broker.request("disk")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert [e.error_type for e in response.sources_errored] == ["SystemExit"]


def test_a_cancelled_request_is_still_cancelled() -> None:
    class Hanging(Good):
        async def search(self, query: str, context: Mapping[str, Any], limit: int) -> Any:
            await asyncio.Event().wait()

    async def cancel() -> None:
        broker = Broker([Hanging(), Good()])
        task = asyncio.create_task(broker.arequest("disk"))
        for _ in range(1000):  # bounded: until the search is waiting
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    in_a_thread(lambda: asyncio.run(cancel()))
