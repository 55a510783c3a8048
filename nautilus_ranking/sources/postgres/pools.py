"""The PostgreSQL connection pools: one per DSN for the whole process, on a loop of their own.

A pool is bound to the loop that opened it, and a request may come from any loop (the
synchronous API's, the service's, a caller's ``asyncio.run``), so a pool on the
caller's loop could die with it; on its own loop (:class:`BackgroundLoop`) it lives as
long as the process, and every pool is created, used and closed there.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar

from nautilus_ranking.fanout.background_loop import BackgroundLoop
from nautilus_ranking.log import get_logger
from nautilus_ranking.sources.postgres.dsn import (
    DEFAULT_CONNECT_TIMEOUT_S,
    MISREAD,
    mask_dsn,
    misread,
    scrub,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

logger = get_logger("nautilus_ranking.sources.postgres")

T = TypeVar("T")


class _ScrubDsns(logging.Filter):
    """psycopg-pool logs its connection errors itself (``error connecting in 'nautilus-kb':
    failed to resolve host "tail@db"``): a record naming one of the pools is scrubbed of
    its DSN's password (:func:`~nautilus_ranking.sources.postgres.dsn.scrub`; for a DSN libpq
    misreads, the driver's words are withheld), any other of every pool's passwords."""

    def __init__(self) -> None:
        super().__init__()
        self.pools: dict[str, str] = {}  # pool name -> DSN

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.pools:
            return True
        message = record.getMessage()
        named = [(name, dsn) for name, dsn in list(self.pools.items()) if name in message]
        if named:
            name, dsn = named[0]
            clean = scrub(message, dsn)
            message = f"pool {name!r}: {MISREAD}" if clean == MISREAD else clean
        else:
            for dsn in list(self.pools.values()):
                if not misread(dsn):
                    message = scrub(message, dsn)
        record.msg, record.args = message, None
        return True


_SCRUB = _ScrubDsns()
logging.getLogger("psycopg.pool").addFilter(_SCRUB)


class _PoolLoop:
    """One event loop in a daemon thread; every pool is created, used and closed on it."""

    def __init__(self) -> None:
        self.runner = BackgroundLoop("nautilus-postgres")
        self.loop = self.runner.loop
        self.pools: dict[str, AsyncConnectionPool[Any]] = {}
        self.users: dict[str, int] = {}
        #: DSNs whose last connection attempt failed: requests try a fresh connection at
        #: once (a fast, clear error) instead of waiting on a pool that has none.
        self.down: set[str] = set()
        self.opening = asyncio.Lock()
        self.background: set[asyncio.Task[None]] = set()

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        return self.runner.submit(coro)

    async def pool(
        self, dsn: str, size: int, name: str, register: bool
    ) -> AsyncConnectionPool[Any]:
        """The DSN's pool (opened on first use, grown if a later source asks for more);
        ``register`` counts a new user, so the pool closes with its last one."""
        async with self.opening:  # two sources of one DSN asking at once get one pool
            pool = self.pools.get(dsn)
            if pool is None:
                pool = self.pools[dsn] = await self._open(dsn, size, name)
                self.users[dsn] = 0
            elif (pool.max_size or 0) < size:
                await pool.resize(pool.min_size, size)
        if register:
            self.users[dsn] += 1
        return pool

    async def renew(self, dsn: str, stale: AsyncConnectionPool[Any]) -> None:
        """Replace a pool that lost every connection while the server was away.

        psycopg-pool retries with exponential back-off, so after an outage it can
        take seconds to reconnect; a fresh pool connects at once.
        """
        if self.pools.get(dsn) is not stale:
            return
        self.pools[dsn] = await self._open(dsn, stale.max_size or 1, stale.name)
        closing = self.loop.create_task(stale.close(timeout=1.0))
        self.background.add(closing)
        closing.add_done_callback(self.background.discard)
        logger.info("postgres_pool_renewed", dsn=mask_dsn(dsn))

    async def _open(self, dsn: str, size: int, name: str) -> AsyncConnectionPool[Any]:
        from psycopg.conninfo import conninfo_to_dict
        from psycopg_pool import AsyncConnectionPool

        kwargs: dict[str, Any] = {}
        if "connect_timeout" not in conninfo_to_dict(dsn):
            kwargs["connect_timeout"] = DEFAULT_CONNECT_TIMEOUT_S
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            dsn,
            min_size=1,
            max_size=size,
            open=False,
            kwargs=kwargs,
            configure=configure,
            name=name,
        )
        _SCRUB.pools[name] = dsn
        await pool.open(wait=False)
        logger.debug("postgres_pool_opened", dsn=mask_dsn(dsn), max_size=size)
        return pool

    async def release(self, dsn: str) -> None:
        self.users[dsn] = self.users.get(dsn, 1) - 1
        if self.users[dsn] <= 0:
            self.users.pop(dsn, None)
            pool = self.pools.pop(dsn, None)
            if pool is not None:
                await pool.close(timeout=1.0)

    async def close_all(self) -> None:
        for dsn in list(self.pools):
            self.users[dsn] = 0
            await self.release(dsn)


_loop: _PoolLoop | None = None
_loop_lock = threading.Lock()


def pool_loop() -> _PoolLoop:
    """The process's pool loop, started on first use."""
    global _loop
    with _loop_lock:
        if _loop is None:
            # psycopg-pool reports each failed connection attempt on stdlib logging; an app
            # that configures logging still sees them, a CLI user gets our one event instead.
            logging.getLogger("psycopg").addHandler(logging.NullHandler())
            _loop = _PoolLoop()
            atexit.register(_shutdown)
        return _loop


def running_pool_loop() -> _PoolLoop | None:
    """The pool loop if one was started (None: no pool to give back)."""
    return _loop


def _shutdown() -> None:
    """Close every pool at interpreter exit (bounded: never hangs the exit)."""
    global _loop
    with _loop_lock:
        current, _loop = _loop, None
    if current is None:
        return
    try:
        current.submit(current.close_all()).result(timeout=3)
    except Exception as exc:
        logger.debug("postgres_pools_close_failed", error_type=type(exc).__name__)
    current.runner.stop(timeout=2)


async def configure(conn: AsyncConnection[Any]) -> None:
    """Every pooled connection: autocommit, so each query opens its own READ ONLY transaction."""
    await conn.set_autocommit(True)
    await conn.set_read_only(True)
