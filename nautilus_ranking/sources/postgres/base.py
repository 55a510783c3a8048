"""What the PostgreSQL sources share: the extra, the sources-file model, one read-only
query path (DSNs are masked in ``dsn.py``; the pools live in ``pools.py``).

Every caller (a CLI request, the service's loop, a test) awaits the DSN's one pool
on the pool loop through ``asyncio.wrap_future``. Cancelling the caller (the
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
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from pydantic import Field, field_validator

from nautilus_ranking.errors import NautilusError
from nautilus_ranking.fanout.workers import in_worker
from nautilus_ranking.log import get_logger
from nautilus_ranking.sources.base import Row, SourceBase, with_id
from nautilus_ranking.sources.postgres.dsn import Dsn, mask_dsn, scrub
from nautilus_ranking.sources.postgres.pools import configure, pool_loop, running_pool_loop
from nautilus_ranking.sources.schema import SourceSpec

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.sql import Composable, Composed
    from psycopg_pool import AsyncConnectionPool

logger = get_logger("nautilus_ranking.sources.postgres")

EXTRA_HINT = "pip install 'nautilus-ranking[postgres]'"
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
        raise ImportError(
            f"PostgreSQL sources need the postgres extra: {EXTRA_HINT} "
            f"({exc.name or 'psycopg'} is not installed)"
        ) from exc


# --- the sources-file model every PostgreSQL type shares ----------------------------------


class PostgresSpec(SourceSpec):
    """Options of every ``postgres_*`` type (``dsn`` usually ``${VAR}``, expanded before)."""

    dsn: Dsn
    table: str = Field(min_length=1)
    columns: list[str] = Field(min_length=1)
    id_field: str = Field(
        default="id",
        min_length=1,
        description="column that is the row's id (answered as 'id'); "
        "the table's primary key when `nautilus-ranking load` makes it",
    )
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
            raise ValueError(
                f"not a valid PostgreSQL connection string "
                f"({mask_dsn(raw)}): {scrub(str(exc), raw)}"
            ) from None
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


# --- the source base ----------------------------------------------------------------------


class PostgresSource(SourceBase):
    """A table in PostgreSQL, queried through the DSN's shared pool.

    Subclasses build one statement (``statement``) and turn its records into
    rows (``to_row``); ``before`` may run checks in the same transaction.
    """

    #: Whether the order of the rows is evidence of relevance (the ranker uses it);
    #: a spec's ``ranked`` overrides it per source.
    ranked: bool | None = True
    #: Whether ``statement`` does CPU work (embedding the query) and belongs in a thread.
    prepare_in_thread: ClassVar[bool] = False

    def __init__(
        self,
        source_id: str,
        dsn: str,
        table: str,
        columns: Sequence[str],
        id_field: str = "id",
        limit: int | None = None,
        timeout_s: float = 5.0,
        pool_size: int = 4,
    ) -> None:
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

    async def before(
        self, conn: AsyncConnection[Any], limit: int
    ) -> Callable[[], Awaitable[None]] | None:
        """Queue settings and checks in the query's pipeline; return what verifies the
        checks once the results are in (the vector source's model), if anything."""
        return None

    def explain(self, error: Exception) -> Exception | None:
        """A clearer error for a driver error this source understands, else None: a table
        or column that is not there is, almost always, a table ``nautilus-ranking load`` never
        filled (or one loaded from another seed)."""
        from psycopg import errors

        if isinstance(error, errors.UndefinedTable):
            return PostgresSourceError(
                f"{self.id}: table {self.table_name!r} does not exist in "
                f"{mask_dsn(self.dsn)}: create and fill it with 'nautilus-ranking load --config "
                f"<this sources file>' (it loads each source's seed), or set 'table' to a "
                f"table that exists"
            )
        if isinstance(error, errors.UndefinedColumn):
            detail = str(error).strip().splitlines()[0] if str(error).strip() else ""
            return PostgresSourceError(
                f"{self.id}: {scrub(detail, self.dsn)} (table {self.table_name!r}, columns "
                f"{self.columns}): load the seed that has them with 'nautilus-ranking load', or "
                f"name the table's own columns in 'columns'"
            )
        return None

    # the query path
    async def search(self, query: str, context: Mapping[str, Any], limit: int) -> list[Row]:
        n = min(limit, self.limit) if self.limit else limit
        if not query.strip() or n < 1:
            return []
        prepared = (
            await in_worker(self, self.statement, query, n)
            if self.prepare_in_thread
            else self.statement(query, n)
        )
        if prepared is None:
            return []
        return await asyncio.wrap_future(pool_loop().submit(self._run(prepared, n)))

    def close(self) -> None:
        """Give back this source's share of the DSN's pool (closed with its last user)."""
        loop = running_pool_loop()
        if not self._registered or loop is None:
            return
        self._registered = False
        try:
            loop.submit(loop.release(self.dsn)).result(timeout=3)
        except Exception as exc:
            logger.warning(
                "postgres_pool_close_failed",
                source_id=self.id,
                dsn=mask_dsn(self.dsn),
                error_type=type(exc).__name__,
            )

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

        loop = pool_loop()
        pool = await loop.pool(
            self.dsn, self.pool_size, f"nautilus-{self.id}", register=not self._registered
        )
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
                logger.info(
                    "postgres_connection_lost",
                    source_id=self.id,
                    dsn=mask_dsn(self.dsn),
                    action="retrying on a fresh connection",
                )
                await pool.check()
            except PoolTimeout:
                return await self._direct(work, pool)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _direct(
        self, work: Callable[[AsyncConnection[Any]], Awaitable[T]], pool: AsyncConnectionPool[Any]
    ) -> T:
        """No pooled connection in time: say why (a fresh connection attempt), or use it
        (and when the pool had lost every connection, replace it: the server is back)."""
        import psycopg

        loop = pool_loop()
        try:
            conn = await psycopg.AsyncConnection.connect(
                self.dsn, connect_timeout=max(1, math.ceil(self.timeout_s / 2))
            )
        except (psycopg.Error, OSError, ValueError) as exc:  # ValueError: a host IDNA refuses
            loop.down.add(self.dsn)
            reason = scrub(
                str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
                self.dsn,
            )
            logger.warning(
                "postgres_unavailable",
                source_id=self.id,
                dsn=mask_dsn(self.dsn),
                error=reason[:300],
            )
            raise PostgresUnavailableError(
                f"database unavailable ({mask_dsn(self.dsn)}): {reason}"
            ) from None
        if self.dsn in loop.down or pool.get_stats().get("pool_size", 0) == 0:
            loop.down.discard(self.dsn)
            await loop.renew(self.dsn, pool)
            logger.info("postgres_available", source_id=self.id, dsn=mask_dsn(self.dsn))
        async with conn:
            await configure(conn)
            return await work(conn)

    async def _query(
        self, conn: AsyncConnection[Any], prepared: tuple[Composed, Sequence[Any]], limit: int
    ) -> list[Row]:
        """BEGIN READ ONLY, the timeout, the source's checks, the query and COMMIT, sent
        as one pipeline: one round trip to the server instead of five."""
        import psycopg

        statement, params = prepared
        try:
            async with conn.pipeline(), conn.transaction():
                await conn.execute(
                    "SELECT set_config('statement_timeout', %s, true)",
                    (f"{max(1, round(self.timeout_s * 1000))}ms",),
                )
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
        return [with_id(self.to_row(record), self.id_field) for record in records]


def finish(spec: PostgresSpec, source: PostgresSource) -> PostgresSource:
    """Apply the options every source type shares after construction (``ranked``)."""
    if spec.ranked is not None:
        source.ranked = spec.ranked
    return source


def spec_kwargs(spec: PostgresSpec) -> dict[str, Any]:
    """The constructor arguments every PostgreSQL source takes, from its spec."""
    return {
        "source_id": spec.id,
        "dsn": spec.dsn.get_secret_value(),
        "table": spec.table,
        "columns": spec.columns,
        "id_field": spec.id_field,
        "limit": spec.limit,
        "timeout_s": spec.timeout_s,
        "pool_size": spec.pool_size,
    }
