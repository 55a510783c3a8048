"""A plain PostgreSQL table with a keyword filter: rows in table (id) order, unranked.

Like most SQL sources a broker fans out to, its order says nothing about
relevance (``ranked = False``): ``ILIKE`` on any of the query's word stems,
wildcards in the query escaped, ordered by ``order_by`` (default the id).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from nautilus_ranking.sources.base import Source
from nautilus_ranking.sources.postgres.base import PostgresSource, PostgresSpec, finish, spec_kwargs
from nautilus_ranking.sources.schema import BuildContext, register_source_type
from nautilus_ranking.sources.sql import MAX_KEYWORDS, like_pattern
from nautilus_ranking.text.tokens import keyword_stems

if TYPE_CHECKING:
    from psycopg.sql import Composed


class PostgresTableSource(PostgresSource):
    """Rows whose ``columns`` contain any of the query's word stems (``ILIKE``)."""

    ranked = False

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
        order_by: str | None = None,
    ) -> None:
        super().__init__(source_id, dsn, table, columns, id_field, limit, timeout_s, pool_size)
        self.order_by = order_by or id_field

    def statement(self, query: str, limit: int) -> tuple[Composed, Sequence[Any]] | None:
        from psycopg import sql

        words = keyword_stems(query)[:MAX_KEYWORDS]
        if not words:
            return None
        clauses = sql.SQL(" OR ").join(
            sql.SQL("t.{}::text ILIKE %s").format(sql.Identifier(column))
            for _ in words
            for column in self.columns
        )
        params: list[Any] = [like_pattern(w) for w in words for _ in self.columns]
        statement = sql.SQL(
            "SELECT to_jsonb(t) FROM {table} AS t WHERE {clauses} ORDER BY t.{order} LIMIT %s"
        ).format(table=self.table, clauses=clauses, order=sql.Identifier(self.order_by))
        return statement, [*params, limit]


@register_source_type
class PostgresTableSpec(PostgresSpec):
    type: Literal["postgres_table"]
    order_by: str | None = Field(default=None, min_length=1)

    def build(self, ctx: BuildContext) -> Source:
        return finish(self, PostgresTableSource(**spec_kwargs(self), order_by=self.order_by))
