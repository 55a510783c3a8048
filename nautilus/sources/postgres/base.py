"""What the PostgreSQL sources share: the extra, DSN masking, pools, one read-only query path.

Pools live on one event loop in a daemon thread, one ``AsyncConnectionPool`` per
DSN for the whole process. A pool is bound to the loop that opened it, and a
request may come from any loop (the synchronous API's, the service's, a caller's
``asyncio.run``), so a pool on the caller's loop could die with it; on its own loop it
outlives them, and every caller (a CLI request, the service's loop, a test)
awaits the same pool through ``asyncio.wrap_future``. Cancelling the caller (the
broker's per-source timeout) cancels the query's task on the pool loop.

Every query runs in a read-only transaction with ``statement_timeout`` set from
the source's ``timeout_s``, values bound as parameters and identifiers quoted by
``psycopg.sql``. A connection the server dropped (restart, failover) is
discarded and the query retried once on a fresh one; with the database down, a
request fails with one clear ``PostgresUnavailableError`` and the next request
after it is back succeeds, without restarting anything.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import math
import re
import threading
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import Field, SecretStr, field_validator

from nautilus.errors import NautilusError
from nautilus.log import get_logger
from nautilus.sources.base import Row
from nautilus.sources.schema import SourceSpec
from nautilus.workers import in_worker

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.sql import Composable, Composed
    from psycopg_pool import AsyncConnectionPool

logger = get_logger("nautilus.sources.postgres")

EXTRA_HINT = "pip install 'nautilus-ranking[postgres]'"
#: A connection attempt gives up after this long unless the DSN sets ``connect_timeout``.
DEFAULT_CONNECT_TIMEOUT_S = 10
T = TypeVar("T")


class PostgresUnavailableError(NautilusError, ConnectionError):
    """The database cannot be reached right now (the message names it, password masked)."""


class PostgresSourceError(NautilusError, RuntimeError):
    """A query failed for a reason that is not the database being down."""


def require_postgres() -> None:
    """Fail with the extra's name when psycopg or psycopg-pool is not installed."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"PostgreSQL sources need the postgres extra: {EXTRA_HINT} "
                          f"({exc.name or 'psycopg'} is not installed)") from exc


# --- DSNs --------------------------------------------------------------------------------

# libpq's keyword values: '…' with \' and \\ escapes, or a bare word in which a
# backslash escapes the next character (``password=Hunter\ TWO`` is "Hunter TWO").
# An unterminated quote or a trailing backslash masks to the end, never less.
_URL_FORM = re.compile(r"\s*[A-Za-z][A-Za-z0-9+.\-]*://")
_KEYWORD_PASSWORD = re.compile(
    r"(password\s*=\s*)('(?:\\[\s\S]?|[^'\\])*'?|(?:\\[\s\S]?|[^\s\\])+)", re.IGNORECASE)


def mask_dsn(dsn: str) -> str:
    """The DSN with its password replaced by ``***`` (URL or ``key=value`` form)."""
    if not _URL_FORM.match(dsn):  # a URL starts with its scheme; "://" may be in a password
        return _KEYWORD_PASSWORD.sub(r"\1***", dsn)
    try:
        parts = urlsplit(dsn)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, host = netloc.rsplit("@", 1)
            if ":" in userinfo:
                userinfo = userinfo.split(":", 1)[0] + ":***"
            netloc = f"{userinfo}@{host}"
        query = urlencode([(k, "***" if k.lower() == "password" else v)
                           for k, v in parse_qsl(parts.query, keep_blank_values=True)],
                          safe="/:*")
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        return "(unparsable DSN, masked)"


def scrub(text: str, dsn: str) -> str:
    """``text`` with the DSN's password (if it appears, e.g. in a driver's error) masked."""
    secrets = [dsn]
    try:
        from psycopg.conninfo import conninfo_to_dict
        password = conninfo_to_dict(dsn).get("password")
        if password:
            secrets.append(str(password))
    except Exception:  # an unparsable DSN: mask the whole string, that is all we can do
        pass
    for secret in secrets:
        if secret:
            text = text.replace(secret, mask_dsn(dsn) if secret == dsn else "***")
    return text


class Dsn(SecretStr):
    """A connection string that shows only its masked form in ``repr``, ``str`` and dumps."""

    def _display(self) -> str:
        return mask_dsn(self.get_secret_value())


# --- the sources-file model every PostgreSQL type shares ----------------------------------

class PostgresSpec(SourceSpec):
    """Options of every ``postgres_*`` type (``dsn`` usually ``${VAR}``, expanded before)."""

    dsn: Dsn
    table: str = Field(min_length=1)
    columns: list[str] = Field(min_length=1)
    id_field: str = Field(default="id", min_length=1)
    limit: int | None = Field(default=None, ge=1)
    pool_size: int = Field(default=4, ge=1, le=100)
    seed: str | None = None

    @field_validator("dsn")
    @classmethod
    def _valid_dsn(cls, value: Dsn) -> Dsn:
        raw = value.get_secret_value()
        try:
            from psycopg.conninfo import conninfo_to_dict
        except ImportError:
            return value  # the source's build() names the missing extra
        try:
            conninfo_to_dict(raw)
        except Exception as exc:
            raise ValueError(f"not a valid PostgreSQL connection string "
                             f"({mask_dsn(raw)}): {scrub(str(exc), raw)}") from None
        return value

    @field_validator("columns")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        if any(not name for name in value):
            raise ValueError("column names must not be empty")
        return value


