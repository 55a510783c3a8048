"""The fan-out's machinery: persistent worker threads, written off when a call is stuck,
bounded however often a source hangs; one long-lived loop for the synchronous API."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeSource

from nautilus_ranking import Broker
from nautilus_ranking.fanout import workers
from nautilus_ranking.fanout.workers import MAX_STUCK, POOL_SIZE, WorkerPool, shared_pool
from nautilus_ranking.sources.sqlite.connections import IDLE_CONNECTIONS
from nautilus_ranking.sources.sqlite.table import SqliteTableSource

HANG_EVERY = 10


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


class HangsInSqlite(SqliteTableSource):
    """A real SQLite source whose every tenth search blocks its worker thread (as a
    query stuck in SQLite would) until the test releases it — forever, for the broker."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls = 0
        self.release = threading.Event()

    def query_rows(
        self, connection: sqlite3.Connection, query: str, context: Mapping[str, Any], limit: int
    ) -> list[dict[str, Any]]:
        self.calls += 1
        if self.calls % HANG_EVERY == 0:
            self.release.wait()
        return super().query_rows(connection, query, context, limit)


class HangsInToThread:
    """Someone else's source: every tenth search blocks in ``asyncio.to_thread``."""

    def __init__(self, source_id: str) -> None:
        self.id, self.timeout_s = source_id, 0.05
        self.calls = 0
        self.release = threading.Event()

    def _answer(self, hang: bool) -> list[dict[str, Any]]:
        if hang:
            self.release.wait()
        return [{"t": "disk from a thread"}]

    async def search(self, query: str, context: Mapping[str, Any], limit: int) -> Any:
        self.calls += 1
        return await asyncio.to_thread(self._answer, self.calls % HANG_EVERY == 0)

    def close(self) -> None:
        self.release.set()


def table(
    tmp_path: Path,
    name: str,
    cls: type[SqliteTableSource] = SqliteTableSource,
    timeout_s: float = 5.0,
) -> Any:
    seed = tmp_path / f"{name}.jsonl"
    seed.write_text('{"id": 1, "t": "disk full"}\n{"id": 2, "t": "disk slow"}\n', encoding="utf-8")
    return cls(name, tmp_path / f"{name}.db", seed, "t", ["t"], timeout_s=timeout_s)


