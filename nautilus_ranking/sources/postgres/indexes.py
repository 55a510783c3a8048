"""The index a loaded table gets for its source type's query: a GIN index on the
tsvector (a stored generated column when ``tsvector_column`` is set, else the same
expression the source queries), or an HNSW index (``vector_cosine_ops``) on the
embeddings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nautilus_ranking.sources.postgres.base import PostgresSpec
from nautilus_ranking.sources.postgres.fts import PostgresFtsSpec, tsvector_expression
from nautilus_ranking.sources.postgres.vector import PgvectorSpec

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg.sql import Composable, Composed


def build_index(conn: Connection[Any], spec: PostgresSpec, table: Composable) -> None:
    """The index the source's queries use (GIN on the tsvector, HNSW on the vectors),
    then ANALYZE so the planner knows the table."""
    from psycopg import sql

    base = spec.table.replace(".", "_")
    if isinstance(spec, PostgresFtsSpec):
        expression = tsvector_expression(spec.columns, spec.language)
        if spec.tsvector_column:
            conn.execute(
                sql.SQL(
                    "ALTER TABLE {} ADD COLUMN IF NOT EXISTS {} tsvector "
                    "GENERATED ALWAYS AS ({}) STORED"
                ).format(table, sql.Identifier(spec.tsvector_column), expression)
            )
            indexed: Composed = sql.SQL("({})").format(sql.Identifier(spec.tsvector_column))
            name = f"{base}_{spec.tsvector_column}_gin"
        else:
            indexed = sql.SQL("(({}))").format(expression)
            name = f"{base}_tsv_gin"
        conn.execute(
            sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING gin {}").format(
                sql.Identifier(name[:63]), table, indexed
            )
        )
    elif isinstance(spec, PgvectorSpec):
        name = f"{base}_{spec.embedding_column}_hnsw"
        conn.execute(
            sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING hnsw ({} vector_cosine_ops)").format(
                sql.Identifier(name[:63]), table, sql.Identifier(spec.embedding_column)
            )
        )
    conn.execute(sql.SQL("ANALYZE {}").format(table))