def table_identifier(name: str) -> Composable:
    """``schema.table`` or ``table`` as a quoted identifier."""
    from psycopg import sql
    parts = name.split(".")
    if len(parts) > 2 or not all(parts):
        raise ValueError(f"table must be 'name' or 'schema.name', got {name!r}")
    return sql.Identifier(*parts)


# --- the loop that owns the pools ---------------------------------------------------------

class _PoolLoop:
    """One event loop in a daemon thread; every pool is created, used and closed on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever,
                                       name="nautilus-postgres", daemon=True)
        self.thread.start()
        self.pools: dict[str, AsyncConnectionPool[Any]] = {}
        self.users: dict[str, int] = {}
        #: DSNs whose last connection attempt failed: requests try a fresh connection at
        #: once (a fast, clear error) instead of waiting on a pool that has none.
        self.down: set[str] = set()
        self.opening = asyncio.Lock()
        self.background: set[asyncio.Task[None]] = set()

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    async def pool(self, dsn: str, size: int, name: str,
                   register: bool) -> AsyncConnectionPool[Any]:
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
            dsn, min_size=1, max_size=size, open=False, kwargs=kwargs, configure=_configure,
            name=name)
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


def _pool_loop() -> _PoolLoop:
    global _loop
    with _loop_lock:
        if _loop is None:
            # psycopg-pool reports each failed connection attempt on stdlib logging; an app
            # that configures logging still sees them, a CLI user gets our one event instead.
            logging.getLogger("psycopg").addHandler(logging.NullHandler())
            _loop = _PoolLoop()
            atexit.register(_shutdown)
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
    current.loop.call_soon_threadsafe(current.loop.stop)
    current.thread.join(timeout=2)


async def _configure(conn: AsyncConnection[Any]) -> None:
    """Every pooled connection: autocommit, so each query opens its own READ ONLY transaction."""
    await conn.set_autocommit(True)
    await conn.set_read_only(True)


# --- the source base ----------------------------------------------------------------------

class PostgresSource:
    """A table in PostgreSQL, queried through the DSN's shared pool.

    Subclasses build one statement (``statement``) and turn its records into
    rows (``to_row``); ``before`` may run checks in the same transaction.
    """

    #: Whether the order of the rows is evidence of relevance (the ranker uses it);
    #: a spec's ``ranked`` overrides it per source.
    ranked: bool = True
    #: Whether ``statement`` does CPU work (embedding the query) and belongs in a thread.
    prepare_in_thread: ClassVar[bool] = False

    def __init__(self, source_id: str, dsn: str, table: str, columns: Sequence[str],
                 id_field: str = "id", limit: int | None = None, timeout_s: float = 5.0,
                 pool_size: int = 4) -> None:
        require_postgres()
        from psycopg import sql
        self.id = source_id
        self.dsn = dsn
        self.table_name = table
        self.table = table_identifier(table)
        self.columns = list(columns)
        self.id_field = id_field
        self.id_column = sql.Identifier(id_field)
        self.limit = limit
        self.timeout_s = timeout_s
        self.pool_size = pool_size
        self._registered = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r}, dsn={mask_dsn(self.dsn)!r})"

    # subclass hooks
    def statement(self, query: str, limit: int) -> tuple[Composed, Sequence[Any]] | None:
        raise NotImplementedError

    def to_row(self, record: Sequence[Any]) -> Row:
        doc = record[0]
        return dict(doc) if isinstance(doc, Mapping) else {"value": doc}

    async def before(self, conn: AsyncConnection[Any],
                     limit: int) -> Callable[[], Awaitable[None]] | None:
        """Queue settings and checks in the query's pipeline; return what verifies the
        checks once the results are in (the vector source's model), if anything."""
        return None

    def explain(self, error: Exception) -> Exception | None:
        """A clearer error for a driver error this source understands, else None: a table
        or column that is not there is, almost always, a table ``nautilus load`` never
        filled (or one loaded from another seed)."""
        from psycopg import errors
        if isinstance(error, errors.UndefinedTable):
            return PostgresSourceError(
                f"{self.id}: table {self.table_name!r} does not exist in "
                f"{mask_dsn(self.dsn)}: create and fill it with 'nautilus load --config "
                f"<this sources file>' (it loads each source's seed), or set 'table' to a "
                f"table that exists")
        if isinstance(error, errors.UndefinedColumn):
            detail = str(error).strip().splitlines()[0] if str(error).strip() else ""
            return PostgresSourceError(
                f"{self.id}: {scrub(detail, self.dsn)} (table {self.table_name!r}, columns "
                f"{self.columns}): load the seed that has them with 'nautilus load', or "
                f"name the table's own columns in 'columns'")
        return None

    # the query path
    async def search(self, query: str, context: Mapping[str, Any], limit: int) -> list[Row]:
        n = min(limit, self.limit) if self.limit else limit
        if not query.strip() or n < 1:
            return []
        prepared = (await in_worker(self, self.statement, query, n) if self.prepare_in_thread
                    else self.statement(query, n))
        if prepared is None:
            return []
        return await asyncio.wrap_future(_pool_loop().submit(self._run(prepared, n)))

    def close(self) -> None:
        """Give back this source's share of the DSN's pool (closed with its last user)."""
        if not self._registered or _loop is None:
            return
        self._registered = False
        try:
            _loop.submit(_loop.release(self.dsn)).result(timeout=3)
        except Exception as exc:
            logger.warning("postgres_pool_close_failed", source_id=self.id,
                           dsn=mask_dsn(self.dsn), error_type=type(exc).__name__)

    async def _run(self, prepared: tuple[Composed, Sequence[Any]], limit: int) -> list[Row]:
        import psycopg
        try:
            return await self._with_connection(lambda conn: self._query(conn, prepared, limit))
        except (PostgresUnavailableError, PostgresSourceError):
            raise
        except psycopg.Error as exc:
            message = str(exc)
            clean = scrub(message, self.dsn)
            if clean != message:
                raise PostgresSourceError(clean) from None
            raise

    async def _with_connection(self, work: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T:
        import psycopg
        from psycopg_pool import PoolTimeout

        loop = _pool_loop()
        pool = await loop.pool(self.dsn, self.pool_size, f"nautilus-{self.id}",
                               register=not self._registered)
        self._registered = True
        if self.dsn in loop.down:
            return await self._direct(work, pool)
        wait = max(0.1, self.timeout_s / 2)
        for attempt in (1, 2):
            try:
                async with pool.connection(timeout=wait) as conn:
                    try:
                        return await work(conn)
                    except psycopg.OperationalError:
                        if not conn.broken or attempt == 2:
                            raise
                # the server dropped the connection (restart, failover): the pool discards
                # it on return; drop every other dead idle one too, then retry once.
                logger.info("postgres_connection_lost", source_id=self.id,
                            dsn=mask_dsn(self.dsn), action="retrying on a fresh connection")
                await pool.check()
            except PoolTimeout:
                return await self._direct(work, pool)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _direct(self, work: Callable[[AsyncConnection[Any]], Awaitable[T]],
                      pool: AsyncConnectionPool[Any]) -> T:
        """No pooled connection in time: say why (a fresh connection attempt), or use it
        (and when the pool had lost every connection, replace it: the server is back)."""
        import psycopg
        loop = _pool_loop()
        try:
            conn = await psycopg.AsyncConnection.connect(
                self.dsn, connect_timeout=max(1, math.ceil(self.timeout_s / 2)))
        except psycopg.Error as exc:
            loop.down.add(self.dsn)
            reason = scrub(str(exc).strip().splitlines()[0] if str(exc).strip() else
                           type(exc).__name__, self.dsn)
            logger.warning("postgres_unavailable", source_id=self.id, dsn=mask_dsn(self.dsn),
                           error=reason[:300])
            raise PostgresUnavailableError(
                f"database unavailable ({mask_dsn(self.dsn)}): {reason}") from None
        if self.dsn in loop.down or pool.get_stats().get("pool_size", 0) == 0:
            loop.down.discard(self.dsn)
            await loop.renew(self.dsn, pool)
            logger.info("postgres_available", source_id=self.id, dsn=mask_dsn(self.dsn))
        async with conn:
            await _configure(conn)
            return await work(conn)

    async def _query(self, conn: AsyncConnection[Any], prepared: tuple[Composed, Sequence[Any]],
                     limit: int) -> list[Row]:
        """BEGIN READ ONLY, the timeout, the source's checks, the query and COMMIT, sent
        as one pipeline: one round trip to the server instead of five."""
        import psycopg
        statement, params = prepared
        try:
            async with conn.pipeline(), conn.transaction():
                await conn.execute("SELECT set_config('statement_timeout', %s, true)",
                                   (f"{max(1, round(self.timeout_s * 1000))}ms",))
                verify = await self.before(conn, limit)
                cursor = await conn.execute(statement, params)
                records = await cursor.fetchall()
                if verify is not None:
                    await verify()
        except psycopg.Error as exc:
            clearer = self.explain(exc)
            if clearer is not None:
                raise clearer from None
            raise
        return [self.to_row(record) for record in records]


def finish(spec: PostgresSpec, source: PostgresSource) -> PostgresSource:
    """Apply the options every source type shares after construction (``ranked``)."""
    if spec.ranked is not None:
        source.ranked = spec.ranked
    return source


def spec_kwargs(spec: PostgresSpec) -> dict[str, Any]:
    """The constructor arguments every PostgreSQL source takes, from its spec."""
    return {"source_id": spec.id, "dsn": spec.dsn.get_secret_value(), "table": spec.table,
            "columns": spec.columns, "id_field": spec.id_field, "limit": spec.limit,
            "timeout_s": spec.timeout_s, "pool_size": spec.pool_size}