def test_a_thousand_requests_with_sources_hanging_forever_keep_threads_and_fds_bounded(
    tmp_path: Path,
) -> None:
    # Deadlines long enough that a call which does not hang always makes it, even on a
    # loaded machine: the counts below are exact (the hangs wait 8 x 0.3 s in all).
    hangs_sqlite = table(tmp_path, "stuck_sqlite", HangsInSqlite, timeout_s=0.3)
    hangs_thread = HangsInToThread("stuck_thread")
    hangs_thread.timeout_s = 0.3
    plain = table(tmp_path, "plain")
    broker = Broker([hangs_sqlite, hangs_thread, plain])
    try:
        broker.request("disk")  # builds the databases, starts the pool and the sync loop
        threads_at_start, fds_at_start = threading.active_count(), open_fds()
        samples: list[tuple[int, int, int]] = []
        errors: dict[tuple[str, str], int] = {}
        for i in range(1000):
            response = broker.request("disk")
            assert response.data["plain"] == [
                {"id": 1, "t": "disk full"},
                {"id": 2, "t": "disk slow"},
            ]
            for error in response.sources_errored:
                key = (error.source_id, error.error_type)
                errors[key] = errors.get(key, 0) + 1
            if i % 50 == 49:
                samples.append(
                    (threading.active_count(), open_fds(), shared_pool().stats()["stuck"])
                )
        # Bounded: the pool plus the stuck threads, whatever the number of requests
        # (a thread per call before: a hundred stuck threads per hanging source).
        assert max(n for n, _, _ in samples) <= threads_at_start + POOL_SIZE + 2 * MAX_STUCK
        assert max(f for _, f, _ in samples) <= fds_at_start + MAX_STUCK + 2 * IDLE_CONNECTIONS
        assert samples[-1][2] == samples[len(samples) // 2][2]  # stuck calls: flat
        # Each hanging source had MAX_STUCK calls abandoned at their deadline; from then
        # on it is refused at once instead of being handed yet another thread.
        assert errors[("stuck_sqlite", "timeout")] == MAX_STUCK
        assert errors[("stuck_thread", "timeout")] == MAX_STUCK
        assert set(errors) == {
            (s, t)
            for s in ("stuck_sqlite", "stuck_thread")
            for t in ("timeout", "SourceStuckError")
        }
    finally:
        hangs_sqlite.release.set()
        hangs_thread.release.set()
    # Released, the stuck threads return and exit; both sources answer again.
    for _ in range(200):
        if shared_pool().stats()["stuck"] == 0:
            break
        threading.Event().wait(0.02)
    assert shared_pool().stats()["stuck"] == 0
    again = broker.request("disk")
    assert again.sources_errored == []
    assert threading.active_count() <= threads_at_start + POOL_SIZE
    broker.close()


def test_an_abandoned_worker_is_replaced_and_the_others_are_not_held_up(tmp_path: Path) -> None:
    """As many stuck calls as the pool has threads: the source queued behind them is
    answered by a replacement, and the next request by fresh workers."""
    stuck = [table(tmp_path, f"stuck{i}", HangsInSqlite, timeout_s=0.05) for i in range(POOL_SIZE)]
    for source in stuck:
        source.calls = HANG_EVERY - 1  # the very next search hangs, the ones after do not
    plain = table(tmp_path, "plain")
    broker = Broker([*stuck, plain])
    try:
        first = broker.request("disk")
        assert [e.error_type for e in first.sources_errored] == ["timeout"] * len(stuck)
        assert first.data["plain"] == [{"id": 1, "t": "disk full"}, {"id": 2, "t": "disk slow"}]
        for _ in range(10):  # a call dropped while still queued hangs on its next turn
            if all(source.calls >= HANG_EVERY for source in stuck):
                break
            assert broker.request("disk").data["plain"]
        assert shared_pool().stats()["stuck"] >= len(stuck)
        after = broker.request("disk")  # every earlier worker is still stuck
        assert after.sources_errored == []
    finally:
        for source in stuck:
            source.release.set()


def test_the_sync_api_reuses_one_loop_and_its_threads() -> None:
    loops, threads = set(), set()

    class SeesItsLoop(FakeSource):
        async def search(self, query: str, context: Mapping[str, Any], limit: int) -> Any:
            loops.add(id(asyncio.get_running_loop()))
            return await asyncio.to_thread(lambda: [{"t": threading.get_ident()}])

    broker = Broker([SeesItsLoop("b")])
    for _ in range(50):
        threads.add(broker.request("disk").data["b"][0]["t"])
    assert len(loops) == 1  # a new loop per call before
    assert len(threads) <= POOL_SIZE  # and a new thread per call


def test_request_from_many_threads_at_once(tmp_path: Path) -> None:
    broker = Broker([table(tmp_path, "a"), FakeSource("b", [{"t": "disk"}])])
    out: list[Any] = []

    def call() -> None:
        out.extend(broker.request("disk").data["a"] for _ in range(20))

    workers = [threading.Thread(target=call) for _ in range(8)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(60)
    assert len(out) == 160 and all(rows == out[0] for rows in out)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_gets_its_own_loop_and_workers(tmp_path: Path) -> None:
    script = tmp_path / "fork.py"
    script.write_text(
        "import os, sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from fakes import FakeSource\n"
        "from nautilus_ranking import Broker\n"
        "import asyncio\n"
        "class T(FakeSource):\n"
        "    async def search(self, q, c, n):\n"
        "        return await asyncio.to_thread(lambda: [{'t': os.getpid()}])\n"
        "b = Broker([T('t')])\n"
        "parent = b.request('x').data['t'][0]['t']\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    child = b.request('x').data['t'][0]['t']\n"
        "    os._exit(0 if child == os.getpid() else 3)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print(parent == os.getpid(), os.waitstatus_to_exitcode(status))\n"
    )
    done = subprocess.run(
        [sys.executable, str(script), str(Path(__file__).parents[1])],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.split() == ["True", "0"]


def test_a_result_left_for_the_loop_arrives_while_the_next_call_hangs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One busy worker, two calls queued behind it: the first one's result is left for
    the loop without waking it while the worker goes on to the second, and still reaches
    its caller (at its spill timer, made long enough here to be still ahead) though the
    second never returns."""
    monkeypatch.setattr(workers, "SPILL_S", 0.5)
    pool = WorkerPool(size=1)
    go, release = threading.Event(), threading.Event()

    class Owner:
        timeout_s = 5.0

    def hold() -> str:
        go.wait(10)
        return "held"

    def slow_first() -> str:  # long enough for the loop to have taken hold's result
        time.sleep(0.05)
        return "first"

    async def main() -> None:
        held = asyncio.ensure_future(pool.run(Owner(), hold))  # the worker is busy with it
        await asyncio.sleep(0.01)
        answer = asyncio.ensure_future(pool.run(Owner(), slow_first))
        hangs = asyncio.ensure_future(pool.run(Owner(), release.wait))
        await asyncio.sleep(0.01)  # both queued behind it, the first one's timer armed
        go.set()
        try:
            assert await asyncio.wait_for(held, 10) == "held"
            assert await asyncio.wait_for(answer, 10) == "first"
            assert not hangs.done()
        finally:
            release.set()
        assert await asyncio.wait_for(hangs, 10) is True

    asyncio.run(main())
