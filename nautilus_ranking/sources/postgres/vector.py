"""pgvector: the query embedded with the configured embedder, nearest by cosine distance ``<=>``.

Vectors know their model: the table ``nautilus_vector_models`` (written by
``nautilus-ranking load``) records which model made each vector column, and a query
embedded by another model is refused with an error naming both — vectors from
different spaces are never compared. Each row carries its ``distance``, its
``embedding`` as a list of floats (JSON-native) and the ``embedding_model``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from nautilus_ranking.embedders import Embedder, embedder_from_name
from nautilus_ranking.embedders.registry import embedder_name_of
from nautilus_ranking.sources.base import Row, Source
from nautilus_ranking.sources.postgres.base import (
    PostgresSource,
    PostgresSourceError,
    PostgresSpec,
    finish,
    spec_kwargs,
)
from nautilus_ranking.sources.schema import BuildContext, register_source_type

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg.sql import Composed

MODELS_TABLE = "nautilus_vector_models"
#: HNSW's default ``ef_search`` (40) caps how many neighbours a scan returns.
HNSW_EF_SEARCH_DEFAULT = 40


class VectorModelMismatchError(PostgresSourceError):
    """The stored vectors were made by another model than the one embedding the query."""


def model_id(embedder: Embedder) -> str:
    return str(getattr(embedder, "model_id", type(embedder).__name__))


class PgvectorSource(PostgresSource):
    """Rows of ``table`` nearest the query by cosine distance over ``embedding_column``."""

    prepare_in_thread: ClassVar[bool] = True
    #: Its vectors were made by ``nautilus-ranking load`` and are kept: another embedder
    #: needs the table reloaded (``load --replace``), not only its queries re-embedded.
    stores_vectors: ClassVar[bool] = True

    def __init__(
        self,
        source_id: str,
        dsn: str,
        table: str,
        columns: Sequence[str],
        embedder: Embedder,
        id_field: str = "id",
        limit: int | None = None,
        timeout_s: float = 5.0,
        pool_size: int = 4,
        embedding_column: str = "embedding",
    ) -> None:
        super().__init__(source_id, dsn, table, columns, id_field, limit, timeout_s, pool_size)
        self.embedder = embedder
        self.model_id = model_id(embedder)
        self.embedding_column = embedding_column

    def statement(self, query: str, limit: int) -> tuple[Composed, Sequence[Any]] | None:
        from psycopg import sql

        vector = [float(x) for x in self.embedder.embed(query)]
        if not any(vector):
            return None  # no known word: every distance would be undefined
        column = sql.Identifier("t", self.embedding_column)
        # The WHERE gate is a one-time filter: with another model's vectors in the table
        # no distance is ever computed, and ``before``'s check says why.
        statement = sql.SQL(
            "SELECT to_jsonb(t) - %s::text[], {column}::real[], {column} <=> %s::vector AS d "
            "FROM {table} AS t WHERE ({model}) = %s ORDER BY d LIMIT %s"
        ).format(column=column, table=self.table, model=self._model_query())
        literal = "[" + ",".join(repr(x) for x in vector) + "]"
        return statement, [
            [self.embedding_column],
            literal,
            self.table_name,
            self.embedding_column,
            self.model_id,
            limit,
        ]

    def _model_query(self) -> Composed:
        from psycopg import sql

        return sql.SQL("SELECT model FROM {} WHERE table_name = %s AND column_name = %s").format(
            sql.Identifier(MODELS_TABLE)
        )

    async def before(
        self, conn: AsyncConnection[Any], limit: int
    ) -> Callable[[], Awaitable[None]] | None:
        if limit > HNSW_EF_SEARCH_DEFAULT:
            await conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(limit),))
        cursor = await conn.execute(self._model_query(), (self.table_name, self.embedding_column))

        async def verify() -> None:
            record = await cursor.fetchone()
            if record is None:
                raise PostgresSourceError(
                    f"{self.id}: {MODELS_TABLE} has no entry for {self.table_name}."
                    f"{self.embedding_column}; load it with 'nautilus-ranking load'"
                )
            if record[0] != self.model_id:
                name = embedder_name_of(str(record[0]))
                fix = (
                    f"set NAUTILUS_EMBEDDER={name}"
                    if name is not None and name != embedder_name_of(self.model_id)
                    else "query with the embedder and dim that loaded the table"
                )
                raise VectorModelMismatchError(
                    f"{self.id}: the vectors in {self.table_name}.{self.embedding_column} were "
                    f"made by {record[0]!r}, the query would be embedded by "
                    f"{self.model_id!r}: vectors of different models are never compared "
                    f"({fix}, or reload the table: nautilus-ranking load --replace)"
                )

        return verify

    def explain(self, error: Exception) -> Exception | None:
        from psycopg import errors

        if isinstance(error, errors.UndefinedTable) and MODELS_TABLE in str(error):
            return PostgresSourceError(
                f"{self.id}: no {MODELS_TABLE} table says which model made the vectors of "
                f"{self.table_name}.{self.embedding_column}; load it with 'nautilus-ranking load'"
            )
        return super().explain(error)

    def to_row(self, record: Sequence[Any]) -> Row:
        return {
            **super().to_row(record),
            "embedding": [float(x) for x in record[1]],
            "embedding_model": self.model_id,
            "distance": float(record[2]),
        }


def vector_embedder(embedder_name: str, dim: int, cache_size: int) -> Embedder:
    """The embedder a vector source stores and queries with (``noop`` stores lexical vectors)."""
    return embedder_from_name(
        "hashing" if embedder_name == "noop" else embedder_name, dim, cache_size
    )


@register_source_type
class PgvectorSpec(PostgresSpec):
    type: Literal["pgvector"]
    embedding_column: str = Field(default="embedding", min_length=1)
    dim: int = Field(default=1024, ge=16, le=2000)  # the hashing embedder's size (HNSW: ≤ 2000)
    layout: Literal["columns", "nautilus-broker"] = Field(
        default="columns",
        description="columns: a column per seed field (this source's own); "
        "nautilus-broker: id, metadata (jsonb) and the vectors, as the Nautilus broker's "
        "pgvector adapter reads them (written by nautilus-ranking load)",
    )

    def build(self, ctx: BuildContext) -> Source:
        return finish(
            self,
            PgvectorSource(
                **spec_kwargs(self),
                embedder=vector_embedder(ctx.embedder_name, self.dim, ctx.cache_size),
                embedding_column=self.embedding_column,
            ),
        )
